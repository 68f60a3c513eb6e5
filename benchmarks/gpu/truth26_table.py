"""The tables of issue 26's GPU campaign (benchmarks/gpu/truth26.sh), from its output folder:
pipeline against the project's bare loop, the DataLoader path against seed 000's loop, batch-1 latency
against a plain per-call synchronized loop. Markdown on stdout.

    python benchmarks/gpu/truth26_table.py <out dir>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def last_json(path: Path) -> dict:
    try:
        lines = [line for line in path.read_text().splitlines() if line.startswith("{")]
        return json.loads(lines[-1]) if lines else {}
    except OSError:
        return {}


def result(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main(out: Path) -> None:
    rows = []
    for bare_log in sorted(out.glob("bare-*.log")):
        name = bare_log.stem.removeprefix("bare-")
        bare, job = last_json(bare_log), result(out / f"pipe-{name}" / "result.json")
        m = job.get("metrics", {})
        p50, bare_p50 = m.get("step/p50_ms"), bare.get("step_time_ms_p50")
        rows.append(
            f"| {name} | {bare.get('batch_size', '-')} | {fmt(bare_p50)} | {fmt(bare.get('step_time_ms_mean'))} | "
            f"{fmt(bare.get('host_ms_p50'))} | {fmt(p50)} | {fmt(p50 / bare_p50 if p50 and bare_p50 else None, 3)} | "
            f"{fmt(m.get('step/spread_pct'), 1)} | {'yes' if m.get('step/noisy') else 'no'} | {fmt(m.get('eager/p50_ms'))} | "
            f"{fmt(m.get('speedup/vs_eager'))} [{fmt(m.get('speedup/ci95_low'))}, {fmt(m.get('speedup/ci95_high'))}] | "
            f"{fmt(m.get('compile/total_s'), 1)} | {job.get('status', 'missing')} |"
        )
    if rows:
        print(
            "| model | batch | bare p50 ms | bare mean ms | bare host ms/step | pipeline p50 ms | pipeline / bare | spread % | noisy | paired eager p50 ms | speedup [95%] | compile s | status |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(rows), "\n")
    seed, loader = (
        last_json(out / "seed-loop.log"),
        result(out / "loader-pipe" / "result.json").get("metrics", {}),
    )
    if loader:
        seed_ms = seed.get("step_time_ms_mean")
        print(
            "| DataLoader-fed ViT-B/16 amp eager | seed 000's loop mean ms | pipeline p50 ms | pipeline mean ms | pipeline / seed (p50) | spread % |"
        )
        print("|---|---|---|---|---|---|")
        ratio = loader.get("step/p50_ms") / seed_ms if seed_ms else None
        print(
            f"| data.loader=true | {fmt(seed_ms)} | {fmt(loader.get('step/p50_ms'))} | {fmt(loader.get('step/mean_ms'))} | {fmt(ratio, 3)} | {fmt(loader.get('step/spread_pct'), 1)} |\n"
        )
    lat = []
    for job_dir in sorted(p for p in out.glob("lat-*") if p.is_dir()):
        m = result(job_dir / "result.json").get("metrics", {})
        loop = last_json(out / f"loop-{job_dir.name.removeprefix('lat-')}.log")
        ref = loop.get("latency_ms_p50")
        ratio = m.get("latency/p50_ms") / ref if ref and m.get("latency/p50_ms") else None
        lat.append(
            f"| {job_dir.name.removeprefix('lat-')} | {fmt(ref, 3)} | {fmt(loop.get('latency_ms_mean'), 3)} | {fmt(m.get('latency/p50_ms'), 3)} | "
            f"{fmt(ratio, 3)} | {fmt(m.get('latency/p99_ms'), 3)} | {fmt(m.get('step/p50_ms'), 3)} | {fmt(m.get('throughput/samples_per_s'), 0)} | "
            f"{fmt(m.get('speedup/vs_eager'))} | {fmt(m.get('speedup/back_to_back_vs_eager'))} |"
        )
    if lat:
        print(
            "| batch 1 inference | plain loop p50 ms | plain loop mean ms | pipeline latency/p50 ms | pipeline / plain | latency p99 ms | back-to-back p50 ms | samples/s | speedup (latency) | speedup (back to back) |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(lat))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
