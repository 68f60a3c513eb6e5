"""A job's result in words and as its run's payload, from its result file (torch-free): the last line
the job prints, the description its MLflow run opens with (the same figures, then how they were
measured), the few tags a user filters on, and the whole :class:`RunPayload` its run gets. Everything
else the worker knows goes to `run_info.json` beside the result.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.config.schema import Config, to_dict
from pipeline.job.result import JobResult
from pipeline.jobdir import JobDir
from pipeline.measure.objective import Work
from pipeline.provenance import PROJECT_ROOT
from pipeline.redaction import scrub, secret_values
from pipeline.status import FINISHED
from pipeline.tracking.payload import RunPayload, flatten


def one_line(name: str, result: JobResult, *, in_sweep: bool = False) -> str:
    """The job's last line: its result, or why it has none. In a sweep a noisy job says so briefly
    (the sweep's summary explains it once); a single job says why."""
    if result.status != FINISHED:
        return f"{name}: {failure(result)}"
    parts = result_phrases(result)
    if result.metrics.get("step/noisy"):
        parts.append(brief_noise(result) if in_sweep else f"noisy: {noise_detail(result)}")
    return f"{name}: FINISHED: " + ", ".join(parts)


def failure(result: JobResult) -> str:
    assert result.error is not None
    return f"{result.status}: {result.error.type}: {result.error.message}"


def result_phrases(result: JobResult) -> list[str]:
    """`step 12.34 ms (p50)`, `compile 41.2 s`, `1.31x vs eager`, peak memory, graph breaks."""
    m = result.metrics
    parts = [f"step {m['step/p50_ms']:.2f} ms (p50)"]
    if "compile/total_s" in m:
        parts.append(f"compile {m['compile/total_s']:.1f} s")
    if "speedup/vs_eager" in m:
        parts.append(f"{m['speedup/vs_eager']:.2f}x vs eager")
    if "memory/peak_reserved_gib" in m:
        parts.append(
            f"peak {m['memory/peak_reserved_gib']:.2f} GiB reserved ({m['memory/peak_allocated_gib']:.2f} allocated)"
        )
    elif "memory/cpu_rss_peak_gib" in m:
        parts.append(f"peak RSS {m['memory/cpu_rss_peak_gib']:.2f} GiB")
    if m.get("diagnose/graph_breaks"):
        breaks = result.diagnostics.get("graph_breaks") or []
        parts.append(graph_break_note(int(m["diagnose/graph_breaks"]), breaks))
    return parts


def brief_noise(result: JobResult) -> str:
    return f"noisy (p10-p90 spans {result.metrics.get('step/spread_pct', float('nan')):.0f}% of the median)"


def noise_detail(result: JobResult) -> str:
    """Why the step times are not to be trusted to a few percent, and what to do instead."""
    note = str(result.info.get("measurement_note") or brief_noise(result))
    return note.removeprefix("noisy: ")


def graph_break_note(count: int, breaks: list[dict[str, str]]) -> str:
    """`3 graph breaks (e.g. models/x.py:31: Unsupported Tensor.item() call ...; all in diagnostics.json), compile.fullgraph=false let them through`."""
    note = f"{count} graph break{'s' if count != 1 else ''}"
    if breaks:
        where = breaks[0]["location"]
        if where.startswith(str(PROJECT_ROOT) + "/"):
            where = where[len(str(PROJECT_ROOT)) + 1 :]
        note += f" (e.g. {where}: {breaks[0]['reason'][:80]}; all in diagnostics.json)"
    return note + ", compile.fullgraph=false let them through"


def run_description(result: JobResult) -> str:
    """The run's description (markdown): its own result in one paragraph, then the method as a list."""
    if result.status == FINISHED:
        lead = f"**{FINISHED}**: " + ", ".join(result_phrases(result)) + "."
        if result.metrics.get("step/noisy"):
            lead += f" **Noisy**: {noise_detail(result)}."
    else:
        lead = f"**{failure(result)}**"
    method = [f"- {line}" for line in result.method.splitlines() if line.strip()]
    if not method:
        return lead
    return "\n\n".join([lead, "**How it was measured**", "\n".join(method)])


def outcome_tags(result: JobResult) -> dict[str, str]:
    """Beyond the identity tags: the verdict flags, the two environment facts people filter on, and
    the error of a job that failed."""
    tags: dict[str, str] = {}
    env = result.environment
    if env.get("torch"):
        tags["torch"] = str(env["torch"])
    if env.get("device"):
        tags["device"] = str(env.get("gpu_name") or env["device"])
    if result.metrics.get("step/noisy"):
        tags["noisy"] = "true"
    if result.info.get("worker_start"):
        tags["worker_start"] = str(result.info["worker_start"])  # template or spawn: how the worker started
    work = Work.from_dict(result.work)
    if work is not None:  # what a unit did and what it is judged on: the summary and the view read these
        tags.update(work.tags())
    if result.error:
        tags["error_type"], tags["error_message"] = result.error.type, result.error.message
    return tags


def run_payload(cfg: Config, result: JobResult, job_dir: Path) -> RunPayload:
    """Everything the job's run gets: the config as params, the figures and curves, the tags, the
    description, the job folder's artifacts, and its status; secrets masked everywhere."""
    secrets = secret_values(to_dict(cfg))
    tags = {**outcome_tags(result), "mlflow.note.content": scrub(run_description(result), secrets)}
    if result.error:
        tags["error_message"] = scrub(result.error.message, secrets)
    folder = JobDir(job_dir)
    return RunPayload(
        params=flatten(to_dict(cfg)),
        metrics=dict(result.metrics),
        series=series_points(cfg, result),
        tags=tags,
        status=result.status,
        failed=result.error is not None,
        files=folder.artifacts(),
        folders=folder.artifact_folders(),
        secrets=secrets,
    )


def series_points(cfg: Config, result: JobResult) -> dict[str, list[tuple[int, float]]]:
    """Per-unit curves keyed by unit: losses from step 0, step times from the first measured step
    (= warm-up steps)."""
    warmup = cfg.trainer.warmup_steps
    points: dict[str, list[tuple[int, float]]] = {}
    for name, values in result.series.items():
        offset = warmup if name.endswith("step_ms") else 0
        points[name] = [(offset + i, v) for i, v in enumerate(values) if v == v]  # NaN-free
    return points
