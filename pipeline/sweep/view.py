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

from pipeline.measure.objective import STEP_P50, Objective
from pipeline.tracking import RunRecord, Tracker

VIEW_TAG_PREFIX = "mlflow.sharedViewState."
SWEEP_VIEW_PREFIX = "sweep-"  # the views this project makes; others (a user's own) are never touched
KEEP_VIEWS = 30  # of ours per experiment, below the UI's 40, leaving room for a user's own views
MAX_VALUE_CHARS = 20_000

STEP_TIME = STEP_P50
# Where the figures live on each device: the caching allocator's peak on a GPU, the process's RSS on a CPU.
MEMORY = ("memory/peak_reserved_gib", "memory/cpu_rss_peak_gib")
VERDICT_TAGS = ("verdict", "noisy")
# The chart view's sections (one per metric prefix; MLflow sorts them alphabetically unless told), most
# telling first; prefixes not listed follow.
SECTIONS = (
    "step",
    "speedup",
    "compile",
    "memory",
    "diagnose",
    "throughput",
    "eager",
    "parity",
    "warmup",
    "loss",
)
RUN_NAME = "attributes.`Run Name`"
# Columns whose width is not their header's, in px; a metric's full value (17 digits) takes ~150.
WIDTHS = {RUN_NAME: 230, "tags.`verdict`": 220, "tags.`noisy`": 70}
FULL_VALUE = 150


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

    @property
    def tag_key(self) -> str:
        return VIEW_TAG_PREFIX + self.view_id

    def state(self) -> dict[str, object]:
        order = [RUN_NAME, *self.columns]  # the run name's width applies only when it is listed here
        sort_key = metric_column(self.objective.metric)
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
            "columnWidths": {c: column_width(c, sorted_by=c == sort_key) for c in order},
            **self.charts(),
        }

    def charts(self) -> dict[str, object]:
        """The chart view: sections in `sections` order, each opening with the charts of the table's
        metrics; MLflow adds a chart for every other metric after them (its "isReordered" sections keep
        the order given) and the other prefixes' sections after these."""
        metrics = [c.split("`")[1] for c in self.columns if c.startswith("metrics.")]
        return {
            "compareRunSections": [
                {"uuid": f"autogen-{name}", "name": name, "display": True, "isReordered": True}
                for name in self.sections
            ],
            "compareRunCharts": [
                {
                    "uuid": f"autogen-{metric}",
                    "type": "BAR",
                    "metricKey": metric,
                    "displayName": metric,
                    "metricSectionId": f"autogen-{metric.split('/')[0]}",
                    "isGenerated": True,
                    "deleted": False,
                }
                for metric in metrics
                if metric.split("/")[0] in self.sections
            ],
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


def columns_for(
    objective: Objective, *, logged: set[str] | None = None, tags: set[str] | None = None
) -> list[str]:
    """The objective, speedup, compile time, peak memory and graph breaks, the verdict tags, then the
    objective's interval. Before the sweep has run (`logged`, `tags` None) every candidate is listed,
    both memory figures included; afterwards only what some run of the sweep has."""
    head = [
        objective.metric,
        STEP_TIME,
        "speedup/vs_eager",
        "compile/total_s",
        *MEMORY,
        "diagnose/graph_breaks",
    ]
    interval = list(objective.interval or ())
    if logged is not None:
        head, interval = [m for m in head if m in logged], [m for m in interval if m in logged]
    verdicts = [t for t in VERDICT_TAGS if tags is None or t in tags]
    return [
        *map(metric_column, dict.fromkeys(head)),
        *map(tag_column, verdicts),
        *map(metric_column, interval),
    ]


def sections_for(objective: Objective, *, logged: set[str] | None = None) -> list[str]:
    """The objective's section first, then `SECTIONS`; once the sweep has run, only those it logged."""
    names = dict.fromkeys([objective.metric.split("/")[0], *SECTIONS])
    if logged is None:
        return list(names)
    present = {name.split("/")[0] for name in logged if "/" in name}
    return [name for name in names if name in present]


def column_width(column: str, *, sorted_by: bool = False) -> int:
    """Pixels for the whole header (MLflow cuts headers, never wraps them) and a full value."""
    if column in WIDTHS:
        return WIDTHS[column]
    name = column.split("`")[1] if "`" in column else column
    header = math.ceil(6.5 * len(name)) + 30  # ~6.5 px a character in the UI's header font, and padding
    return max(FULL_VALUE, header) + (20 if sorted_by else 0)  # the sort arrow


def sweep_view(
    *,
    sweep_id: str,
    label: str,
    objective: Objective,
    logged: set[str] | None = None,
    tags: set[str] | None = None,
) -> RunsView:
    """The view of one sweep: its runs only (the parent and its jobs carry `sweep_id`)."""
    return RunsView(
        view_id=view_id_for(sweep_id),
        name=f"{label} ({sweep_id})",
        search_filter=f"tags.sweep_id = {filter_literal(sweep_id)}",
        objective=objective,
        columns=columns_for(objective, logged=logged, tags=tags),
        sections=sections_for(objective, logged=logged),
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
    """The sweep's view, saved; with the sweep's runs given, only the columns that some run has."""
    logged = tags = None
    if runs is not None:
        logged = {name for run in runs for name in run.metrics}
        tags = {name for run in runs for name in run.tags}
    view = sweep_view(sweep_id=sweep_id, label=label, objective=objective, logged=logged, tags=tags)
    return publish(tracker, view)
