"""End to end through the MLflow UI: a tiny CPU sweep logged by the real CLI to a real MLflow server
(started by scripts/mlflow-server.sh), then read back in headless Chromium as a person would.

Needs Debian's Chromium (`scripts/install-browser.sh`); skipped without it outside CI, fails in CI.

What MLflow 3.17's UI looks like (the selectors below):
- The experiment page opens in the "GenAI" workflow (an Overview of traces) unless the URL says
  `?workflowType=machine_learning` (or the sidebar's "Model training" toggle was used in this browser):
  then `#/experiments/<id>/runs` is the runs table, an AG Grid (`div.ag-row[row-id=<run id>]`). The
  experiment's tag `mlflow.experimentKind` no longer decides it (3.17 derives an experiment's kind from
  that toggle); the experiment's description (markdown, shown above its pages) links the runs table.
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
  flat; its columns are header cells `.ag-header-cell[col-id="metrics.`<name>`"]` and, per row, cells
  with the same col-id. The runs page's mode toggle is a radio group (`input[name="runs-view-mode"]`,
  values TABLE, CHART, ARTIFACT); CHART shows one collapsible section per metric prefix before `/`,
  headed `<prefix> (<number of charts>)` (`[data-testid="experiment-view-compare-runs-section-header"]`),
  each chart titled by an `h4[title=<metric>]`.

Screenshots go to outputs/; with UI_SCREENSHOTS=docs/img the README's three (the sweep's view, a
child run, the sweep's parent run) are written there too: `UI_SCREENSHOTS=docs/img .venv/bin/python
-m pytest -p no:cacheprovider tests/test_ui.py` retakes them.
"""

from __future__ import annotations

import contextlib
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
# the README's screenshots show inductor, what a user runs.
BACKEND = "inductor" if PUBLISHED else "aot_eager"
SWEEP_ARGS = [*TINY, "compile.mode=eager,default", f"compile.backend={BACKEND}"]
# The sweep's view: what a user compares without clicking (pipeline/sweep/view.py).
AT_A_GLANCE = ("step/p50_ms", "speedup/vs_eager", "compile/total_s")
INTERVALS = ("step/p50_ci95_low_ms", "step/p50_ci95_high_ms", "speedup/ci95_low", "speedup/ci95_high")
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
    views = [
        line.removeprefix("browse: ") for line in proc.stdout.splitlines() if line.startswith("browse: ")
    ]
    return {"experiment_id": exp.experiment_id, "parent": parent, "children": children, "view_url": views[-1]}


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
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
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


def open_runs_table_from_home(page, server: Server, experiment_id: str) -> None:
    """As a user of a fresh browser: the home page, the experiment's link, then (MLflow 3.17 opens it on
    its GenAI overview, a "Detect Issues" guidance over it) what its description says: "Model training"
    at the top of the sidebar, which the browser remembers."""
    from playwright.sync_api import expect

    page.goto(f"{server.url}/#/")
    page.locator(f'a[href$="#/experiments/{experiment_id}"]').first.click()
    # By the element, not its accessible role: once the overview's "Detect Issues" guidance (a modal
    # popover) is up, the page behind it leaves the accessibility tree, the link included.
    link = page.locator("a", has_text="open the runs table").first
    try:
        expect(link).to_be_attached(timeout=TIMEOUT_MS)
    except AssertionError as err:
        screenshot(page, "ui-home-failed.png")
        raise AssertionError(
            f"the experiment's page never showed its description's link; {context_for(page, server)}"
        ) from err
    # The overview's "Detect Issues" guidance comes up a moment after the page and blocks every click.
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):
        page.get_by_role("button", name="Got it").first.click(timeout=LOADED_MS)
    page.get_by_text("Model training", exact=True).first.click()


# --------------------------------------------------------------------------------------------- tests
def test_from_the_home_page_the_experiment_opens_on_its_runs_table(page, server: Server, sweep: dict):
    """Home page, the experiment: MLflow 3.17 opens it on the workflow of the browser's sidebar switch
    (GenAI at first), not on its type (`mlflow.experimentKind`, set to runs all the same). Its
    description says how to reach the runs table (a link, or the switch); once the switch says "Model
    training", the experiment opens from the home page on its runs table, the sweep's run in it."""
    from mlflow.tracking import MlflowClient
    from playwright.sync_api import expect

    experiment = MlflowClient(server.url).get_experiment(sweep["experiment_id"])
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    runs_link = f"#/experiments/{sweep['experiment_id']}/runs?workflowType=machine_learning"
    started = time.monotonic()
    open_runs_table_from_home(page, server, sweep["experiment_id"])
    link = page.locator("a", has_text="open the runs table").first
    assert link.get_attribute("href") == runs_link
    parent = page.locator(f'.ag-row a[href$="/runs/{sweep["parent"].info.run_id}"]')
    expect(parent).to_be_visible(timeout=TIMEOUT_MS)
    first_s = time.monotonic() - started
    # From now on this browser opens the experiment on its runs table, from the home page.
    page.goto(f"{server.url}/#/")
    page.locator(f'a[href$="#/experiments/{sweep["experiment_id"]}"]').first.click()
    expect(parent).to_be_visible(timeout=TIMEOUT_MS)
    assert f"/experiments/{sweep['experiment_id']}/runs" in page.url
    close_assistant_panel(page)
    shot = screenshot(page, "ui-home-to-runs.png")
    print(f"\nhome page -> runs table in {first_s:.1f} s, then in one click: {shot}")


def test_experiment_page_nests_the_sweeps_runs_under_its_parent(page, server: Server, sweep: dict):
    from playwright.sync_api import expect

    parent, children = sweep["parent"], sweep["children"]
    started = time.monotonic()
    page.goto(ui_url(server, f"experiments/{sweep['experiment_id']}/runs"))

    def run_link(run):
        return page.locator(f'.ag-row a[href$="/runs/{run.info.run_id}"]')

    parent_link = run_link(parent)
    try:
        expect(parent_link).to_be_visible(timeout=TIMEOUT_MS)
    except AssertionError as err:
        screenshot(page, "ui-experiment-failed.png")
        raise AssertionError(
            f"the runs table never showed the sweep's parent run; {context_for(page, server)}"
        ) from err
    print(f"\nruns table up in {time.monotonic() - started:.1f} s")
    close_assistant_panel(page)
    expect(parent_link).to_have_text(re.compile(r"^sweep \S"))
    assert parent_link.inner_text() == parent.info.run_name

    # Collapsed at first: the parent row stands for the sweep, its jobs hidden under it.
    parent_row = page.locator(f'.ag-pinned-left-cols-container .ag-row[row-id="{parent.info.run_id}"]')
    for child in children:
        expect(run_link(child)).to_have_count(0)

    parent_row.locator('[col-id="attributes.`Run Name`"] button').first.click()
    for child in children:
        expect(run_link(child)).to_be_visible()
        expect(run_link(child)).to_have_text(child.info.run_name)

    # Nested: each child row comes after the parent's and its name is indented further.
    parent_index = int(parent_row.get_attribute("row-index"))
    parent_x = parent_link.bounding_box()["x"]
    for child in children:
        row = page.locator(f'.ag-pinned-left-cols-container .ag-row[row-id="{child.info.run_id}"]')
        assert int(row.get_attribute("row-index")) > parent_index, child.info.run_name
        assert run_link(child).bounding_box()["x"] >= parent_x + 16, (
            f"{child.info.run_name} is not indented under {parent.info.run_name}"
        )
    shot = screenshot(page, "ui-experiment.png")
    print(f"runs table with the sweep expanded: {shot}")


def test_the_sweeps_view_ranks_its_runs_with_the_figures_that_matter(page, server: Server, sweep: dict):
    """The URL the sweep printed opens its saved view: the sweep's runs, fastest first, the answer in
    view at 1600 px (the verdict on the sweep's row, the step time and the speedup, each with its 95%
    interval), then compile time and memory; headers and run names whole, values as the store has them."""
    from playwright.sync_api import expect

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
    for metric in (*AT_A_GLANCE, *INTERVALS):
        header = page.locator(f'.ag-header-cell[col-id="metrics.`{metric}`"]')
        expect(header).to_be_attached()
        label = header.locator(f'[data-testid="sort-header-{metric}"]')
        assert label.inner_text(timeout=LOADED_MS) == metric
        cut = label.evaluate("e => e.parentElement.scrollWidth > e.parentElement.clientWidth")
        assert not cut, f"the {metric} header is cut"
    # The answer in view: the verdict (on the parent's row), the figure and the speedup with their intervals.
    for col_id in ["tags.`verdict`", *(f"metrics.`{m}`" for m in (*AT_A_GLANCE[:2], *INTERVALS))]:
        header = page.locator(f'.ag-header-cell[col-id="{col_id}"]')
        expect(header).to_be_visible()
        box = header.bounding_box()
        assert box["x"] + box["width"] <= viewport, f"{col_id} is off screen at x={box['x']:.0f}"
    parent = sweep["parent"]
    verdict = page.locator(
        f'.ag-center-cols-container .ag-row[row-id="{parent.info.run_id}"] [col-id="tags.`verdict`"]'
    )
    expect(verdict).to_have_text(parent.data.tags["verdict"])
    sorted_by = page.locator(f'.ag-header-cell[col-id="metrics.`{AT_A_GLANCE[0]}`"] .is-ordered-by')
    expect(sorted_by).to_have_count(1, timeout=LOADED_MS)

    def row_index(run) -> int:
        row = page.locator(f'.ag-center-cols-container .ag-row[row-id="{run.info.run_id}"]')
        return int(row.get_attribute("row-index"))

    assert [row_index(r) for r in children] == sorted(row_index(r) for r in children), "not fastest first"
    assert row_index(sweep["parent"]) > row_index(children[-1]), (
        "the sweep's own run (no step time) goes last"
    )
    for child in children:
        name = page.locator(f'.ag-row a[href$="/runs/{child.info.run_id}"]')
        cut = name.evaluate("e => e.scrollWidth > e.clientWidth")
        assert not cut, f"the run name {child.info.run_name} is cut"
    for metric in (*AT_A_GLANCE, *INTERVALS):
        page.locator(f'.ag-header-cell[col-id="metrics.`{metric}`"]').scroll_into_view_if_needed()
        for child in children:
            row = page.locator(f'.ag-center-cols-container .ag-row[row-id="{child.info.run_id}"]')
            shown = row.locator(f'[col-id="metrics.`{metric}`"]').inner_text().strip()
            stored = child.data.metrics.get(metric)
            if stored is None:
                assert shown == "-", f"{child.info.run_name} {metric}: {shown}"
            else:
                assert float(shown) == pytest.approx(stored, rel=1e-5), f"{child.info.run_name} {metric}"
    page.locator('.ag-header-cell[col-id="tags.`verdict`"]').scroll_into_view_if_needed()
    shot = screenshot(page, "ui-view.png", publish=True)
    print(f"\nthe sweep's view: {shot}")


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
    from pipeline.measure.stats import undetermined

    low, high = metrics["speedup/ci95_low"], metrics["speedup/ci95_high"]
    interval = "[undetermined]" if undetermined(low, high) else f"[{low:.2f}, {high:.2f}]"  # docs/verdicts.md
    expected = (
        f"FINISHED: step {metrics['step/p50_ms']:.2f} ms (p50), compile {metrics['compile/total_s']:.1f} s, "
        f"{metrics['speedup/vs_eager']:.2f}x vs eager {interval}, peak RSS {metrics['memory/cpu_rss_peak_gib']:.2f} GiB"
    )
    assert first.inner_text().startswith(expected), first.inner_text()
    assert ("Noisy: p10-p90" in first.inner_text()) == bool(metrics["step/noisy"])
    text = description.inner_text()
    assert text.index("How it was measured") > len(first.inner_text())
    started = {"template": "forked from its sweep's template", "spawn": "a fresh spawned Python process"}
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


def test_chart_view_groups_metrics_by_concern(page, server: Server, sweep: dict):
    """From the sweep's view, the chart mode shows one section per metric prefix, the most telling first
    (`step`, `speedup`, `compile`, `memory`), the objective's chart on top."""
    from playwright.sync_api import expect

    child = sweep["children"][0]
    page.goto(sweep["view_url"])
    expect(page.locator(f'.ag-row a[href$="/runs/{child.info.run_id}"]')).to_be_visible(timeout=TIMEOUT_MS)
    close_assistant_panel(page)
    page.locator('label:has(input[name="runs-view-mode"][value="CHART"])').click()
    headers = page.get_by_test_id("experiment-view-compare-runs-section-header")
    try:
        expect(headers.first).to_be_visible()
    except AssertionError as err:
        screenshot(page, "ui-charts-failed.png")
        raise AssertionError(f"the chart view showed no section; {context_for(page, server)}") from err
    sections = [" ".join(text.split()[:2]) for text in headers.all_inner_texts()]  # "step (13)"
    logged = {name for run in sweep["children"] for name in run.data.metrics}
    expected = [
        f"{p} ({sum(1 for m in logged if m.startswith(f'{p}/'))})"
        for p in ("step", "speedup", "compile", "memory")
    ]
    assert sections[:4] == expected, sections  # the most telling first, not alphabetical
    first_chart = page.locator("h4[title]").first  # chart titles, in page order
    assert first_chart.get_attribute("title", timeout=LOADED_MS) == AT_A_GLANCE[0]
    # Compiled and eager per-unit times on one chart (one line chart of both curves; charts render when
    # their section is in view).
    headers.filter(has_text=re.compile(r"^\s*curve")).first.scroll_into_view_if_needed()
    curves = page.locator('h4[title="curve/step_ms vs curve/eager_step_ms"]')
    expect(curves).to_have_count(1, timeout=LOADED_MS)
    assert page.locator('h4[title="curve/eager_step_ms"]').count() == 0
    shot = screenshot(page, "ui-charts.png")
    print(f"\nchart sections: {shot}")


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
    assert text.split("\n\n")[1].startswith(f"verdict: {tags['verdict']}"), text[:300]
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
    return {"parent": parent}


def test_two_sweeps_of_different_scenarios_have_different_names(
    page, server: Server, sweep: dict, other_sweep: dict
):
    """From the home page, the runs table lists the two sweeps' runs under names that tell them apart
    (scenario, model and axes: pipeline.identity.sweep_label)."""
    from playwright.sync_api import expect

    open_runs_table_from_home(page, server, sweep["experiment_id"])
    names = []
    for parent in (sweep["parent"], other_sweep["parent"]):
        link = page.locator(f'.ag-row a[href$="/runs/{parent.info.run_id}"]')
        expect(link).to_be_visible(timeout=TIMEOUT_MS)
        names.append(link.inner_text())
    close_assistant_panel(page)
    screenshot(page, "ui-two-sweeps.png")
    assert names[0] != names[1], names
    assert "train" in names[0] and "inference" in names[1], names
