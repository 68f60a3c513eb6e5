"""Issue 42's GPU smoke (smoke42.sh): each job's figures by the old and the new code side by side.
Counts, FLOPs and flags must be equal; times and memory are printed with new/old to read against noise.

    python benchmarks/gpu/smoke42_table.py <out dir>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

EXACT = ("flops/per_step", "diagnose/", "parity/ok", "compile/cache")
TIMED = (
    "step/p50_ms",
    "latency/p50_ms",
    "speedup/vs_eager",
    "flops/mfu",
    "compile/total_s",
    "memory/peak_allocated_gib",
)


def metrics(path: Path) -> dict[str, float]:
    found = path / "result.json"
    return json.loads(found.read_text()).get("metrics", {}) if found.is_file() else {}


def main(out: Path) -> int:
    differ = 0
    for job in sorted(p.parent.name for p in (out / "new").glob("*/result.json")):
        new, old = metrics(out / "new" / job), metrics(out / "old" / job)
        print(
            f"== {job}: {len(new)} figures new, {len(old)} old; only new: {sorted(set(new) - set(old))[:8]}, "
            f"only old: {sorted(set(old) - set(new))[:8]}"
        )
        for name in sorted(set(new) & set(old)):
            a, b = new[name], old[name]
            if name.startswith(EXACT) and a != b:
                differ += 1
                print(f"   DIFFERS {name}: new {a:g} old {b:g}")
            elif name in TIMED:
                print(f"   {name}: new {a:.4g} old {b:.4g} (new/old {a / b if b else float('nan'):.3f})")
    probes = [out / tree / "probe.json" for tree in ("new", "old")]
    if all(p.is_file() for p in probes):
        new_rows, old_rows = (json.loads(p.read_text())["rows"] for p in probes)
        ratios = sorted(a["time_us"] / b["time_us"] for a, b in zip(new_rows, old_rows, strict=False))
        print(
            f"== comm probe: {len(new_rows)} rows new, {len(old_rows)} old; time new/old median "
            f"{ratios[len(ratios) // 2]:.3f} (min {ratios[0]:.3f}, max {ratios[-1]:.3f})"
        )
    print(f"exact figures that differ: {differ}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
