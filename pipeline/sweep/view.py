"""The sweep's answer in the MLflow UI (torch-free): a saved view of the runs table ranked by the
objective, with each job's verdict and rounded figures as columns and a handful of charts, and the
experiment's description leading with the latest sweep's answer. MLflow 3.17 keeps saved views as
experiment tags `mlflow.sharedViewState.<id>` whose JSON value holds the UI state as a JSON string."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field

from pipeline.display import DASH, figure, unit_word
from pipeline.job.outcome import shown_key, shown_tags
from pipeline.measure.objective import SAMPLES_PER_S, SPEEDUP, TOKENS_PER_S, Objective
from pipeline.measure.registry import METRICS
from pipeline.sweep.pareto import COMPILE_METRIC, MEMORY_METRICS
from pipeline.sweep.render import identity_columns, joined_identity, sorted_rows
from pipeline.sweep.summary import Row, Summary
from pipeline.tracking import RunRecord, Tracker
from pipeline.tracking.client import DESCRIPTION_TAG, experiment_description
from pipeline.tracking.queries import filter_equals

VIEW_TAG_PREFIX = "mlflow.sharedViewState."
SWEEP_VIEW_PREFIX = "sweep-"  # the views this project makes; others (a user's own) are never touched
KEEP_VIEWS = 30  # of ours per experiment, below the UI's 40, leaving room for a user's own views
MAX_VALUE_CHARS = 20_000  # the UI refuses longer view values

LATENCY_TAIL, FIRST_TOKEN = "latency/p99_ms", "generate/ttft_p50_ms"
# The sweep's answer per row (set at its end, `publish_sweep_view`): the winner marked on its own row.
VERDICT_TAG = "verdict"
LAST_TAGS = ("noisy",)  # the job's own warning
# Compiled and eager per-unit times on one line chart (MLflow's LINE charts take several metrics).
CURVES = ("curve/step_ms", "curve/eager_step_ms")
MAX_CHARTS = 8  # the chart view's: the figure, the speedup, the costs, the curves; never one per metric
RUN_NAME = "attributes.`Run Name`"
CREATED = "runDateAndNestInfo"  # MLflow's own column, always shown: when (a check mark and "2 minutes ago")
# Columns whose width is not their header's, in px: at 1440 px the answer's columns fit beside the sidebar.
WIDTHS = {RUN_NAME: 200, CREATED: 140, "tags.`verdict`": 150, "tags.`noisy`": 70}
HEADER_CHAR_PX, HEADER_PADDING_PX = 6.5, 28  # MLflow 3.17's header font, measured
VALUE_CHAR_PX, VALUE_PADDING_PX = 7.0, 24  # a cell's text (`1.13x [undetermined]`: 20 characters)
INTERVAL_CHARS, FIGURE_CHARS = 20, 6  # the longest a rounded figure with its interval, and alone, shows
NAME_CHAR_PX, NAME_PADDING_PX, MAX_NAME_PX = 5.4, 50, 400  # the runs' names whole, up to a point
HAS_INTERVAL = ("p50 ms", "samples/s", "tokens/s", "speedup vs eager")  # shown tags with an interval


@dataclass(frozen=True, kw_only=True)
class RunsView:
    """One saved view of the runs table."""

    view_id: str
    name: str
    search_filter: str
    objective: Objective
    columns: list[str] = field(default_factory=list)
    charts: list[str] = field(default_factory=list)  # the chart view's metrics, in order (MAX_CHARTS)
    hidden: list[str] = field(default_factory=list)  # every other metric: no chart of its own
    unit: str = "step"  # what the jobs call a unit of work, in the curves' title
    name_width: int = WIDTHS[RUN_NAME]  # px: the runs' names whole (name_width_for)

    @property
    def tag_key(self) -> str:
        return VIEW_TAG_PREFIX + self.view_id

    def state(self) -> dict[str, object]:
        order = [RUN_NAME, CREATED, *self.columns]  # a width applies only to a column listed here
        widths = {c: column_width(c) for c in order} | {RUN_NAME: self.name_width}
        # The chart view: one section of a handful of charts, in order. MLflow adds a chart for every
        # metric that has none: every other metric gets one, deleted, so that it adds none.
        cards: list[dict[str, object]] = [bar_chart(m) for m in self.charts if m not in CURVES]
        if CURVES[0] in self.charts:
            # Compiled and eager per-unit times on one line chart, under the compiled curve's own chart id so
            # that MLflow does not add it alone; the eager curve's own chart is deleted for the same reason.
            compiled, eager = CURVES
            cards += [
                {
                    "uuid": f"autogen-{compiled}",
                    "type": "LINE",
                    "metricKey": compiled,
                    "selectedMetricKeys": list(CURVES),
                    "displayName": f"time per measured {self.unit}, ms: compiled and paired eager",
                    "metricSectionId": ANSWER_SECTION,
                    "xAxisKey": "step",
                    "xAxisScaleType": "linear",
                    "scaleType": "linear",
                    "lineSmoothness": 0,
                    "range": {"xMin": None, "xMax": None, "yMin": None, "yMax": None},
                    "isGenerated": True,
                    "deleted": False,
                },
                hidden_chart(eager),
            ]
        cards += [hidden_chart(m) for m in self.hidden if m not in self.charts]
        return {
            "searchFilter": self.search_filter,
            "orderByKey": f"metrics.`{self.objective.metric}`",  # sorted by the figure, shown rounded
            "orderByAsc": self.objective.ascending,
            "startTime": "ALL",
            "lifecycleFilter": "Active",
            "modelVersionFilter": "All Runs",
            "datasetsFilter": [],
            "selectedColumns": list(self.columns),
            "columnOrder": order,
            "columnWidths": widths,
            "compareRunSections": [
                {"uuid": ANSWER_SECTION, "name": ANSWER_SECTION_NAME, "display": True, "isReordered": True}
            ],
            "compareRunCharts": cards,
            "isAccordionReordered": True,
        }

    def tag_value(self, *, now_ms: int | None = None) -> str:
        now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        state = json.dumps(self.state(), separators=(",", ":"))
        envelope = {"name": self.name, "createdAt": now_ms, "updatedAt": now_ms, "state": state}
        value = json.dumps(envelope, separators=(",", ":"))
        if len(value) <= MAX_VALUE_CHARS:
            return value
        if self.hidden:  # the charts MLflow adds are the lesser evil
            return dataclasses.replace(self, hidden=[]).tag_value(now_ms=now_ms)
        raise ValueError(
            f"view {self.view_id!r} is {len(value)} characters; MLflow's UI takes {MAX_VALUE_CHARS}"
        )


# The chart view's one section, so that the answer's charts sit side by side.
ANSWER_SECTION, ANSWER_SECTION_NAME = "compile-sweeps-answer", "the answer: figures, speedup, costs"


def bar_chart(metric: str) -> dict[str, object]:
    return {
        "uuid": f"autogen-{metric}",
        "type": "BAR",
        "metricKey": metric,
        "displayName": metric,
        "metricSectionId": ANSWER_SECTION,
        "isGenerated": True,
        "deleted": False,
    }


def hidden_chart(metric: str) -> dict[str, object]:
    """A chart of `metric` MLflow does not show (and does not add again), as short as it can be."""
    return {"uuid": f"hidden-{metric}", "type": "BAR", "metricKey": metric, "deleted": True}


def figure_metrics(objective: Objective, logged: set[str] | None) -> list[str]:
    """The figures a row is judged and read by, the objective's first, then what goes with it (a rate's
    latency, a call's tail and throughput, a generation's tokens/s and time to first token)."""
    metrics = [objective.metric]
    if objective.inverse_of is not None:
        metrics.append(objective.inverse_of)
    if objective.metric.startswith("latency/") or (logged is not None and LATENCY_TAIL in logged):
        metrics += [LATENCY_TAIL, SAMPLES_PER_S]
    if logged is not None and FIRST_TOKEN in logged:  # a generation: its rate and its first token
        metrics += [TOKENS_PER_S, FIRST_TOKEN]
    return list(dict.fromkeys(metrics))


def columns_for(
    objective: Objective,
    *,
    unit: str = "step",
    logged: set[str] | None = None,
    tags: set[str] | None = None,
) -> list[str]:
    """The tag columns: each job's verdict, its figures rounded with their intervals (`shown_tags`), the
    speedup, compile time and memory, the `noisy` flag last; once the sweep has run (`tags` given),
    only those some run has."""
    metrics = [*figure_metrics(objective, logged), SPEEDUP, COMPILE_METRIC, *MEMORY_METRICS]
    context = {"latency/p50_ms": 1.0} if LATENCY_TAIL in metrics else None
    shown = [key for m in metrics if (key := shown_key(m, unit, context)) is not None]
    names = [VERDICT_TAG, *dict.fromkeys(shown), *LAST_TAGS]
    if tags is not None:
        names = [n for n in names if n in tags]
    return [f"tags.`{n}`" for n in names]


def column_width(column: str) -> int:
    """Pixels for the whole header (MLflow cuts headers, never wraps them) and the value it shows."""
    if column in WIDTHS:
        return WIDTHS[column]
    name = column.split("`")[1] if "`" in column else column
    header = math.ceil(HEADER_CHAR_PX * len(name)) + HEADER_PADDING_PX
    chars = INTERVAL_CHARS if name.endswith(HAS_INTERVAL) else FIGURE_CHARS
    return max(header, math.ceil(VALUE_CHAR_PX * chars) + VALUE_PADDING_PX)


def name_width_for(names: list[str]) -> int:
    """Pixels for the longest run name whole, between the default and MAX_NAME_PX."""
    longest = max(map(len, names), default=0)
    return min(MAX_NAME_PX, max(WIDTHS[RUN_NAME], math.ceil(NAME_CHAR_PX * longest) + NAME_PADDING_PX))


def sweep_view(
    *,
    sweep_id: str,
    label: str,
    objective: Objective,
    unit: str = "step",
    logged: set[str] | None = None,
    tags: set[str] | None = None,
    names: list[str] | None = None,
) -> RunsView:
    """The view of one sweep: its runs only (the parent and its jobs carry `sweep_id`)."""
    # The chart view's metrics: the figures, the speedup, compile time, memory, the curves; once the
    # sweep has run, only those it logged; never more than MAX_CHARTS.
    charts = [*figure_metrics(objective, logged), SPEEDUP, COMPILE_METRIC, *MEMORY_METRICS, CURVES[0]]
    if logged is not None:
        charts = [m for m in charts if m in logged]
    elif MEMORY_METRICS[0] in charts:  # before the sweep: one memory chart (the device's is not known yet)
        charts.remove(MEMORY_METRICS[1])
    charts = charts[:MAX_CHARTS]
    every = logged if logged is not None else set(METRICS)
    return RunsView(
        view_id=view_id_for(sweep_id),
        name=f"{label} ({sweep_id})",
        search_filter=sweep_filter(sweep_id),
        objective=objective,
        columns=columns_for(objective, unit=unit, logged=logged, tags=tags),
        charts=charts,
        hidden=sorted(every - set(charts)),
        unit=unit,
        name_width=name_width_for(names or []),
    )


def sweep_filter(sweep_id: str) -> str:
    """The view's filter: the sweep's runs (the sweep's start refuses an id MLflow's search cannot match)."""
    found = filter_equals("tags.sweep_id", sweep_id)
    if found is None:
        raise ValueError(f"sweep id {sweep_id!r}: MLflow's search syntax cannot express it")
    return found


def view_id_for(sweep_id: str) -> str:
    """A tag-key-safe id, one per sweep id and never another's: `_` becomes `__` and any character but
    ASCII letters, digits and `-` becomes `_<its code in hex>_` (`hx.1` -> `sweep-hx_2e_1`)."""
    return SWEEP_VIEW_PREFIX + "".join(
        c if c.isascii() and (c.isalnum() or c == "-") else "__" if c == "_" else f"_{ord(c):x}_"
        for c in sweep_id
    )


def publish_sweep_view(
    tracker: Tracker,
    *,
    sweep_id: str,
    label: str,
    objective: Objective,
    runs: list[RunRecord] | None = None,
    unit: str | None = None,
    summary: Summary | None = None,
) -> str:
    """The sweep's view, saved (this project's oldest views beyond `KEEP_VIEWS` dropped), its URL returned;
    with its runs given, only the columns some run (or the parent) has; with its summary, the verdict on
    each job's own row (its `verdict` tag: the winner marked where it is ranked) and the experiment's
    description leading with the answer (`describe_answer`)."""
    logged = tags = None
    names: list[str] = []
    if runs is not None:
        if summary is not None:
            for run_id, word in row_verdicts(summary).items():
                tracker.set_tags(run_id, {VERDICT_TAG: word})
            runs = tracker.sweep_children(sweep_id)
        parent = tracker.sweep_parent(sweep_id)
        everything = [*runs, *([parent] if parent is not None else [])]
        logged = {name for run in everything for name in run.metrics}
        tags = {name for run in everything for name in run.tags}
        names = [run.name for run in runs if run.tags.get("sweep_parent") != "true"]
        units = {run.tags["unit"] for run in runs if run.tags.get("unit")}
        unit = unit or (unit_word(units.pop()) if len(units) == 1 else None)
    view = sweep_view(
        sweep_id=sweep_id,
        label=label,
        objective=objective,
        unit=unit or "step",
        logged=logged,
        tags=tags,
        names=names,
    )
    tracker.set_experiment_tag(view.tag_key, view.tag_value())
    ours = []  # this project's views, the newest first (a user's own views are left alone)
    for key, value in tracker.experiment_tags().items():
        if key.startswith(VIEW_TAG_PREFIX + SWEEP_VIEW_PREFIX):
            try:
                created = int(json.loads(value).get("createdAt", 0))
            except (ValueError, TypeError, AttributeError):
                created = 0
            ours.append((created, key))
    for _, key in sorted(ours, reverse=True)[KEEP_VIEWS:]:
        tracker.delete_experiment_tag(key)
    url = tracker.runs_url(view.view_id)
    if summary is not None:
        # the experiment's description: the latest sweep's answer; left alone where a user wrote their own
        described = tracker.experiment_tags()
        own = experiment_description(tracker.experiment_id)
        if described.get(DESCRIPTION_TAG) in (None, described.get(ANSWER_TAG), own):
            link = "#" + url.split("#", 1)[1] if "#" in url else url
            text = f"{answer_line(summary)} ({label}: the latest sweep; [its runs ranked]({link}))\n\n{own}"
            tracker.set_experiment_tag(DESCRIPTION_TAG, text)
            tracker.set_experiment_tag(ANSWER_TAG, text)
    return url


def row_verdicts(summary: Summary) -> dict[str, str]:
    """Each job's run id -> what the verdict says of it: `★ fastest`, `= tie`, `best, inconclusive`,
    `inconclusive`, `slower`, or why it has no figure (`FAILED`); a suite's model by its outcome."""
    verdict = summary.verdict
    suite = {o.run_name: o.outcome for o in summary.suite.outcomes} if summary.suite is not None else {}
    pooled = _pooled_names(summary)
    best = next((pooled.get(id(row)) for row in answer_rows(summary)), None)

    def word(row: Row) -> str:
        name = pooled.get(id(row))
        if row.name in suite:
            return suite[row.name]
        if name is None or verdict is None:
            return row.status if row.status != "FINISHED" else "no figure"
        if verdict.kind == "fastest":
            return "★ fastest" if name == verdict.fastest else "slower"
        if name in verdict.tied and verdict.kind == "tie":
            return "= tie"
        if name in verdict.tied:  # one the data could not tell from the best: the best says so
            return "best, inconclusive" if name == best else "inconclusive"
        return "slower"

    return {row.run_id: word(row) for row in summary.rows if row.run_id}


# What this project last wrote as the experiment's description: a description a user wrote is never replaced.
ANSWER_TAG = "compile_sweeps.description"


def distinct_name(summary: Summary, row: Row) -> str:
    """A configuration by the identity values that set it apart from the sweep's others (`amp·max-autotune`,
    `batch_size=32`), a value only eager jobs lack aside; its run name where nothing does."""
    keys = identity_columns(summary, compact=True)
    configured = [r for r in summary.rows if r.config]
    differs = {k for k in keys if len({r.config.get(k) for r in configured} - {None, DASH, "-"}) > 1}
    return joined_identity(keys, [row.config.get(k) if k in differs else None for k in keys]) or row.name


def answer_rows(summary: Summary) -> list[Row]:
    """The jobs the answer is about, best first: the fastest configuration's where the verdict names one
    (not always the best by its own figure), else those it could not tell apart, else every job with one."""
    ranked = [r for r in sorted_rows(summary) if r.passing and summary.objective.metric in r.metrics]
    verdict = summary.verdict
    pooled = _pooled_names(summary)
    if verdict is not None and verdict.kind == "fastest":
        return [r for r in ranked if pooled.get(id(r)) == verdict.fastest]
    if verdict is not None and verdict.tied:
        return [r for r in ranked if pooled.get(id(r)) in verdict.tied] or ranked
    return ranked


def _pooled_names(summary: Summary) -> dict[int, str]:
    return {id(row): c.name for c in summary.configurations for row in c.rows}


def answer_line(summary: Summary) -> str:
    """The sweep's answer in one line, short enough for MLflow's description banner (`inconclusive;
    best default: step 184 ms [101, 259], 1.13x vs eager [undetermined], compile 64.7 s`)."""
    verdict = summary.verdict
    kind = verdict.kind if verdict is not None else "suite"
    best = next(iter(answer_rows(summary)), None)
    if best is None:
        return f"{kind}; no configuration has a figure"
    unit = unit_word(best.work.unit if best.work is not None else None)
    shown = shown_tags(best.metrics, unit)
    key = shown_key(summary.objective.metric, unit, best.metrics) or ""
    value, _, interval = shown.get(key, figure(best.metrics[summary.objective.metric])).partition(" ")
    what = key.rsplit(" ", 1)  # `step p50 ms` -> a step's figure in ms; `samples/s` -> a rate
    figure_text = f"{what[0].removesuffix(' p50')} {value} {what[1]}" if len(what) == 2 else f"{value} {key}"
    parts = [f"{figure_text} {interval}".strip()]
    if "speedup vs eager" in shown:
        speedup, _, within = shown["speedup vs eager"].partition(" ")
        parts.append(f"{speedup} vs eager {within}".strip())
    if "compile s" in shown:
        parts.append(f"compile {shown['compile s']} s")
    lead = "fastest:" if kind == "fastest" else f"{kind}; best"
    return f"{lead} {distinct_name(summary, best)}: {', '.join(parts)}"
