"""End to end through the MLflow UI: a tiny CPU sweep logged by the real CLI to a real MLflow server
(started by scripts/mlflow-server.sh), then read back in headless Chromium as a person would.

Needs Debian's Chromium (`scripts/install-browser.sh`); skipped without it outside CI, fails in CI.

What MLflow 3.17's UI looks like (the selectors below):
- The experiment page opens in the "GenAI" workflow (an Overview of traces, a "Detect Issues" popover
  over it) unless the URL says `?workflowType=machine_learning` or the sidebar's "GenAI | Model
  training" switch (on every page, the home page's too) says "Model training": the browser remembers it
  (localStorage `mlflow.workflowType`, GenAI at first); the experiment's tag `mlflow.experimentKind` no
  longer decides it (the bundle's `useExperimentKind` reads the switch once workflow navigation is on,
  as it always is in 3.17). Then `#/experiments/<id>/runs` is the runs table, an AG Grid
  (`div.ag-row[row-id=<run id>]`).
- The experiment's description (markdown, the tag `mlflow.note.content`) is a banner above every page
  of the experiment, cut to its first line (a box 32 px high, `overflow: hidden`): the latest sweep's
  answer is that line. On a fresh browser's first page the "MLflow Assistant" panel opens beside it.
- The home page (`#/`) lists recent experiments as links `a[href="#/experiments/<id>"]`.
- A run's name is a link `a[href="#/experiments/<id>/runs/<run id>"]` in the `Run Name` cell. A parent
  run's cell starts with an icon-only expand button (no label; the first `button` of the cell); its
  children are collapsed at first and, once expanded, come right after it as rows of their own whose
  name is indented one level further (a spacer 24 px wider): nesting shows as geometry, not as AG
  Grid tree levels (every row is `ag-row-level-0`).
- The run page's Overview has a "Metrics (N)" section: a "Search metrics" box over a table with
  role=table, rows role=row, cells role=cell (metric name as a link, then the value). The description
  is markdown rendered in `[data-testid="note-editor-preview-content"]`.
- A saved view (`?viewStateShareKey=<id>`, pipeline/sweep/view.py) sorted by a metric lists the runs
  flat; its columns are header cells `.ag-header-cell[col-id="tags.`<name>`"]` (the rounded figures are
  tags: MLflow shows a metric's every digit) and, per row, cells with the same col-id. The runs page's
  mode toggle is a radio group (`input[name="runs-view-mode"]`, values TABLE, CHART, ARTIFACT); CHART
  shows collapsible sections headed `<name> (<number of charts>)`
  (`[data-testid="experiment-view-compare-runs-section-header"]`), each chart titled by an
  `h4[title=<metric>]`.

Screenshots go to outputs/; with UI_SCREENSHOTS=docs/img the README's (the answer two clicks from the
home page, the sweep's view, its charts, a child run, the sweep's parent run, an inference sweep's view)
are written there too: `UI_SCREENSHOTS=docs/img .venv/bin/python
-m pytest -p no:cacheprovider tests/test_ui.py` retakes them.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, TINY, output, run_cli
from tests.mlflow_server import Server, start_server

pytestmark = pytest.mark.integration

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
# --disable-background-networking & co: on a closed network Chromium's own background connections
# (updates, sync, field trials) are refused and slow every page down.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 180_000  # a 2-core machine renders the UI's first page in tens of seconds
LOADED_MS = 15_000  # for what is on a page once it has rendered
SHOTS = ROOT / "outputs"
PUBLISHED = os.environ.get("UI_SCREENSHOTS")  # a folder for the README's screenshots (docs/img)
# The UI's subject is the UI: the compiled job on aot_eager (an inductor compile is a minute on 2 cores);
# the README's screenshots show inductor, what a user runs (its perf hints: tests/test_template.py).
BACKEND = "inductor" if PUBLISHED else "aot_eager"
SWEEP_ARGS = [*TINY, "compile.mode=eager,default", f"compile.backend={BACKEND}"]
if PUBLISHED:  # the README's screenshots: jobs measured as a user's are, until decided
    SWEEP_ARGS += ["benchmark.budget_s=15", "benchmark.rounds=10", "benchmark.round_s=0.02"]
# The sweep's view: what a user compares without clicking (pipeline/sweep/view.py), rounded, as tags.
AT_A_GLANCE = ("verdict", "step p50 ms", "speedup vs eager", "compile s")
VIEWPORT = {"width": 1440, "height": 900}  # the laptop
NUMBER = re.compile(r"\d[\d.,]*")
# A second sweep over the same axes, of another scenario (its name must differ from the first's).
OTHER_SCENARIO_ARGS = [*TINY, "scenario=inference", "compile.mode=eager,default", "compile.backend=aot_eager"]


def _require_browser() -> None:
    """Outside CI a missing browser skips; in CI (env CI set) it is an error."""
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (install it with scripts/install-browser.sh)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright Python package (pip install -e '.[dev]')")
    if not missing:
        return
    if os.environ.get("CI"):
        pytest.fail(f"UI test needs {' and '.join(missing)}; CI must provide it")
    pytest.skip(f"UI test needs {' and '.join(missing)}")


# --------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    srv = start_server(tmp_path_factory.mktemp("mlflow-server"))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def sweep(server: Server, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The real CLI runs a 2-job sweep (eager, and default mode on aot_eager) logging to the server."""
    from mlflow.tracking import MlflowClient

    tmp = tmp_path_factory.mktemp("sweep")
    proc = run_cli(SWEEP_ARGS, tmp, server.url, multirun=True)
    assert proc.returncode == 0, output(proc) + "\n--- server log\n" + server.log_tail()
    client = MlflowClient(server.url)
    exp = client.get_experiment_by_name("compile-sweeps")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    (parent,) = [r for r in runs if r.data.tags.get("sweep_parent") == "true"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert {r.info.run_name for r in children} == {"vit_tiny·amp·eager", f"vit_tiny·amp·default·{BACKEND}"}
    assert all(r.info.status == "FINISHED" for r in children)
    return {
        "experiment_id": exp.experiment_id,
        "parent": parent,
        "children": children,
        "view_url": view_url(proc.stdout),
    }


def view_url(stdout: str) -> str:
    """The sweep's view, as the sweep's last `browse:` line gives it."""
    return [line.removeprefix("browse: ") for line in stdout.splitlines() if line.startswith("browse: ")][-1]


@pytest.fixture(scope="module")
def browser():
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=TIMEOUT_MS)
        try:
            yield chromium
        finally:
            chromium.close()


HTTP_ERRORS: list[str] = []  # failed responses of the current test's page, for failure messages


@pytest.fixture
def page(browser, server: Server):
    """A fresh browser context per test (no UI state carried over)."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    HTTP_ERRORS.clear()
    page.on("response", lambda r: HTTP_ERRORS.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    yield page
    context.close()


# --------------------------------------------------------------------------------------------- helpers
def ui_url(server: Server, route: str) -> str:
    return f"{server.url}/#/{route}?workflowType=machine_learning"


def close_assistant_panel(page) -> None:
    """The "MLflow Assistant" side panel takes a third of the width; close it when it is open."""
    close = page.locator('[data-assistant-ui] button[aria-label="Close"]')
    if close.count() and close.first.is_visible():
        close.first.click()


def screenshot(page, name: str, *, publish: bool = False) -> Path:
    """The page as it is now, in outputs/ (and in $UI_SCREENSHOTS when `publish`)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / name
    page.screenshot(path=str(path))
    if publish and PUBLISHED:
        target = Path(PUBLISHED) if Path(PUBLISHED).is_absolute() else ROOT / PUBLISHED
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target / name)
    return path


def context_for(page, server: Server) -> str:
    return f"url {page.url}; failed responses {HTTP_ERRORS[-10:]}\n--- server log\n{server.log_tail(30)}"


def open_runs_table_from_home(page, server: Server, experiment_id: str) -> int:
    """As a user of a fresh browser: the home page, "Model training" at the top of its sidebar (which the
    browser remembers), the experiment's link. Returns the clicks it took."""
    page.goto(f"{server.url}/#/")
    page.get_by_text("Model training", exact=True).first.click()
    page.locator(f'a[href$="#/experiments/{experiment_id}"]').first.click()
    return 2


VISIBLE_TEXT = """e => {
  // the text of the description banner a user sees: the characters inside its box (it is cut to its
  // first line) and on screen, with nothing drawn over them
  let box = e;
  while (box && getComputedStyle(box).overflow !== "hidden") box = box.parentElement;
  const clip = (box || e).getBoundingClientRect();
  const walker = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
  let text = "";
  while (walker.nextNode()) {
    const node = walker.currentNode;
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const r = range.getBoundingClientRect();
      if (!r.width || r.bottom > clip.bottom + 0.5 || r.right > Math.min(clip.right, innerWidth) + 0.5) continue;
      const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
      if (top && (e.contains(top) || top.contains(e))) text += node.data[i];
    }
  }
  return text;
}"""


def best_child(sweep: dict):
    """The job the sweep's answer is about: the verdict's fastest, else the best figure (the view's first
    row: the fastest may rank second by its own figure, a compiled job slower than its paired eager copy)."""
    tags = sweep["parent"].data.tags
    if tags["verdict"] == "fastest":
        return next(r for r in sweep["children"] if r.info.run_id == tags["fastest_run_id"])
    return min(sweep["children"], key=lambda r: r.data.metrics["step/p50_ms"])


# --------------------------------------------------------------------------------------------- tests
def test_two_clicks_from_the_home_page_show_the_answer_with_no_popover(page, server: Server, sweep: dict):
    """A fresh browser at 1440x900, from the home page: "Model training" and the experiment's link (two
    clicks) open its runs page, whose description banner (cut to one line, the assistant's panel beside
    it) reads the latest sweep's answer whole: the verdict, the best configuration, its figure with its
    interval, its speedup and its compile time, as the runs' tags round them; no popover over it."""
    from mlflow.tracking import MlflowClient
    from playwright.sync_api import expect

    from pipeline.tracking.client import DESCRIPTION_TAG

    experiment = MlflowClient(server.url).get_experiment(sweep["experiment_id"])
    answer = experiment.tags[DESCRIPTION_TAG].split(" (", 1)[0]
    best, verdict = best_child(sweep).data.tags, sweep["parent"].data.tags["verdict"]
    assert answer.startswith("fastest: " if verdict == "fastest" else f"{verdict}; best "), answer
    value, interval = best["step p50 ms"].split(" ", 1)
    figures = [f"step {value} ms {interval}"]  # the eager job may be the best: no speedup, no compile time
    if "speedup vs eager" in best:
        figures += [
            best["speedup vs eager"].replace("x ", "x vs eager ", 1),
            f"compile {best['compile s']} s",
        ]
    for figure in figures:
        assert figure in answer, (figure, answer)
    started = time.monotonic()
    clicks = open_runs_table_from_home(page, server, sweep["experiment_id"])
    banner = page.get_by_text(answer.split(":", 1)[0], exact=False).first
    try:
        expect(banner).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.locator(f'.ag-row a[href$="/runs/{sweep["parent"].info.run_id}"]')).to_be_visible()
    except AssertionError as err:
        screenshot(page, "ui-answer-failed.png")
        raise AssertionError(f"the runs page never showed the answer; {context_for(page, server)}") from err
    assert clicks <= 2 and f"/experiments/{sweep['experiment_id']}/runs" in page.url
    page.wait_for_timeout(1000)  # a popover comes up a moment after its page (GenAI's did)
    assert page.get_by_role("dialog").count() == 0 and page.get_by_role("button", name="Got it").count() == 0
    seen = banner.evaluate(VISIBLE_TEXT)
    assert answer in seen, f"{answer!r} not whole in the banner's visible text {seen!r}"
    shot = screenshot(page, "ui-answer.png", publish=True)
    print(
        f"\nhome page -> the answer in {clicks} clicks, {time.monotonic() - started:.1f} s: {seen!r}; {shot}"
    )


def cell_numbers(page, run_ids: list[str], columns: list[str]) -> dict[tuple[str, str], str]:
    """(run id, column) -> the cell's text, for the view's rows and columns."""
    cells = {}
    for run_id in run_ids:
        row = page.locator(f'.ag-center-cols-container .ag-row[row-id="{run_id}"]')
        for column in columns:
            cells[(run_id, column)] = row.locator(f'[col-id="{column}"]').inner_text().strip()
    return cells


def test_the_sweeps_view_ranks_its_runs_with_the_answer_rounded(page, server: Server, sweep: dict):
    """The URL the sweep printed opens its saved view at 1440 px: its runs best first, the winner marked
    on its own row, the verdict, the figure with its interval, the speedup with its and the compile time
    in view, every number in the table at most 4 significant digits; headers and run names whole."""
    from playwright.sync_api import expect

    from tests.conftest import significant_digits

    children = sorted(sweep["children"], key=lambda r: r.data.metrics["step/p50_ms"])
    assert "viewStateShareKey=" in sweep["view_url"]
    page.goto(sweep["view_url"])
    try:
        for child in children:
            expect(page.locator(f'.ag-row a[href$="/runs/{child.info.run_id}"]')).to_be_visible(
                timeout=TIMEOUT_MS
            )
    except AssertionError as err:
        screenshot(page, "ui-view-failed.png")
        raise AssertionError(f"the sweep's view never listed its runs; {context_for(page, server)}") from err
    close_assistant_panel(page)

    viewport = page.viewport_size["width"]
    for name in AT_A_GLANCE:
        header = page.locator(f'.ag-header-cell[col-id="tags.`{name}`"]')
        expect(header).to_be_visible(timeout=LOADED_MS)
        box = header.bounding_box()
        assert box["x"] + box["width"] <= viewport, f"{name} is off screen at x={box['x']:.0f}"
        cut = header.evaluate(
            "e => [...e.querySelectorAll('*')].some(c => c.scrollWidth > c.clientWidth + 1)"
        )
        assert not cut, f"the {name} header is cut"
    assert page.locator('.ag-header-cell[col-id^="metrics."]').count() == 0  # no unrounded column

    def row_index(run) -> int:
        row = page.locator(f'.ag-center-cols-container .ag-row[row-id="{run.info.run_id}"]')
        return int(row.get_attribute("row-index"))

    assert [row_index(r) for r in children] == sorted(row_index(r) for r in children), "not best first"
    assert row_index(sweep["parent"]) > row_index(children[-1]), "the sweep's own run (no figure) last"
    columns = [c.get_attribute("col-id") for c in page.locator('.ag-header-cell[col-id^="tags."]').all()]
    cells = cell_numbers(page, [r.info.run_id for r in children], columns)
    for (_, column), text in cells.items():
        for number in NUMBER.findall(text):
            assert significant_digits(number.rstrip(".,")) <= 4, (column, text)
    best = best_child(sweep)  # the winner marked on its own row
    mark = cells[(best.info.run_id, "tags.`verdict`")]
    assert mark == best.data.tags["verdict"] and mark in ("★ fastest", "= tie", "best, inconclusive"), mark
    for name in AT_A_GLANCE[1:]:  # the best may be the eager job: no speedup, no compile time
        assert cells[(best.info.run_id, f"tags.`{name}`")] == best.data.tags.get(name, "-"), name
    for child in children:
        name = page.locator(f'.ag-row a[href$="/runs/{child.info.run_id}"]')
        assert not name.evaluate("e => e.scrollWidth > e.clientWidth"), (
            f"the run name {child.info.run_name} is cut"
        )
    shot = screenshot(page, "ui-view.png", publish=True)
    print(f"\nthe sweep's view: {shot}")


SCROLL_DOWN = """e => {
  let pane = e;
  while (pane && !(pane.scrollHeight > pane.clientHeight && /(auto|scroll)/.test(getComputedStyle(pane).overflowY)))
    pane = pane.parentElement;
  if (pane) pane.scrollTop += pane.clientHeight;
}"""


def chart_titles(page, server: Server, url: str, run_id: str) -> list[str]:
    """The chart mode of the view at `url`: the charts' titles (after their section's count agrees)."""
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.locator(f'.ag-row a[href$="/runs/{run_id}"]')).to_be_visible(timeout=TIMEOUT_MS)
    close_assistant_panel(page)
    page.locator('label:has(input[name="runs-view-mode"][value="CHART"])').click()
    headers = page.get_by_test_id("experiment-view-compare-runs-section-header")
    try:
        expect(headers.first).to_be_visible()
    except AssertionError as err:
        screenshot(page, "ui-charts-failed.png")
        raise AssertionError(f"the chart view showed no section; {context_for(page, server)}") from err
    counts = [int(re.search(r"\((\d+)\)", text).group(1)) for text in headers.all_inner_texts()]
    titles = page.locator("h4[title]")  # charts render as they come into view: the first row's at least
    expect(titles.first).to_be_visible(timeout=LOADED_MS)
    shown: list[str] = []
    for _ in range(sum(counts)):  # the charts' pane scrolled down in turn (charts out of view unmount)
        shown = list(dict.fromkeys([*shown, *(t.get_attribute("title") for t in titles.all())]))
        if len(shown) >= sum(counts):
            break
        titles.last.evaluate(SCROLL_DOWN)
        page.wait_for_timeout(500)
    assert len(shown) == sum(counts), (shown, counts)
    return shown


def test_the_chart_mode_holds_a_handful_of_charts(page, server: Server, sweep: dict):
    """The view's charts: the figure first, the speedup, compile time, memory, and compiled and eager
    per-unit times on one line chart; at most 8, not one per metric (69 for a 4-job sweep before)."""
    child = best_child(sweep)
    titles = chart_titles(page, server, sweep["view_url"], child.info.run_id)
    assert len(titles) <= 8 and titles[0] == "step/p50_ms", titles
    assert {"speedup/vs_eager", "compile/total_s", "memory/cpu_rss_peak_gib"} <= set(titles), titles
    assert "curve/step_ms vs curve/eager_step_ms" in titles and "curve/eager_step_ms" not in titles
    shot = screenshot(page, "ui-charts.png", publish=True)
    print(f"\n{len(titles)} charts: {titles}; {shot}")


def test_child_run_page_leads_with_its_result(page, server: Server, sweep: dict):
    """The description opens with the job's own result (the figures of its last line, rounded), then
    how it was measured; the Metrics table holds the exact values."""
    from playwright.sync_api import expect

    child = next(r for r in sweep["children"] if r.data.tags["mode"] != "eager")
    metrics = child.data.metrics
    page.goto(ui_url(server, f"experiments/{sweep['experiment_id']}/runs/{child.info.run_id}"))
    try:
        expect(page.get_by_text(child.info.run_name, exact=True).first).to_be_visible(timeout=TIMEOUT_MS)
        heading = page.get_by_role("heading", name=re.compile(r"^Metrics \(\d+\)$"))
        expect(heading).to_be_visible()
    except AssertionError as err:
        screenshot(page, "ui-child-run-failed.png")
        raise AssertionError(
            f"the run page never showed its Metrics section; {context_for(page, server)}"
        ) from err
    close_assistant_panel(page)
    assert int(re.search(r"\d+", heading.inner_text()).group()) == len(metrics)

    description = page.locator('[data-testid="note-editor-preview-content"]')
    first = description.locator("> *").first
    expect(first).to_be_visible()
    from pipeline.job.outcome import result_phrases
    from pipeline.job.result import JobResult

    result = JobResult()
    result.status, result.metrics = "FINISHED", dict(metrics)
    result.work = {"unit": child.data.tags["unit"], "samples": 2, "tokens": None}
    shown = first.inner_text()
    assert shown.startswith("FINISHED: " + result_phrases(result)[0]), shown
    at = 0
    for phrase in result_phrases(result):  # in this order; how long it measured may sit between
        assert phrase in shown[at:], (phrase, shown)
        at = shown.index(phrase, at) + len(phrase)
    assert ("Noisy: p10-p90" in first.inner_text()) == bool(metrics["step/noisy"])
    text = description.inner_text()
    assert text.index("How it was measured") > len(first.inner_text())
    started = {"template": "forked from a template process", "spawn": "a fresh spawned Python process"}
    assert started[child.data.tags["worker_start"]] in text  # as the tag says
    shot = screenshot(page, "ui-child-run.png", publish=True)

    page.get_by_placeholder("Search metrics").fill("step/p50_ms")
    table = page.get_by_role("table").filter(has=page.get_by_role("columnheader", name="Metric"))
    row = table.get_by_role("row").filter(has=page.get_by_role("cell", name="step/p50_ms", exact=True))
    expect(row).to_have_count(1)
    cells = row.get_by_role("cell")
    expect(cells.nth(0)).to_have_text("step/p50_ms")
    shown = cells.nth(1).inner_text().strip()
    assert float(shown) == pytest.approx(metrics["step/p50_ms"], rel=1e-5)
    print(f"\n{child.info.run_name}: {first.inner_text()[:100]}...; step/p50_ms = {shown}; {shot}")


def test_parent_run_page_shows_the_sweep_summary(page, server: Server, sweep: dict):
    from playwright.sync_api import expect

    parent = sweep["parent"]
    page.goto(ui_url(server, f"experiments/{sweep['experiment_id']}/runs/{parent.info.run_id}"))
    description = page.locator('[data-testid="note-editor-preview-content"]')
    try:
        expect(page.get_by_text(parent.info.run_name, exact=True).first).to_be_visible(timeout=TIMEOUT_MS)
        expect(description).to_be_visible()
    except AssertionError as err:
        screenshot(page, "ui-parent-run-failed.png")
        raise AssertionError(
            f"the parent's page never showed its description; {context_for(page, server)}"
        ) from err
    close_assistant_panel(page)
    text, tags = description.inner_text(), parent.data.tags
    # The description leads with the verdict the parent's tags hold, naming the configuration(s).
    assert text.startswith(f"verdict: {tags['verdict']}"), text[:300]  # the run's page names the sweep
    assert "\n★ " in text or tags["verdict"] != "fastest", text[:600]  # its configurations listed, marked
    named = [tags["fastest_config"]] if tags["verdict"] == "fastest" else tags["tied_configs"].split(", ")
    assert all(name in text for name in named), "the summary names the verdict's configurations"
    shot = screenshot(page, "ui-parent-run.png", publish=True)
    print(f"\n{parent.info.run_name}: {shot}")


def test_artifacts_went_through_the_server(server: Server, sweep: dict):
    """Proxied artifacts: jobs uploaded over HTTP into the server's artifacts destination."""
    for child in sweep["children"]:
        assert child.info.artifact_uri.startswith("mlflow-artifacts:/"), child.info.artifact_uri
        assert list(server.artifacts.rglob(f"{child.info.run_id}/artifacts/result.json")), child.info.run_name


@pytest.fixture(scope="module")
def other_sweep(server: Server, sweep: dict, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A second sweep over the same axes (compile.mode=eager,default), of the inference scenario."""
    from mlflow.tracking import MlflowClient

    proc = run_cli(OTHER_SCENARIO_ARGS, tmp_path_factory.mktemp("other"), server.url, multirun=True)
    assert proc.returncode == 0, output(proc) + "\n--- server log\n" + server.log_tail()
    runs = MlflowClient(server.url).search_runs([sweep["experiment_id"]], max_results=100)
    parents = [r for r in runs if r.data.tags.get("sweep_parent") == "true"]
    (parent,) = [r for r in parents if r.info.run_id != sweep["parent"].info.run_id]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    return {"parent": parent, "children": children, "view_url": view_url(proc.stdout)}


def test_an_inference_sweeps_view_shows_latency_p50_p99_and_samples_per_s(
    page, server: Server, sweep: dict, other_sweep: dict
):
    """An inference sweep's view speaks of calls: a call's median latency with its interval, its p99 and
    the calls' throughput back to back, rounded; no step column; a handful of charts."""
    from playwright.sync_api import expect

    children = other_sweep["children"]
    page.goto(other_sweep["view_url"])
    best = min(children, key=lambda r: r.data.metrics["latency/p50_ms"])
    expect(page.locator(f'.ag-row a[href$="/runs/{best.info.run_id}"]')).to_be_visible(timeout=TIMEOUT_MS)
    close_assistant_panel(page)
    columns = [c.get_attribute("col-id") for c in page.locator('.ag-header-cell[col-id^="tags."]').all()]
    wanted = ["tags.`latency p50 ms`", "tags.`latency p99 ms`", "tags.`samples/s`"]
    assert all(c in columns for c in wanted) and not [c for c in columns if "step" in c], columns
    cells = cell_numbers(page, [best.info.run_id], wanted)
    for column in wanted:
        assert cells[(best.info.run_id, column)] == best.data.tags[column.split("`")[1]], column
    assert "[" in cells[(best.info.run_id, wanted[0])]  # the median with its interval
    shot = screenshot(page, "ui-inference-view.png", publish=True)
    titles = chart_titles(page, server, other_sweep["view_url"], best.info.run_id)
    assert len(titles) <= 8 and titles[0] == "latency/p50_ms" and "latency/p99_ms" in titles, titles
    print(f"\nan inference sweep's view: {cells}; charts {titles}; {shot}")


def test_two_sweeps_of_different_scenarios_have_different_names_and_nest_their_jobs(
    page, server: Server, sweep: dict, other_sweep: dict
):
    """From the home page, the runs table lists the two sweeps' runs under names that tell them apart
    (scenario, model and axes: pipeline.identity.sweep_label), each sweep's jobs nested under its run."""
    from playwright.sync_api import expect

    open_runs_table_from_home(page, server, sweep["experiment_id"])
    names = []
    for parent in (sweep["parent"], other_sweep["parent"]):
        link = page.locator(f'.ag-row a[href$="/runs/{parent.info.run_id}"]')
        expect(link).to_be_visible(timeout=TIMEOUT_MS)
        names.append(link.inner_text())
    close_assistant_panel(page)
    assert names[0] != names[1], names
    assert "train" in names[0] and "inference" in names[1], names

    def run_link(run):
        return page.locator(f'.ag-row a[href$="/runs/{run.info.run_id}"]')

    parent, children = sweep["parent"], sweep["children"]
    for child in children:  # collapsed at first: the parent row stands for the sweep
        expect(run_link(child)).to_have_count(0)
    parent_row = page.locator(f'.ag-pinned-left-cols-container .ag-row[row-id="{parent.info.run_id}"]')
    parent_row.locator('[col-id="attributes.`Run Name`"] button').first.click()
    parent_x = run_link(parent).bounding_box()["x"]
    for child in children:  # after the parent's row, indented further
        expect(run_link(child)).to_be_visible()
        row = page.locator(f'.ag-pinned-left-cols-container .ag-row[row-id="{child.info.run_id}"]')
        assert int(row.get_attribute("row-index")) > int(parent_row.get_attribute("row-index"))
        assert run_link(child).bounding_box()["x"] >= parent_x + 16, child.info.run_name
    screenshot(page, "ui-two-sweeps.png")
