"""A sweep's summary: one row per job (the latest run of each), configurations with their pooled
intervals, the verdict (pipeline/sweep/verdict.py), failures by class, the aggregates (pass rate,
geometric-mean speedup with its bootstrap interval, the PyTorch 2.0 launch's weighted speedup) and notes.
Read from MLflow's records or from job folders; torch-free."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.config.schema import from_dict
from pipeline.diagnose.comm import comm_phrase
from pipeline.display import figure, first_few
from pipeline.identity import (
    COMPILE_KEYS,
    REPEAT_KEY,
    TABLE_KEYS,
    config_hash,
    extra_keys,
    identity,
    pool_hash,
    run_name,
)
from pipeline.job.result import JobResult, UnreadableResult
from pipeline.jobdir import JOB_CONFIG, JobDir
from pipeline.measure.noise import CONTENDED_WAIT_PCT, OTHERS_CPU_PCT, crowded, waited
from pipeline.measure.objective import (
    GEOMEAN_SPEEDUP,
    LATENCY,
    OBJECTIVES,
    SAMPLES,
    SPEEDUP,
    STEP_TIME,
    TOKENS,
    Objective,
    Work,
    choose,
    paired_speedup,
)
from pipeline.measure.registry import headline, interval_of
from pipeline.measure.stats import sample_std, t975
from pipeline.status import FINISHED, JOB_LOST, NON_FINITE_LOSS, RESULT_NOT_LOGGED, SKIPPED
from pipeline.sweep import suite
from pipeline.sweep.pareto import MEMORY_METRICS, ParetoFront, pareto_front
from pipeline.sweep.suite import MIN_BOOTSTRAP_JOBS, SuiteAnswer, geomean
from pipeline.sweep.verdict import SEVERE_SLOWDOWN, Z95, Estimate, Rule, Verdict, decide, severe_job
from pipeline.sweep_context import SweepContext
from pipeline.tracking import RunRecord

AMP_PRECISIONS = ("amp", "amp_fp16")
FP32_PRECISIONS = ("fp32",)
SUITE = "suite"  # sweep.kind of a suite: one compile configuration over many models
BOOTSTRAP_SAMPLES = 2000


@dataclass(kw_only=True)
class Row:
    """One job of a sweep."""

    name: str
    status: str
    config: dict[str, str]  # identity tags (pipeline.identity), varied keys included
    metrics: dict[str, float]
    error: str = ""
    error_type: str = ""
    config_hash: str = ""
    pool_hash: str = ""  # shared by the repeats of one configuration
    start_time: int = 0  # ms since the epoch
    work: Work | None = None  # what one unit did, as its worker stated it (None: no worker result)
    run_id: str = ""
    environment: dict[str, str] = field(default_factory=dict)  # env.* tags: versions, GPU, driver

    @property
    def compiled(self) -> bool:
        return self.config.get("mode") not in (None, "eager")

    @property
    def speedup(self) -> float | None:
        return self.metrics.get(SPEEDUP)

    @property
    def parity(self) -> float | None:
        return self.metrics.get("parity/ok")

    @property
    def passing(self) -> bool:
        return self.status == FINISHED and self.parity != 0.0 and headline(self.metrics) is not None

    @property
    def noisy(self) -> bool:
        return bool(self.metrics.get("step/noisy"))

    @property
    def crowded(self) -> bool:
        """Other processes kept its CPUs busy beyond OTHERS_CPU_PCT while it measured (noise.crowded)."""
        return crowded(self.metrics.get("step/cpu_others_pct"))

    @property
    def slowdown(self) -> float | None:
        """How much longer the slowest tenth of its steps took than the fastest tenth (p90 / p10)."""
        p10, p90 = self.metrics.get("step/p10_ms"), self.metrics.get("step/p90_ms")
        return p90 / p10 if p10 and p90 else None

    @property
    def peak_gib(self) -> float | None:
        """The job's peak memory (MEMORY_METRICS' order): the device's reserved memory over the measured
        steps, else (a job on the CPU) the worker process's peak resident set size."""
        return next((self.metrics[m] for m in MEMORY_METRICS if m in self.metrics), None)

    @property
    def peak_is_device(self) -> bool:
        return MEMORY_METRICS[0] in self.metrics


@dataclass(kw_only=True)
class Configuration:
    """The jobs of one configuration (its repeats) and their pooled estimate."""

    name: str
    rows: list[Row]
    estimate: Estimate


@dataclass(frozen=True, kw_only=True)
class Scaling:
    """A passing distributed job: its scaling efficiency throughput_N / (N x throughput_1) against its
    one-process twin in the sweep, what its step lost to communication, its largest rank's memory."""

    name: str
    world_size: int
    baseline: str | None = None
    efficiency: float | None = None
    communication: str | None = None  # pipeline.diagnose.comm.comm_phrase
    largest_rank_gib: float | None = None  # memory/rank_peak_allocated_max_gib


PARALLEL_KEYS = ("parallel", "world_size")


def scaling_efficiencies(rows: list[Row]) -> list[Scaling]:
    """Each passing multi-process job, with its scaling efficiency where the sweep has its one-process
    twin (the same identity but for the parallel keys; a `parallel=none` twin first)."""
    singles: dict[tuple[tuple[str, str], ...], Row] = {}
    for row in sorted(rows, key=lambda r: r.config.get("parallel") != "none"):
        if row.passing and row.config.get("world_size", "1") == "1":
            singles.setdefault(_base(row, PARALLEL_KEYS), row)
    out = []
    key = "throughput/samples_per_s"
    for row in rows:
        world = int(row.config.get("world_size", "1"))
        if world <= 1 or not row.passing:
            continue
        single = singles.get(_base(row, PARALLEL_KEYS))
        if single is None or key not in row.metrics or key not in single.metrics:
            single = None
        out.append(
            Scaling(
                name=row.name,
                world_size=world,
                baseline=single.name if single else None,
                efficiency=row.metrics[key] / (world * single.metrics[key]) if single else None,
                communication=comm_phrase(row.metrics),
                largest_rank_gib=row.metrics.get("memory/rank_peak_allocated_max_gib"),
            )
        )
    return out


@dataclass(kw_only=True)
class Summary:
    sweep_id: str
    rows: list[Row]
    varied: list[str] = field(default_factory=list)
    objective: Objective = STEP_TIME
    configurations: list[Configuration] = field(default_factory=list)
    verdict: Verdict | None = None
    aggregates: dict[str, float] = field(default_factory=dict)
    failure_classes: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    min_effect_pct: float = 1.0  # the verdict's smallest difference that counts (sweep.min_effect_pct)
    scaling: list[Scaling] = field(default_factory=list)  # passing distributed jobs
    geomean_jobs: int = 0  # the passing compiled jobs the geometric-mean speedup is taken over
    severe_slowdown: float = SEVERE_SLOWDOWN  # the verdict's limit of severe interference
    pareto: ParetoFront | None = None  # ranked by throughput: its front against compile time and memory
    suite: SuiteAnswer | None = None  # sweep.kind=suite: the answer per model (no cross-model verdict)

    @property
    def failures(self) -> list[Row]:
        """Every job with a failure class: those that did not finish, and those that DIVERGED from eager."""
        return [r for r in self.rows if failure_class(r) is not None]

    @property
    def not_finished(self) -> list[Row]:
        return [r for r in self.rows if r.status != FINISHED]

    @property
    def fastest(self) -> Configuration | None:
        fastest = self.verdict.fastest if self.verdict else None
        return next((c for c in self.configurations if c.name == fastest), None)


# ------------------------------------------------------------------------------------ rows
def row_from_run(run: RunRecord, varied: list[str] | tuple[str, ...] = ()) -> Row:
    tags = run.tags
    error = f"{tags['error_type']}: {tags.get('error_message', '')}" if "error_type" in tags else ""
    keys = [*TABLE_KEYS, *extra_keys(varied)]
    return Row(
        name=run.name,
        status=run.status,
        config={k: tags[k] for k in keys if k in tags},
        metrics=dict(run.metrics),
        error=error,
        error_type=tags.get("error_type", ""),
        config_hash=tags.get("config_hash", ""),
        pool_hash=tags.get("pool_hash") or tags.get("config_hash", ""),
        start_time=run.start_time_ms,
        work=Work.from_tags(tags),
        run_id=run.run_id,
        environment={
            key: tags[tag] for tag, key in (("torch", "torch"), ("device", "gpu_name")) if tag in tags
        },
    )


def row_from_result(path: Path) -> Row | None:
    """A job from its folder (result, job config, the sweep's sweep.json), for summaries without MLflow;
    None for a job a resumed sweep skipped. Raises OSError or UnreadableResult for unreadable files."""
    result = JobResult.read(path)
    if result.status == SKIPPED:
        return None
    try:
        cfg = from_dict(json.loads(JobDir(path.parent).job_config.read_text()))
    except OSError as exc:
        raise UnreadableResult(
            f"its job's config ({JOB_CONFIG}) cannot be read ({exc.strerror or exc})"
        ) from exc
    except Exception as exc:  # JSON, or a config of another shape
        raise UnreadableResult(
            f"its job's config ({JOB_CONFIG}) is not a config ({type(exc).__name__}: {exc})"
        ) from exc
    sweep = SweepContext.load(path.parent.parent)
    varied = sweep.axes if sweep else []
    error = result.error
    return Row(
        name=run_name(cfg, varied),
        status=result.status,
        config={k: v for k, v in identity(cfg, varied).items() if k != "teacher"},
        metrics=dict(result.metrics),
        error=f"{error.type}: {error.message}" if error else "",
        error_type=error.type if error else "",
        config_hash=config_hash(cfg),
        pool_hash=pool_hash(cfg),
        start_time=int(1000 * (result.info.get("worker_started_at") or path.stat().st_mtime)),
        work=Work.from_dict(result.work),
        environment={k: str(v) for k, v in result.environment.items()},
    )


def latest_per_config(rows: list[Row]) -> list[Row]:
    """A resumed sweep may hold a failed and a finished run of one job: keep the latest of each."""
    latest: dict[str, Row] = {}
    for row in sorted(rows, key=lambda r: r.start_time):
        latest[row.config_hash or row.name] = row
    return sorted(latest.values(), key=lambda r: r.start_time)


# ------------------------------------------------------------------------------------ configurations
def configurations(rows: list[Row], objective: Objective) -> list[Configuration]:
    """Passing jobs grouped by configuration (repeats together), each with its pooled estimate."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        if row.passing and objective.metric in row.metrics:
            groups.setdefault(row.pool_hash or row.name, []).append(row)
    configs = [
        Configuration(name=_pool_name(g), rows=g, estimate=_pooled(_pool_name(g), g, objective))
        for g in groups.values()
    ]
    by_base = {_base(c.rows[0]): c.name for c in configs if not c.rows[0].compiled}
    # a compiled configuration learns its eager counterpart in the sweep and its paired speedup
    for c in configs:
        paired = [r for r in c.rows if SPEEDUP in r.metrics]
        if c.rows[0].compiled and paired:
            c.estimate = dataclasses.replace(
                c.estimate,
                eager_name=by_base.get(_base(c.rows[0])),
                speedup=pooled_speedup(paired),
                base=repr(_base(c.rows[0])),
            )
    return configs


def _pool_name(rows: list[Row]) -> str:
    name = rows[0].name
    return "·".join(p for p in name.split("·") if not p.startswith("repeat=")) if len(rows) > 1 else name


def _base(row: Row, without: tuple[str, ...] = (*COMPILE_KEYS, REPEAT_KEY)) -> tuple[tuple[str, str], ...]:
    """The configuration without `without` (by default its compile settings and repeat index, which a
    compiled job and its eager counterpart share)."""
    return tuple(sorted((k, v) for k, v in row.config.items() if k not in without))


def reach(row: Row, objective: Objective) -> float | None:
    """The best a job's figure may be once the host's slowing (which only slows steps) is allowed for:
    a noisy job's median's best end sped up by p90 / p10; a crowded one's fastest step sped up by its
    slowdown or by 1 / (1 - others' CPU share); a waiting one's best end sped up by its wait share; one
    whose calls back to back the host held back (`step/above_latency`) by an unknown amount: unbounded.
    None for a quiet job, or an unbounded noisy one (pipeline/sweep/verdict.py)."""
    base = OBJECTIVES.get(objective.inverse_of, objective) if objective.inverse_of else objective
    wait = row.metrics.get("step/cpu_wait_pct")
    section = base.metric.split("/", 1)[0]  # the median duration behind the objective: step/*, latency/*
    held_back = section == "step" and bool(row.metrics.get("step/above_latency"))
    if not (row.noisy or waited(wait) or row.crowded or held_back) or base.interval is None:
        return None
    low_key, m = base.interval[0], row.metrics
    floors = [0.0] if held_back else []
    if row.noisy or row.crowded:
        fastest, slowdown = m.get(f"{section}/min_ms", m.get(f"{section}/p10_ms")), row.slowdown
        if fastest is None or slowdown is None:
            floors.append(0.0)
        else:
            # crowded: others' processes may have slowed the whole job beyond its own spread, so from its
            # fastest step; noisy: the host slowed its steps at most by their own spread, so from its median
            best = fastest if row.crowded else max(fastest, m.get(low_key, 0.0))
            floors.append(best / slowdown)
            others = m.get("step/cpu_others_pct")
            if row.crowded and others is not None:
                floors.append(fastest * (1 - min(others, 100.0) / 100))
    if waited(wait) and low_key in m:
        floors.append(m[low_key] * (1 - wait / 100))
    if not floors:
        return None
    floor = min(floors)
    _, low, high = objective.estimate({**m, low_key: min(m.get(low_key, floor), floor)})
    return high if objective.higher_is_better else low


def _pooled(name: str, rows: list[Row], objective: Objective) -> Estimate:
    """One job: its own interval. Repeats: their mean, with the wider of the within-job and the
    between-job t interval; noisy repeats left out when quiet ones exist. The slowdown is the largest."""
    quiet = [r for r in rows if not r.noisy]
    used = quiet or rows
    figures = [objective.estimate(r.metrics) for r in used]
    steps = None
    if len(figures) == 1:
        value, low, high = figures[0]
        steps = int(used[0].metrics.get("step/count", 0)) or None
    else:
        values = [f[0] for f in figures]
        value = statistics.fmean(values)
        within = math.sqrt(sum(((f[2] - f[1]) / 2) ** 2 for f in figures)) / len(figures)
        between = t975(len(values) - 1) * sample_std(values) / math.sqrt(len(values))
        half = max(within, between)
        low, high = value - half, value + half
    reaches = [x for x in (reach(r, objective) for r in used) if x is not None]
    best = (max if objective.higher_is_better else min)(reaches) if reaches else None
    slowdowns = [(r.slowdown, r.name) for r in rows if r.slowdown is not None]
    slowdown, job = max(slowdowns, default=(None, None))
    waits = [
        (r.metrics.get("step/cpu_wait_pct", 0.0), r.name) for r in rows if r.metrics.get("step/cpu_contended")
    ]
    contended = max(waits, default=(None, None))
    return Estimate(
        name=name,
        value=value,
        low=max(low, 1e-12),
        high=high,
        noisy=not quiet,
        reach=best,
        slowdown=slowdown,
        slowdown_job=job,
        contended_wait_pct=contended[0],
        contended_job=contended[1],
        steps=steps,
    )


def pooled_speedup(rows: list[Row]) -> tuple[float, float, float]:
    """A compiled configuration's paired speedup: one job's own interval; repeats' geometric mean, with
    the wider of the within-job and the between-job t interval on the log scale."""
    intervals = [paired_speedup(r.metrics) for r in rows]
    if len(intervals) == 1:
        s, low, high = intervals[0]
        return s, min(low, s), max(high, s)
    logs = [math.log(s) for s, _, _ in intervals]
    halves = [(math.log(max(high, s)) - math.log(max(min(low, s), 1e-12))) / 2 for s, low, high in intervals]
    center = statistics.fmean(logs)
    within = math.sqrt(sum(h * h for h in halves)) / len(halves)
    between = t975(len(logs) - 1) * sample_std(logs) / math.sqrt(len(logs))
    half = max(within, between)
    return math.exp(center), math.exp(center - half), math.exp(center + half)


# ------------------------------------------------------------------------------------ failures
def failure_class(row: Row) -> str | None:
    """What kind of failure a job is (seed 001's statuses), or None for a passing job."""
    if row.status == FINISHED:
        return "accuracy (loss parity)" if row.parity == 0.0 else None
    if row.error_type.startswith("CompileError"):
        return "compile error"
    return FAILURE_CLASSES.get(row.error_type, "run error" if row.compiled else "eager error")


FAILURE_CLASSES = {
    NON_FINITE_LOSS: "non-finite loss",
    "OutOfMemoryError": "out of memory",
    "Timeout": "timeout",
    "OverCompileBudget": "over compile budget",
    "GraphBreakInFullgraph": "compile error",
    "ConfigError": "bad input",
    "WorkerCrashed": "crash",
    JOB_LOST: "lost or interrupted",
    "Interrupted": "lost or interrupted",
    RESULT_NOT_LOGGED: "result not in MLflow yet (--sync)",
}


# ------------------------------------------------------------------------------------ the summary
def bootstrap_geomean(
    values: list[float],
    intervals: list[tuple[float, float]] | None = None,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the geometric mean of jobs' speedups. With `intervals`, two
    levels: jobs resampled, each drawn job's speedup drawn from its own interval (log-normal, each side
    its own width); never narrower than the geometric means of the jobs' low and high ends."""
    rng = random.Random(seed)
    logs = [math.log(v) for v in values]
    sides = [
        ((lg - math.log(max(lo, 1e-12))) / Z95, (math.log(max(hi, 1e-12)) - lg) / Z95)
        for lg, (lo, hi) in zip(logs, intervals or [(v, v) for v in values], strict=True)
    ]
    means = []
    for _ in range(samples):
        total = 0.0
        for i in rng.choices(range(len(values)), k=len(values)):
            z = rng.gauss(0, 1)
            total += logs[i] + z * (sides[i][0] if z < 0 else sides[i][1])
        means.append(math.exp(total / len(values)))
    means.sort()
    low, high = means[int(0.025 * samples)], means[int(0.975 * samples) - 1]
    if intervals:
        low = min(low, geomean([max(lo, 1e-12) for lo, _ in intervals]))
        high = max(high, geomean([hi for _, hi in intervals]))
    return low, high


def kind_of_jobs(kinds: Iterable[str | None]) -> str:
    """The sweep's `sweep.kind` as its jobs give it: the one kind they all name, else `compare`."""
    named = set(kinds) - {None}
    return named.pop() if len(named) == 1 else "compare"


def summarize(
    sweep_id: str,
    rows: list[Row],
    *,
    varied: list[str] | tuple[str, ...] = (),
    rule: Rule | None = None,
    configured: str | None = None,
    kind: str = "compare",
) -> Summary:
    """The summary of a sweep's jobs; `configured`: the sweep's `sweep.objective`, if it names one;
    `kind`: `suite` answers per model (pipeline/sweep/suite.py) and ranks no model against another."""
    summary = Summary(sweep_id=sweep_id, rows=latest_per_config(rows), varied=extra_keys(varied))
    summary.objective = choose([r.work for r in summary.rows if r.passing], configured)
    summary.configurations = configurations(summary.rows, summary.objective)
    rule = rule or Rule()
    summary.min_effect_pct = rule.min_effect_pct
    rule = dataclasses.replace(rule, higher_is_better=summary.objective.higher_is_better)
    summary.severe_slowdown = rule.severe_slowdown
    if kind == SUITE:  # models are not ranked against each other
        summary.suite = suite_answer(summary.rows, rule.min_effect_pct)
    else:
        summary.verdict = decide([c.estimate for c in summary.configurations], rule, summary.objective.label)
    if summary.objective.higher_is_better and summary.suite is None:
        summary.pareto = pareto_front(summary.rows, summary.objective.metric)
    _aggregates(summary)
    _notes(summary)
    summary.scaling = scaling_efficiencies(summary.rows)
    return summary


def suite_answer(rows: list[Row], min_effect_pct: float) -> SuiteAnswer:
    """Each compiled job (a model, with whatever else the suite varies) against its own eager copy."""
    outcomes = [
        suite.classify(
            model=row.config.get("model", row.name),
            run_name=row.name,
            status=row.status,
            metrics=row.metrics,
            failure=f"{failure_class(row)}: {row.error}" if failure_class(row) else "",
            min_effect_pct=min_effect_pct,
        )
        for row in rows
        if row.compiled or row.status != FINISHED
    ]
    return suite.answer(outcomes, bootstrap=bootstrap_geomean)


def _aggregates(summary: Summary) -> None:
    agg = summary.aggregates
    compiled = [r for r in summary.rows if r.compiled]
    with_speedup = [r for r in compiled if r.passing and r.speedup]
    agg["jobs"] = len(summary.rows)
    agg["jobs_failed"] = len(summary.failures)
    summary.failure_classes.update(Counter(filter(None, map(failure_class, summary.rows))))
    if compiled:
        agg["sweep/pass_rate"] = sum(r.passing for r in compiled) / len(compiled)
        broken = [r for r in compiled if r.passing and r.metrics.get("diagnose/graph_breaks")]
        agg["sweep/jobs_with_graph_breaks"] = len(broken)
    if with_speedup:
        speedups = [r.speedup for r in with_speedup]
        agg[GEOMEAN_SPEEDUP] = geomean(speedups)  # type: ignore[arg-type]
        summary.geomean_jobs = len(speedups)
        if len(speedups) >= MIN_BOOTSTRAP_JOBS:
            intervals = [pooled_speedup([r])[1:] for r in with_speedup]
            low, high = bootstrap_geomean(speedups, intervals)  # type: ignore[arg-type]
            low_key, high_key = interval_of(GEOMEAN_SPEEDUP)  # type: ignore[misc]
            agg[low_key], agg[high_key] = low, high
        elif summary.suite is None:  # a suite's own line says it
            summary.notes.append(
                f"the geometric-mean speedup has no interval: {len(speedups)} passing compiled job(s), fewer than "
                f"{MIN_BOOTSTRAP_JOBS}: too few for a bootstrap to say how far their mean could be"
            )
        amp = [r.speedup for r in with_speedup if r.config.get("precision") in AMP_PRECISIONS]
        fp32 = [r.speedup for r in with_speedup if r.config.get("precision") in FP32_PRECISIONS]
        swept = {r.config.get("precision") for r in compiled}
        if amp and fp32:
            agg["sweep/weighted_speedup"] = 0.75 * geomean(amp) + 0.25 * geomean(fp32)  # type: ignore[arg-type]
        elif swept & {*AMP_PRECISIONS} and swept & {*FP32_PRECISIONS}:  # both asked for; one side has none
            summary.notes.append(
                "weighted speedup (0.75 AMP + 0.25 FP32) needs passing AMP and fp32 jobs with a paired eager baseline"
            )
    elif compiled:
        summary.notes.append("no passing compiled job with a paired eager baseline: no speedup aggregates")


def host_moved(rows: list[Row]) -> str:
    """How far the host's own CPU speed moved in the noisiest-hosted of these jobs (pipeline/measure/host.py),
    as a clause; empty when none of them ran the host check."""
    key = "host/reference_spread_pct"
    checked = [(r.metrics[key], r.name) for r in rows if key in r.metrics]
    if not checked:
        return ""
    spread, name = max(checked)
    return (
        f"; the host's own CPU speed moved up to {spread:.0f}% while they measured ({name}; host/reference_spread_pct, "
        "a torch-free workload timed before each round): where it moved as far as the steps spread, the host spread "
        "them, not the configuration"
    )


def measuring_note(rows: list[Row]) -> str | None:
    """How long the jobs measured and why they stopped (pipeline/measure/sequential.py), or None."""
    timed = [r for r in rows if "measure/seconds" in r.metrics]
    if not timed:
        return None
    seconds = sorted(r.metrics["measure/seconds"] for r in timed)
    open_ = [r for r in timed if not r.metrics.get("measure/decided")]
    # A paired job's direction (measure/answered; older runs lack it: undecided) may be known when its
    # interval is not yet as precise as benchmark.target_pct asks.
    undecided = [r for r in open_ if r.speedup is not None and not r.metrics.get("measure/answered")]
    imprecise = [r for r in open_ if r.speedup is None or r.metrics.get("measure/answered")]
    took = f"{seconds[0]:.1f} s" if len(seconds) == 1 else f"{seconds[0]:.1f}-{seconds[-1]:.1f} s"
    note = f"the jobs measured {took} of timed rounds each; {len(timed) - len(open_)} of {len(timed)} stopped decided"
    for rows, how in (
        (imprecise, "less precise than benchmark.target_pct"),
        (undecided, "with their speedup undecided"),
    ):
        if rows:
            names = first_few([r.name for r in rows])
            note += (
                f", {len(rows)} ran to their budget (benchmark.budget_s) or a fixed length {how} ({names})"
            )
    return note


def names_of(rows: list[Row]) -> str:
    """The first three rows' names, `a, b, c, ...` where there are more."""
    return ", ".join(r.name for r in rows[:3]) + (", ..." if len(rows) > 3 else "")


def _notes(summary: Summary) -> None:
    if measuring := measuring_note(summary.rows):
        summary.notes.append(measuring)
    noisy = [r for r in summary.rows if r.noisy]
    if noisy:
        summary.notes.append(
            f"{len(noisy)} job(s) flagged noisy (their measured steps spread beyond benchmark.noisy_spread_pct): "
            "the verdict allows for the host having slowed them (a noisy configuration may be as fast as its "
            "median's best end divided by p90 / p10 of its steps); compiled-vs-eager is judged on the paired speedup"
            + host_moved(noisy)
        )
    if follows := [r for r in summary.rows if r.metrics.get("step/host_bound")]:
        summary.notes.append(
            f"{len(follows)} compiled job(s) waited on the host while their eager copy waited on the device "
            f"(step/host_bound: {names_of(follows)}): their paired speedups hold for their own process's host "
            "speed, so the verdict widens each to speedup x p50/p90 .. x p50/p10 of its steps (docs/verdicts.md)"
        )
    if held_back := [r for r in summary.rows if r.metrics.get("step/above_latency")]:
        summary.notes.append(
            f"{len(held_back)} job(s) ran their calls back to back slower than one at a time (step/above_latency: "
            f"{names_of(held_back)}): the host held their queues back, so their step/* and throughput/* "
            "understate the device and the verdict never ranks them below another on those; latency/* stands "
            "(benchmarks/RESULTS.md)"
        )
    if summary.suite is not None:  # the rest is about ranking configurations, which a suite does not
        return
    shared = [r for r in summary.rows if r.crowded and not r.noisy]
    if shared:
        busiest = max(shared, key=lambda r: r.metrics["step/cpu_others_pct"])
        summary.notes.append(
            f"{len(shared)} quiet job(s) shared their CPUs with busy processes (step/cpu_others_pct over "
            f"{OTHERS_CPU_PCT:g}%; {busiest.name}: {busiest.metrics['step/cpu_others_pct']:.0f}%), which can slow "
            "every step of a job alike: the verdict allows for it as for a noisy job"
        )
    limit = summary.severe_slowdown
    worst = severe_job([c.estimate for c in summary.configurations], Rule(severe_slowdown=limit))
    if worst is not None and worst.contended_job is not None and not (worst.slowdown or 0.0) > limit:
        contended = sum(
            bool(r.metrics.get("step/cpu_contended")) for c in summary.configurations for r in c.rows
        )
        summary.notes.append(
            f"{contended} job(s) whose compute threads waited for a CPU over {CONTENDED_WAIT_PCT:g}% of the time "
            f"they wanted one ({worst.contended_job}: {worst.contended_wait_pct or 0:.0f}%): other processes held "
            "the cores, the threads waited on each other, and a whole job can run in such a stall looking quiet, "
            "so separate jobs' step times decide nothing; paired speedups still do. Rerun on a quiet host or with "
            "fewer threads than free cores (OMP_NUM_THREADS)"
        )
    elif worst is not None:
        severe = sum((r.slowdown or 0.0) > limit for c in summary.configurations for r in c.rows)
        summary.notes.append(
            f"{severe} job(s) whose slowest tenth of steps took over {limit:g}x as long as their fastest tenth "
            f"({worst.slowdown_job}: {worst.slowdown:.1f}x): the host ran this sweep's jobs in spells of very "
            "different speed, and a whole job can run in a slow one, so separate jobs' step times decide "
            "nothing; paired speedups still do. On a CPU, a job using every core beside other busy processes "
            "stalls like this: rerun on a quiet host or with fewer threads (OMP_NUM_THREADS)"
        )
    if summary.objective in (SAMPLES, TOKENS):
        summary.notes.append(
            f"jobs differ in the work per unit (batch size, sequence length): ranked by {summary.objective.label}, not by step time"
        )
    if len({(r.config.get("model"), r.config.get("loss")) for r in summary.rows if r.passing}) > 1:
        summary.notes.append(
            "the verdict ranks different models or losses against each other; compare within one model in the table"
        )
    summary.notes.extend(eager_disagreements(summary))


# The paired eager baseline's median, p10 and p90, by the objective's metric.
PAIRED_EAGER = {
    STEP_TIME.metric: ("eager/p50_ms", "eager/p10_ms", "eager/p90_ms"),
    LATENCY.metric: ("eager/latency_p50_ms", "eager/latency_p10_ms", "eager/latency_p90_ms"),
}


def eager_disagreements(summary: Summary) -> list[str]:
    """Notes where a separate eager job and a compiled job's paired eager baseline disagree beyond their
    noise (the host changed between jobs): the paired figure is the one to trust."""
    if summary.objective.metric not in PAIRED_EAGER:
        return []
    median, p10, p90 = PAIRED_EAGER[summary.objective.metric]
    low_key, high_key = interval_of(median)  # type: ignore[misc]
    by_name = {c.name: c for c in summary.configurations}
    notes = []
    for config in summary.configurations:
        eager_name = config.estimate.eager_name
        if eager_name is None or eager_name not in by_name:
            continue
        separate = by_name[eager_name].estimate
        for row in config.rows:
            m = row.metrics
            if median not in m:
                continue
            low = m.get(low_key, m.get(p10, m[median]))
            high = m.get(high_key, m.get(p90, m[median]))
            apart = abs(math.log(m[median] / separate.value)) > math.log1p(summary.min_effect_pct / 100)
            if apart and (high < separate.low or low > separate.high):
                notes.append(
                    f"the eager job {eager_name} reads {figure(separate.value)} ms, but {row.name}'s paired eager "
                    f"baseline reads {figure(m[median])} ms: they differ beyond their noise (the host changed between "
                    "jobs); compiled vs eager is judged on the paired speedup"
                )
    return notes
