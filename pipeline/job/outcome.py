"""A job's result in words and as its run's payload (torch-free): the job's last line, its run's
description and the tags a user filters on, and the whole :class:`RunPayload` its run gets."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline.config.schema import Config, to_dict
from pipeline.diagnose.comm import comm_phrase
from pipeline.display import figure, unit_word, with_interval
from pipeline.job.result import JobResult
from pipeline.jobdir import JobDir
from pipeline.measure.objective import LATENCY, OBJECTIVES, SPEEDUP, STEP_P50, Work
from pipeline.measure.registry import estimate, headline
from pipeline.measure.stats import undetermined
from pipeline.provenance import PROJECT_ROOT
from pipeline.redaction import scrub, secret_values
from pipeline.status import FINISHED
from pipeline.tracking.payload import RunPayload, flatten


def one_line(name: str, result: JobResult, *, in_sweep: bool = False) -> str:
    """The job's last line: its result, rounded, or why it has none (why it is noisy: `note_line`). In a
    sweep the summary has the memory: the line leaves it out."""
    if result.status != FINISHED:
        return f"{name}: {failure(result)}"
    parts = result_phrases(result, memory=not in_sweep)
    if result.metrics.get("step/noisy"):
        parts.append(brief_noise(result))
    elif result.metrics.get("step/cpu_contended"):
        wait = result.metrics.get("step/cpu_wait_pct", float("nan"))
        parts.append(f"contended (its threads waited for a CPU {wait:.0f}% of the time)")
    return f"{name}: FINISHED: " + ", ".join(parts)


def noise(result: JobResult) -> tuple[str, str]:
    """A finished job's figures that are `noisy` or `contended`, and why they are not to be trusted to
    a few percent and what to do instead; ('', '') when quiet."""
    m = result.metrics
    kind = "noisy" if m.get("step/noisy") else "contended" if m.get("step/cpu_contended") else ""
    if result.status != FINISHED or not kind:
        return "", ""
    note = str(result.info.get("measurement_note") or brief_noise(result))
    return kind, note.removeprefix("noisy: ").removeprefix("contended: ")


def failure(result: JobResult) -> str:
    assert result.error is not None
    return f"{result.status}: {result.error.type}: {result.error.message}"


def result_unit(result: JobResult) -> str:
    work = Work.from_dict(result.work)
    return unit_word(work.unit if work is not None else None)


def result_phrases(result: JobResult, *, memory: bool = True) -> list[str]:
    """The job's figures in its own unit, rounded to what their intervals support (`step 12.3 ms (p50)`,
    `call latency 0.70 ms (p50, p99 0.95 ms)`, ...), then compile time, the speedup over eager with its
    95% interval, peak memory (`memory`), communication and graph breaks."""
    m = result.metrics
    word, lead = result_unit(result), headline(m)
    if lead == LATENCY.metric:  # synchronized calls: the latency one request sees
        tail = f", p99 {ms(m['latency/p99_ms'])}" if "latency/p99_ms" in m else ""
        parts = [f"{word} latency {ms(*estimate(m, lead))} (p50{tail})"]
        if "throughput/samples_per_s" in m:
            parts.append(f"{figure(m['throughput/samples_per_s'])} samples/s back to back")
            if m.get("step/above_latency"):  # the queue ran slower than single calls: the host's doing
                parts[-1] += " (held back by the host: slower than calls alone, step/above_latency)"
    else:
        parts = [f"{word} {ms(*estimate(m, STEP_P50))} (p50)"]
    if "generate/ttft_p50_ms" in m:  # a generation: its rate and its first token
        if "throughput/tokens_per_s" in m:
            parts.append(f"{figure(m['throughput/tokens_per_s'])} tokens/s")
        parts.append(f"first token {ms(m['generate/ttft_p50_ms'])}")
    if "compile/total_s" in m:
        parts.append(f"compile {figure(m['compile/total_s'])} s")
    if "speedup/vs_eager" in m:
        parts.append(speedup_text(m))
    if result.info.get("measure_brief"):  # how long it measured and why it stopped
        parts.append(str(result.info["measure_brief"]))
    if memory and "memory/peak_reserved_gib" in m:
        parts.append(
            f"peak {figure(m['memory/peak_reserved_gib'])} GiB reserved "
            f"({figure(m['memory/peak_allocated_gib'])} allocated)"
        )
        if "memory/rank_peak_allocated_max_gib" in m:  # rank 0's above; a distributed job's largest rank
            parts[-1] += f", the largest rank {figure(m['memory/rank_peak_allocated_max_gib'])} GiB allocated"
    elif memory and "memory/cpu_rss_peak_gib" in m:
        parts.append(f"peak RSS {figure(m['memory/cpu_rss_peak_gib'])} GiB")
    if said := comm_phrase(m):  # a distributed job: what it lost to communication
        parts.append(said)
    if m.get("diagnose/graph_breaks"):
        count = int(m["diagnose/graph_breaks"])
        note = f"{count} graph break{'s' * (count != 1)}"
        if memory and (breaks := result.diagnostics.get("graph_breaks")):
            where = breaks[0]["location"].removeprefix(str(PROJECT_ROOT) + "/")
            note += f" (e.g. {where}: {breaks[0]['reason'][:80]}; all in diagnostics.json)"
        parts.append(note + ", compile.fullgraph=false let them through" if memory else note)
    return parts


def speedup_text(m: Mapping[str, float], times: str = "x vs eager") -> str:
    """`1.13x vs eager [1.02, 1.25]`, or `[undetermined]` for an interval too wide to say anything."""
    shown, _, interval = rounded(m, SPEEDUP).partition(" ")
    return f"{shown}{times} {interval}" if interval else f"{shown}{times}"


def rounded(metrics: Mapping[str, float], metric: str) -> str:
    """`184 [101, 259]`: the figure rounded to what its 95% interval supports, with the interval where
    it has one (a rate's: its latency's interval turned over)."""
    value, low, high = estimate(metrics, metric)
    if low is None and metric in OBJECTIVES and OBJECTIVES[metric].inverse_of in metrics:
        _, low, high = OBJECTIVES[metric].estimate(metrics)
    if low is None:
        return figure(value)
    return with_interval(value, low, high, undetermined=undetermined(low, high))


def ms(value: float, low: float | None = None, high: float | None = None) -> str:
    """Milliseconds rounded to what their interval supports (at most 4 significant digits)."""
    return f"{figure(value, low, high)} ms"


def brief_noise(result: JobResult) -> str:
    return f"noisy (p10-p90 spans {result.metrics.get('step/spread_pct', float('nan')):.0f}% of the median)"


def run_description(result: JobResult) -> str:
    """The run's description (markdown): its own result in one paragraph, then the method as a list."""
    if result.status == FINISHED:
        lead = f"**{FINISHED}**: " + ", ".join(result_phrases(result)) + "."
        kind, why = noise(result)
        if kind:
            lead += f" **{kind.capitalize()}**: {why}."
    else:
        lead = f"**{failure(result)}**"
    method = "\n".join(f"- {line}" for line in result.method.splitlines() if line.strip())
    return "\n\n".join([lead, "**How it was measured**", method]) if method else lead


def outcome_tags(result: JobResult) -> dict[str, str]:
    """The tags beyond the identity tags: verdict flags, torch and device, the work, figures, the error."""
    env = result.environment
    named = {
        "torch": env.get("torch"),
        "device": env.get("device") and (env.get("gpu_name") or env["device"]),
        "noisy": "true" if result.metrics.get("step/noisy") else None,
        "worker_start": result.info.get("worker_start"),  # template or spawn: how the worker started
    }
    tags = {key: str(value) for key, value in named.items() if value}
    work = Work.from_dict(result.work)
    if work is not None:  # what a unit did and what it is judged on: the summary and the view read these
        tags.update(work.tags())
    if result.status == FINISHED:
        tags.update(shown_tags(result.metrics, result_unit(result)))
    if result.error:
        tags["error_type"], tags["error_message"] = result.error.type, result.error.message
    return tags


# The figures as tags, rounded (MLflow shows a metric's every digit), in the job's own words, with their
# 95% interval where they have one: the sweep's view shows these columns (pipeline/sweep/view.py).
SHOWN = {
    "step/p50_ms": "{unit} p50 ms",
    "latency/p50_ms": "latency p50 ms",
    "latency/p99_ms": "latency p99 ms",
    "throughput/samples_per_s": "samples/s",
    "throughput/tokens_per_s": "tokens/s",
    "generate/ttft_p50_ms": "first token p50 ms",
    "speedup/vs_eager": "speedup vs eager",
    "compile/total_s": "compile s",
    "memory/peak_reserved_gib": "peak reserved GiB",
    "memory/cpu_rss_peak_gib": "peak RSS GiB",
}


def shown_key(metric: str, unit: str = "step", metrics: Mapping[str, float] | None = None) -> str | None:
    """The tag that shows `metric` rounded (`step p50 ms`, `latency p99 ms`), in the words of `unit`;
    None for a metric shown only as itself."""
    if metric == STEP_P50 and metrics is not None and headline(metrics) not in (STEP_P50, None):
        return f"back-to-back {unit} p50 ms"  # a call's latency is the figure: these are the other one
    return SHOWN[metric].format(unit=unit) if metric in SHOWN else None


def shown_tags(metrics: Mapping[str, float], unit: str = "step") -> dict[str, str]:
    """`{"step p50 ms": "184 [101, 259]", "speedup vs eager": "1.13x [undetermined]", "compile s":
    "64.7", ...}`: each figure the job has, rounded to what its interval supports."""
    tags = {}
    for metric in SHOWN:
        if metric in metrics:
            text = speedup_text(metrics, "x") if metric == SPEEDUP else rounded(metrics, metric)
            tags[shown_key(metric, unit, metrics)] = text  # type: ignore[index]
    return tags


def run_payload(cfg: Config, result: JobResult, job_dir: Path) -> RunPayload:
    """Everything the job's run gets (params, figures, curves, tags, artifacts, status), secrets masked."""
    secrets = secret_values(to_dict(cfg))
    tags = {**outcome_tags(result), "mlflow.note.content": scrub(run_description(result), secrets)}
    if result.error:
        tags["error_message"] = scrub(result.error.message, secrets)
    folder = JobDir(job_dir)
    return RunPayload(
        params=flatten(applicable(cfg)),
        metrics=dict(result.metrics),
        series=series_points(cfg, result),
        tags=tags,
        status=result.status,
        failed=result.error is not None,
        files=folder.artifacts(),
        folders=folder.artifact_folders(),
        secrets=secrets,
    )


def applicable(cfg: Config) -> dict[str, Any]:
    """The config as the job's run's params: only the keys that apply to this job (e.g. no optimizer for
    a scenario that does not train, no compile settings but the mode for an eager job), the scenario's
    nulls filled in as it runs them; the sweep's settings are its parent run's."""
    resolved = cfg.scenario.resolved(cfg)
    data = to_dict(dataclasses.replace(cfg, scenario=resolved))
    spec, inputs = cfg.model.input, data["model"]["input"]
    data["model"].pop("batch_size", None)
    drop(inputs, ("vocab_size", "seq_len") if spec.kind == "image" else ("channels", "height", "width"))
    if spec.kind != "image" and spec.target != "class":
        inputs.pop("num_classes", None)
    if not cfg.scenario.trains:
        data.pop("loss", None)
        data["trainer"].pop("optimizer", None)
        data["compile"].pop("optimizer", None)
        data["benchmark"].pop("parity_steps", None)
        drop(data["precision"], ("grad_scaler", "float8"))  # no loss to scale, no float8 training
    elif cfg.loss.teacher is None:
        drop(data["loss"], ("kind", "temperature", "alpha", "teacher"))
    elif cfg.loss.kind != "kl":
        drop(data["loss"], ("temperature", "alpha"))
    if getattr(resolved, "batch_size", None) is not None:
        data["trainer"].pop("batch_size", None)  # the scenario's batch is the one used
    if not cfg.compile.compiled:
        data["compile"] = {"mode": cfg.compile.mode}
    elif cfg.compile.backend != "inductor":
        data["compile"].pop("options", None)
    if cfg.compile.backend != "inductor" or not cfg.compile.compiled:
        drop(data["diagnose"], ("cache_dir", "cold_cache"))
    strategy = cfg.parallel.strategy
    if strategy == "none":
        data["parallel"] = {"strategy": strategy}
    elif strategy == "ddp":
        drop(data["parallel"], ("reshard_after_forward", "param_dtype", "reduce_dtype"))
    else:
        drop(data["parallel"], ("bucket_cap_mb", "optimize_ddp"))
    drop(data["data"], ("num_batches",) if cfg.data.loader else ("num_workers", "pin_memory", "non_blocking"))
    if not cfg.paired:
        drop(data["benchmark"], ("loss_rtol", "parity_steps"))
    data.pop("sweep", None)
    return data


def drop(section: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        section.pop(key, None)


def series_points(cfg: Config, result: JobResult) -> dict[str, list[tuple[int, float]]]:
    """Per-unit curves: losses from step 0, step times from the first measured step (= warm-up steps).
    NaN points were not measured and are left out, but for a loss: a NaN loss says training diverged."""
    points: dict[str, list[tuple[int, float]]] = {}
    for name, values in result.series.items():
        offset = cfg.trainer.warmup_steps if name.endswith("step_ms") else 0
        points[name] = [(offset + i, v) for i, v in enumerate(values) if name.endswith("loss") or v == v]
    return points
