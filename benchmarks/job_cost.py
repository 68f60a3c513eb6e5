"""Job cost with the sweep's template process against spawned workers: the same sweep twice, in one call.

    python benchmarks/job_cost.py [--jobs 4] [--out DIR] [-- extra overrides]

Each sweep is `--jobs` repeats of one configuration (default: CPU, vit_tiny, batch 2, 4 steps of which
2 warm-up, compile.mode=eager, measured for a fixed length), first with `benchmark.worker_start=spawn`, then with `template`, each
into its own sqlite store. Prints the median `job/wall_s` (the MLflow column `job_wall_s`: the job as
its parent saw it, from asking for the worker to the result logged) of each, the median import phase
of the workers, each sweep's wall time, and writes the figures as JSON under --out.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CPU_EAGER = [
    "device=cpu",
    "model=vit_tiny",
    "trainer.batch_size=2",
    "trainer.steps=4",
    "trainer.warmup_steps=2",
    "compile.mode=eager",
    "benchmark.budget_s=0",  # a fixed length: what is compared is the job's cost around its measurement
]
STARTS = ("spawn", "template")


@dataclass(frozen=True, kw_only=True)
class SweepCost:
    """One sweep's jobs as their results tell it."""

    worker_start: str
    command: str
    statuses: list[str]
    started_as: list[str]  # how each worker actually started (result info `worker_start`)
    job_wall_s: list[float]
    import_s: list[float]  # the worker's `imports` phase (timeline)
    sweep_wall_s: float

    @property
    def median_job_wall_s(self) -> float:
        return statistics.median(self.job_wall_s)


def run_sweep(worker_start: str, *, jobs: int, out: Path, extra: list[str]) -> SweepCost:
    sweep_dir = out / worker_start
    cmd = [sys.executable, "-m", "pipeline.run", "-m", *CPU_EAGER, *extra]
    cmd += [
        f"benchmark.repeat={','.join(str(i) for i in range(jobs))}",
        f"benchmark.worker_start={worker_start}",
        f"hydra.sweep.dir={sweep_dir}",
        f"mlflow.tracking_uri=sqlite:///{(out / f'{worker_start}.db').resolve()}",
    ]
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall_s = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(
            f"the {worker_start} sweep failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    results = [json.loads(p.read_text()) for p in sorted(sweep_dir.glob("*/result.json"))]
    return SweepCost(
        worker_start=worker_start,
        command=" ".join(cmd[1:]),
        statuses=[r["status"] for r in results],
        started_as=[r["info"].get("worker_start", "?") for r in results],
        job_wall_s=[r["metrics"]["job/wall_s"] for r in results],
        import_s=[r["info"]["timeline"].get("imports", float("nan")) for r in results],
        sweep_wall_s=wall_s,
    )


def torch_version() -> str:
    done = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True
    )
    return done.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=4, help="jobs per sweep")
    parser.add_argument(
        "--out", type=Path, default=None, help="where the sweeps and job_cost.json go (default: a temp dir)"
    )
    parser.add_argument("extra", nargs="*", help="more overrides for both sweeps")
    args = parser.parse_args()
    out = (args.out or Path(tempfile.mkdtemp(prefix="job-cost-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    sweeps = [run_sweep(start, jobs=args.jobs, out=out, extra=args.extra) for start in STARTS]
    for sweep in sweeps:
        print(
            f"{sweep.worker_start}: median job_wall_s {sweep.median_job_wall_s:.2f} s over {len(sweep.job_wall_s)} jobs "
            f"({', '.join(f'{s:.2f}' for s in sweep.job_wall_s)}), worker imports median {statistics.median(sweep.import_s):.2f} s, "
            f"sweep wall {sweep.sweep_wall_s:.1f} s, workers started as {','.join(sweep.started_as)}"
        )
    spawn, template = sweeps
    print(
        f"median job_wall_s: template {template.median_job_wall_s:.2f} s, spawn {spawn.median_job_wall_s:.2f} s "
        f"({spawn.median_job_wall_s / template.median_job_wall_s:.2f}x)"
    )
    meta = {
        "torch": torch_version(),
        "python": platform.python_version(),
        "host": platform.node(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    (out / "job_cost.json").write_text(
        json.dumps({"meta": meta, "sweeps": [asdict(s) for s in sweeps]}, indent=1)
    )
    print(f"figures: {out / 'job_cost.json'} (torch {meta['torch']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
