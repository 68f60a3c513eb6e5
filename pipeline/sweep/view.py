"""The sweep's ready-made view in the MLflow UI: its runs in one table, ranked by the objective, with
the columns that answer "which is fastest, by how much, at what compile cost", ranked by the objective
the summary ranks by (:mod:`pipeline.measure.objective`). Torch-free.

MLflow 3.17 keeps the runs table's saved views ("Views" at the top right of the Runs page) as experiment
tags `mlflow.sharedViewState.<id>`. A tag's value is JSON: `name`, `createdAt`, `updatedAt` (ms) and
`state`, itself a JSON string with the search facets (`searchFilter`, `orderByKey`, `orderByAsc`, ...)
and the UI state (the table's `selectedColumns`, `columnOrder`, `columnWidths`; the chart view's
`compareRunSections`, `compareRunCharts`, `isAccordionReordered`). The UI refuses values
over 20,000 characters and holds 40 views per experiment, so the oldest sweep views are dropped
beyond `KEEP_VIEWS`. A view opens at `#/experiments/<id>/runs?viewStateShareKey=<id>`; a URL that
also carries search parameters (a filter, a sort) ignores it. Sorting by a metric lists the runs flat
(no parent/child nesting): the best job on top, the sweep's own run and runs without the metric last.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field

from pipeline.measure.objective import STEP_P50, Objective, objective_named
from pipeline.tracking import RunRecord, Tracker

VIEW_TAG_PREFIX = "mlflow.sharedViewState."
SWEEP_VIEW_PREFIX = "sweep-"  # the views this project makes; others (a user's own) are never touched
KEEP_VIEWS = 30  # of ours per experiment, below the UI's 40, leaving room for a user's own views
MAX_VALUE_CHARS = 20_000

STEP_TIME = STEP_P50
SPEEDUP = ("speedup/vs_eager", "speedup/ci95_low", "speedup/ci95_high")  # the figure, then its interval
# Where the figures live on each device: the caching allocator's peak on a GPU, the process's RSS on a CPU.
MEMORY = ("memory/peak_reserved_gib", "memory/cpu_rss_peak_gib")
COSTS = ("compile/total_s", *MEMORY, "diagnose/graph_breaks")
# The sweep's answer, on its parent's row (pipeline/sweep/finish.py sets them): first, then the figures.
VERDICT_TAGS = ("verdict",)
# Last: the job's own warning, and the fastest configuration's name (only a `fastest` verdict has one).
LAST_TAGS = ("noisy", "fastest_config")
# Compiled and eager per-unit times on one line chart (MLflow's LINE charts take several metrics).
CURVES = ("curve/step_ms", "curve/eager_step_ms")
# The chart view's sections (one per metric prefix; MLflow sorts them alphabetically unless told), the
# objective's first, then the most telling; prefixes not listed follow.
SECTIONS = (
    "step",
    "latency",
    "speedup",
    "compile",
    "memory",
    "throughput",
    "curve",
    "parity",
    "diagnose",
    "eager",
    "warmup",
    "loss",
)
RUN_NAME = "attributes.`Run Name`"
CREATED = "runDateAndNestInfo"  # MLflow's own column, always shown: when (a check mark and "2 minutes ago")
# Columns whose width is not their header's, in px. At 1600 px the verdict, the objective and the speedup
# with their intervals fit beside MLflow's sidebar, the names and the Created column; the costs follow.
WIDTHS = {
    RUN_NAME: 200,
    CREATED: 120,
    "tags.`verdict`": 100,
    "tags.`noisy`": 70,
    "tags.`fastest_config`": 260,
}
HEADER_CHAR_PX, HEADER_PADDING_PX, SORT_ARROW_PX = 6.5, 28, 16  # MLflow 3.17's header font, measured
VALUE_PX = 120  # a figure's value: 9 significant digits whole, longer ones end in an ellipsis
NAME_CHAR_PX, NAME_PADDING_PX, MAX_NAME_PX = 5.4, 50, 400  # the runs' names whole, up to a point


def metric_column(name: str) -> str:
    return f"metrics.`{name}`"


def tag_column(name: str) -> str:
    return f"tags.`{name}`"


@dataclass(frozen=True, kw_only=True)
class RunsView:
    """One saved view of the runs table."""

    view_id: str
    name: str
    search_filter: str
    objective: Objective
    columns: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)  # the chart view's, in order
    name_width: int = WIDTHS[RUN_NAME]  # px: the runs' names whole (name_width_for)

    @property
    def tag_key(self) -> str:
        return VIEW_TAG_PREFIX + self.view_id

    def state(self) -> dict[str, object]:
        order = [RUN_NAME, CREATED, *self.columns]  # a width applies only to a column listed here
        sort_key = metric_column(self.objective.metric)
        widths = {c: column_width(c, sorted_by=c == sort_key) for c in order}
        widths[RUN_NAME] = self.name_width
        widths[CREATED] = WIDTHS[CREATED]
        return {
            "searchFilter": self.search_filter,
            "orderByKey": sort_key,
            "orderByAsc": self.objective.ascending,
            "startTime": "ALL",
            "lifecycleFilter": "Active",
            "modelVersionFilter": "All Runs",
            "datasetsFilter": [],
            "selectedColumns": list(self.columns),
            "columnOrder": order,
            "columnWidths": widths,
            **self.charts(),
        }

    def charts(self) -> dict[str, object]:
        """The chart view: sections in `sections` order, each opening with the charts of the table's
        figures (not their intervals' ends), and the compiled and eager per-unit times on one line chart;
        MLflow adds a chart for every other metric after them (its "isReordered" sections keep the order
        given) and the other prefixes' sections after these."""
        metrics = [c.split("`")[1] for c in self.columns if c.startswith("metrics.") and "ci95" not in c]
        charts: list[dict[str, object]] = [
            {
                "uuid": f"autogen-{metric}",
                "type": "BAR",
                "metricKey": metric,
                "displayName": metric,
                "metricSectionId": f"autogen-{section_of(metric)}",
                "isGenerated": True,
                "deleted": False,
            }
            for metric in metrics
            if section_of(metric) in self.sections
        ]
        if section_of(CURVES[0]) in self.sections:
            charts += curve_charts()
        return {
            "compareRunSections": [
                {"uuid": f"autogen-{name}", "name": name, "display": True, "isReordered": True}
                for name in self.sections
            ],
            "compareRunCharts": charts,
            "isAccordionReordered": True,
        }

    def tag_value(self, *, now_ms: int | None = None) -> str:
        now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        envelope = {
            "name": self.name,
            "createdAt": now_ms,
            "updatedAt": now_ms,
            "state": json.dumps(self.state()),
        }
        value = json.dumps(envelope)
        if len(value) > MAX_VALUE_CHARS:
            raise ValueError(
                f"view {self.view_id!r} is {len(value)} characters; MLflow's UI takes {MAX_VALUE_CHARS}"
            )
        return value


def section_of(metric: str) -> str:
    return metric.split("/")[0]


def curve_charts() -> list[dict[str, object]]:
    """Compiled and eager per-unit times on one line chart (each run a line per variant), under the
    compiled curve's own chart id so that MLflow does not add it alone; the eager curve's own chart is
    left out (deleted) for the same reason."""
    compiled, eager = CURVES
    return [
        {
            "uuid": f"autogen-{compiled}",
            "type": "LINE",
            "metricKey": compiled,
            "selectedMetricKeys": list(CURVES),
            "displayName": "time per measured unit, ms: compiled and paired eager",
            "metricSectionId": f"autogen-{section_of(compiled)}",
            "xAxisKey": "step",
            "xAxisScaleType": "linear",
            "scaleType": "linear",
            "lineSmoothness": 0,
            "range": {"xMin": None, "xMax": None, "yMin": None, "yMax": None},
            "isGenerated": True,
            "deleted": False,
        },
        {
            "uuid": f"autogen-{eager}",
            "type": "LINE",
            "metricKey": eager,
            "displayName": eager,
            "metricSectionId": f"autogen-{section_of(eager)}",
            "isGenerated": True,
            "deleted": True,
        },
    ]


def columns_for(
    objective: Objective, *, logged: set[str] | None = None, tags: set[str] | None = None
) -> list[str]:
    """The verdict (on the parent's row), the objective with its 95% interval (a rate's: the latency it
    is made of, with that one's), the speedup over the paired eager copy with its interval, then what
    it costs: the step time, compile time, peak memory and graph breaks; the `noisy` flag and the
    fastest configuration's name last. Before the sweep has run (`logged`, `tags` None) every candidate
    is listed, both memory figures included; afterwards only what some run of the sweep has."""
    figure = [objective.metric, *(objective.interval or ())]
    if objective.inverse_of is not None:
        base = objective_named(objective.inverse_of)
        figure += [base.metric, *(base.interval or ())]
    metrics = list(dict.fromkeys([*figure, *SPEEDUP, STEP_TIME, *COSTS]))
    if logged is not None:
        metrics = [m for m in metrics if m in logged]
    first = [t for t in VERDICT_TAGS if tags is None or t in tags]
    last = [t for t in LAST_TAGS if tags is None or t in tags]
    return [*map(tag_column, first), *map(metric_column, metrics), *map(tag_column, last)]


def sections_for(objective: Objective, *, logged: set[str] | None = None) -> list[str]:
    """The objective's section first, then `SECTIONS`; once the sweep has run, only those it logged."""
    names = dict.fromkeys([section_of(objective.metric), *SECTIONS])
    if logged is None:
        return list(names)
    present = {section_of(name) for name in logged if "/" in name}
    return [name for name in names if name in present]


def column_width(column: str, *, sorted_by: bool = False) -> int:
    """Pixels for the whole header (MLflow cuts headers, never wraps them) and, for a figure, its value;
    an interval's end is as wide as its header."""
    if column in WIDTHS:
        return WIDTHS[column]
    name = column.split("`")[1] if "`" in column else column
    header = math.ceil(HEADER_CHAR_PX * len(name)) + HEADER_PADDING_PX
    width = header if "ci95" in name else max(VALUE_PX, header)
    return width + (SORT_ARROW_PX if sorted_by else 0)


def name_width_for(names: list[str]) -> int:
    """Pixels for the longest of the runs' names whole (where names of one sweep differ: at their end),
    between the default and a cap that leaves the figures on a laptop's screen."""
    if not names:
        return WIDTHS[RUN_NAME]
    longest = max(len(name) for name in names)
    return min(MAX_NAME_PX, max(WIDTHS[RUN_NAME], math.ceil(NAME_CHAR_PX * longest) + NAME_PADDING_PX))


def sweep_view(
    *,
    sweep_id: str,
    label: str,
    objective: Objective,
    logged: set[str] | None = None,
    tags: set[str] | None = None,
    names: list[str] | None = None,
) -> RunsView:
    """The view of one sweep: its runs only (the parent and its jobs carry `sweep_id`)."""
    return RunsView(
        view_id=view_id_for(sweep_id),
        name=f"{label} ({sweep_id})",
        search_filter=f"tags.sweep_id = {filter_literal(sweep_id)}",
        objective=objective,
        columns=columns_for(objective, logged=logged, tags=tags),
        sections=sections_for(objective, logged=logged),
        name_width=name_width_for(names or []),
    )


def view_id_for(sweep_id: str) -> str:
    """A tag-key-safe id (letters, digits, `-`, `_`), one per sweep id and never another's: ASCII
    letters, digits and `-` stay, `_` becomes `__` and any other character `_<its code in hex>_`
    (`hx.1` -> `sweep-hx_2e_1`, `hx_1` -> `sweep-hx__1`)."""
    return SWEEP_VIEW_PREFIX + "".join(
        c if c.isascii() and (c.isalnum() or c == "-") else "__" if c == "_" else f"_{ord(c):x}_"
        for c in sweep_id
    )


def filter_literal(value: str) -> str:
    """A string in MLflow's search syntax: single quotes, or double quotes around a value holding one."""
    if "'" not in value:
        return f"'{value}'"
    if '"' not in value:
        return f'"{value}"'
    raise ValueError(f"{value!r} holds both quote characters: MLflow's search syntax cannot express it")


def stale_views(experiment_tags: dict[str, str], keep: int = KEEP_VIEWS) -> list[str]:
    """Tag keys of this project's views beyond the newest `keep` (a user's own views are left alone)."""
    ours = []
    for key, value in experiment_tags.items():
        if key.startswith(VIEW_TAG_PREFIX + SWEEP_VIEW_PREFIX):
            try:
                created = int(json.loads(value).get("createdAt", 0))
            except (ValueError, TypeError, AttributeError):
                created = 0
            ours.append((created, key))
    ours.sort(reverse=True)
    return [key for _, key in ours[keep:]]


def publish(tracker: Tracker, view: RunsView) -> str:
    """Save the view in the experiment, drop this project's oldest views beyond `KEEP_VIEWS`, and
    return the view's URL."""
    tracker.set_experiment_tag(view.tag_key, view.tag_value())
    for key in stale_views(tracker.experiment_tags()):
        tracker.delete_experiment_tag(key)
    return tracker.runs_url(view.view_id)


def publish_sweep_view(
    tracker: Tracker, *, sweep_id: str, label: str, objective: Objective, runs: list[RunRecord] | None = None
) -> str:
    """The sweep's view, saved; with the sweep's runs given, only the columns that some run has (the
    parent's verdict included: it is looked up here, as `runs` may be its jobs only), and the names'
    column as wide as their longest."""
    logged = tags = None
    names: list[str] = []
    if runs is not None:
        parent = tracker.sweep_parent(sweep_id)
        everything = [*runs, *([parent] if parent is not None else [])]
        logged = {name for run in everything for name in run.metrics}
        tags = {name for run in everything for name in run.tags}
        names = [run.name for run in runs if run.tags.get("sweep_parent") != "true"]
    view = sweep_view(
        sweep_id=sweep_id, label=label, objective=objective, logged=logged, tags=tags, names=names
    )
    return publish(tracker, view)
