"""Gather job results of sweeps under outputs/ into one JSON and print a compact table (GPU runs)."""

import glob
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the raw results' names
from old_names import with_old_names

KEYS = [
    "step_time_ms_p50",
    "step_time_ms_mean",
    "step_time_ms_p10",
    "step_time_ms_p90",
    "compile_time_s",
    "torch_compile_time_s",
    "peak_mem_allocated_gib",
    "peak_mem_reserved_gib",
    "job_peak_mem_allocated_gib",
    "speedup_vs_eager",
    "speedup_vs_eager_round_min",
    "speedup_vs_eager_round_max",
    "memory_ratio_vs_eager",
    "loss_divergence_max_rel",
    "graph_breaks",
    "recompiles_after_warmup",
]


def main(out: str, roots: list[str]) -> None:
    rows = []
    for root in roots:
        for path in sorted(glob.glob(f"{root}/**/result.json", recursive=True)):
            r = with_old_names(json.loads(Path(path).read_text()), keys=("metrics",))
            cfg_path = Path(path).parent / "job_config.json"
            cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
            ident = {
                "model": cfg.get("model", {}).get("id"),
                "precision": cfg.get("precision", {}).get("id"),
                "mode": cfg.get("compile", {}).get("mode"),
                "scope": cfg.get("compile", {}).get("scope"),
                "loader": cfg.get("data", {}).get("loader"),
                "loss": cfg.get("loss", {}).get("id"),
            }
            rows.append(
                {
                    "path": path,
                    **ident,
                    "status": r["status"],
                    "error": r.get("error"),
                    "metrics": r["metrics"],
                    "info": r.get("info"),
                    "environment": r.get("environment"),
                    "diagnostics": r.get("diagnostics"),
                }
            )
    Path(out).write_text(json.dumps(rows, indent=1))
    for row in rows:
        m = row["metrics"]
        cells = " ".join(f"{k.replace('step_time_ms_', '')}={m[k]:.3f}" for k in KEYS if k in m)
        err = f" ERROR {row['error']['type']}: {row['error']['message'][:200]}" if row["error"] else ""
        print(
            f"{row['model']} {row['loss']} {row['precision']} {row['mode']} scope={row['scope']} loader={row['loader']} {row['status']} {cells}{err}"
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
