"""The best finished trial of a throughput search, as the overrides Hydra gave it (one line).

Reads the job folders under a sweep's folder (each job's result.json and Hydra's
.hydra/overrides.yaml), so it works on a search that was cut short before Optuna wrote
optimization_results.yaml. Exit 1 when no trial finished.

    python benchmarks/gpu/best_trial.py <sweep dir> [metric] [--dir]

With --dir it prints the best trial's job folder instead (its inductor cache, its files).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml


def overrides_of(job_dir: Path, sweep_dir: Path) -> list[str]:
    """Hydra's overrides for the job whose folder holds this result (its own or an ancestor's)."""
    for folder in (job_dir, *job_dir.parents):
        path = folder / ".hydra" / "overrides.yaml"
        if path.exists():
            return [str(o) for o in yaml.safe_load(path.read_text()) or []]
        if folder == sweep_dir:
            break
    raise FileNotFoundError(f"no .hydra/overrides.yaml above {job_dir}")


def best(sweep_dir: Path, metric: str) -> tuple[float, list[str], Path] | None:
    found = []
    for path in sweep_dir.rglob("result.json"):
        result = json.loads(path.read_text())
        value = (result.get("metrics") or {}).get(metric)
        if result.get("status") == "FINISHED" and isinstance(value, (int, float)):
            found.append((float(value), overrides_of(path.parent, sweep_dir), path.parent))
    return max(found, key=lambda f: f[0]) if found else None


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--dir"]
    sweep_dir = Path(args[0]).resolve()
    metric = args[1] if len(args) > 1 else "throughput/samples_per_s"
    found = best(sweep_dir, metric)
    if found is None:
        print(f"no finished trial with {metric} under {sweep_dir}", file=sys.stderr)
        return 1
    if "--dir" in sys.argv:
        print(found[2])
        return 0
    keep = ("compile.", "trainer.batch_size", "trainer.optimizer.", "precision", "inductor")
    print(" ".join(o for o in found[1] if o.startswith(keep)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
