"""A sweep's summary: one row per configuration (the latest run of each), the aggregates, and the
fastest passing configuration. Read from MLflow's records or from job folders; torch-free.

Aggregates: the geometric-mean speedup over passing compiled jobs (passing = FINISHED and loss parity
within tolerance where it was measured), the pass rate, the PyTorch 2.0 launch's weighted speedup
0.75 * geomean(AMP) + 0.25 * geomean(FP32), and the fastest passing configuration.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.config.schema import from_dict
from pipeline.identity import TABLE_KEYS, config_hash, identity, run_name
from pipeline.status import FINISHED
from pipeline.tracking import RunRecord

AMP_PRECISIONS = ("amp", "amp_fp16")
FP32_PRECISIONS = ("fp32",)


@dataclass(kw_only=True)
class Row:
    """One job of a sweep."""

    name: str
    status: str
    config: dict[str, str]  # the identity keys (pipeline.identity)
    metrics: dict[str, float]
    error: str = ""
    config_hash: str = ""
    start_time: int = 0  # ms since the epoch

    @property
    def compiled(self) -> bool:
        return self.config.get("mode") not in (None, "eager")

    @property
    def speedup(self) -> float | None:
        return self.metrics.get("speedup/vs_eager")

    @property
    def parity(self) -> float | None:
        return self.metrics.get("parity/ok")

    @property
    def passing(self) -> bool:
        return self.status == FINISHED and self.parity != 0.0

    @property
    def peak_gib(self) -> float | None:
        return self.metrics.get("memory/peak_reserved_gib")


@dataclass(kw_only=True)
class Summary:
    sweep_id: str
    rows: list[Row]
    aggregates: dict[str, float] = field(default_factory=dict)
    fastest: Row | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if r.status != FINISHED]


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def row_from_run(run: RunRecord) -> Row:
    tags = run.tags
    error = f"{tags['error_type']}: {tags.get('error_message', '')}" if "error_type" in tags else ""
    return Row(
        name=run.name,
        status=run.status,
        config={k: tags[k] for k in TABLE_KEYS if k in tags},
        metrics=dict(run.metrics),
        error=error,
        config_hash=tags.get("config_hash", ""),
        start_time=run.start_time_ms,
    )


def row_from_result(path: Path) -> Row | None:
    """A job from its folder (result.json + job_config.json), for summaries without MLflow."""
    try:
        result = json.loads(path.read_text())
        cfg = from_dict(json.loads((path.parent / "job_config.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None
    error = result.get("error") or {}
    started = int(1000 * (result.get("info", {}).get("worker_started_at") or path.stat().st_mtime))
    return Row(
        name=run_name(cfg),
        status=result["status"],
        config={k: v for k, v in identity(cfg).items() if k in TABLE_KEYS},
        metrics=result.get("metrics", {}),
        error=f"{error['type']}: {error['message']}" if error else "",
        config_hash=config_hash(cfg),
        start_time=started,
    )


def latest_per_config(rows: list[Row]) -> list[Row]:
    """A resumed sweep may hold a failed and a finished run of one config: keep the latest of each."""
    latest: dict[str, Row] = {}
    for row in sorted(rows, key=lambda r: r.start_time):
        latest[row.config_hash or row.name] = row
    return sorted(latest.values(), key=lambda r: r.start_time)


def summarize(sweep_id: str, rows: list[Row]) -> Summary:
    summary = Summary(sweep_id=sweep_id, rows=latest_per_config(rows))
    compiled = [r for r in summary.rows if r.compiled]
    passing = [r for r in compiled if r.passing and r.speedup]
    agg = summary.aggregates
    agg["jobs"] = len(summary.rows)
    agg["jobs_failed"] = len(summary.failures)
    if compiled:
        agg["sweep/pass_rate"] = sum(r.passing for r in compiled) / len(compiled)
    if passing:
        agg["sweep/geomean_speedup"] = geomean([r.speedup for r in passing])  # type: ignore[misc]
        amp = [r.speedup for r in passing if r.config.get("precision") in AMP_PRECISIONS]
        fp32 = [r.speedup for r in passing if r.config.get("precision") in FP32_PRECISIONS]
        if amp and fp32:
            agg["sweep/weighted_speedup"] = 0.75 * geomean(amp) + 0.25 * geomean(fp32)  # type: ignore[arg-type]
        else:
            summary.notes.append(
                "weighted speedup (0.75 AMP + 0.25 FP32) needs passing AMP and fp32 jobs with a paired eager baseline"
            )
    elif compiled:
        summary.notes.append("no passing compiled job with a paired eager baseline: no speedup aggregates")
    finished = [r for r in summary.rows if r.passing and "step/p50_ms" in r.metrics]
    if finished:
        summary.fastest = min(finished, key=lambda r: r.metrics["step/p50_ms"])
        if len({(r.config.get("model"), r.config.get("loss")) for r in finished}) > 1:
            summary.notes.append(
                "the fastest configuration is taken across different models or losses; compare within one model in the table"
            )
    noisy = sum(1 for r in summary.rows if r.metrics.get("step/noisy"))
    if noisy:
        summary.notes.append(
            f"{noisy} job(s) flagged noisy (their measured steps spread beyond benchmark.noisy_spread_pct): "
            "trust their paired speedups more than their step times, or rerun them"
        )
    return summary
