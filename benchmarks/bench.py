"""`make bench`: benchmark the instrument itself on a GPU host, then write benchmarks/RESULTS.md.

    python benchmarks/bench.py --sections overhead,cache,fastest,search --out benchmarks/results/<host-date>
    python benchmarks/bench.py --report benchmarks/results/<host-date> [more dirs]   # RESULTS.md from raw JSON

Sections (each writes <section>.json with every raw figure into --out):
  overhead  pipeline vs the bare loop (benchmarks/bare_loop.py) on identical on-device data, ViT-B/16
            bs64, eager and compile mode default, alternating bare/pipeline, `--reps` times per
            precision (default amp 3 times, fp32 once; target: pipeline mean / bare mean <= 1.01). The
            same runs give stability (coefficient of variation of the pipeline's median over the
            repeats, target <= 1%) and job cost (job wall time minus compile time and measured steps,
            broken into phases; target <= 5 s, judged on the amp jobs).
  cache     cold vs warm compile time, ViT-B/16 default and max-autotune-no-cudagraphs: a two-job sweep
            sharing the sweep's inductor cache; job 0 starts cold, job 1 warm (target: warm >= 3x faster).
  fastest   a sweep over mode x optimizer (plain, fused, compiled) x scope x data path for ViT-B/16 bs64
            amp, and the article's seed loop (benchmarks/seed_loop.py, DataLoader-fed, eager amp) in the
            same call (target: best step <= 0.67x the seed loop's).
  search    Hydra's Optuna sweeper over the compile knobs (sweep=compile_search).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from old_names import with_old_names  # noqa: E402  (benchmarks/, this script's folder)

VIT = ["model=vit_b16", "precision=amp", "trainer.batch_size=64"]
GPUS = 1  # on a host with several GPUs every job goes through the machine-wide GPU pool
POOL = "all"  # which GPUs of the pool this benchmark may use (--gpu-pool)
SHARED_CACHE = "shared_inductor_cache"


def run(
    cmd: list[str], env: dict[str, str] | None = None, timeout: float = 1800
) -> subprocess.CompletedProcess:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


def run_on_a_gpu(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """A script outside the pipeline (bare loop, seed loop), on a GPU of the machine-wide pool."""
    from pipeline.job.gpu_pool import gpu_slot, pool_lock_dir

    with gpu_slot(json.loads(POOL) if POOL.startswith("[") else POOL, pool_lock_dir()) as gpu:
        return run(cmd, env={**(env or {}), **gpu})


def last_json(proc: subprocess.CompletedProcess) -> dict[str, Any]:
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(
        f"no JSON result (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    )


def pipeline(args: list[str], out: Path, name: str, multirun: bool = False) -> list[dict[str, Any]]:
    """A real `python -m pipeline.run` job (or sweep) into out/<name>; its result files."""
    job_dir = out / name
    if GPUS > 1:  # one GPU per job, shared with whatever else runs on this host
        args = (
            [*args, "hydra/launcher=local_gpus", f"gpu_pool={POOL}"]
            if multirun
            else [*args, f"gpu_pool={POOL}"]
        )
    cmd = [
        sys.executable,
        "-m",
        "pipeline.run",
        *(["-m"] if multirun else []),
        *args,
        f"mlflow.tracking_uri=sqlite:///{(out / 'mlflow.db').resolve()}",
        f"hydra.run.dir={job_dir}",
        f"hydra.sweep.dir={job_dir}",
    ]
    proc = run(cmd)
    (out / f"{name}.log").write_text(proc.stdout[-20000:] + proc.stderr[-20000:])
    results = []
    for path in sorted(job_dir.glob("**/result.json"), key=lambda p: p.stat().st_mtime):
        data = with_old_names(json.loads(path.read_text()))
        data["config"] = json.loads((path.parent / "job_config.json").read_text())
        results.append(data)
    print(
        f"  {name}: {[(r['status'], round(r['metrics'].get('step_time_ms_p50', 0), 3)) for r in results]}",
        flush=True,
    )
    return results


def save(out: Path, section: str, data: dict[str, Any]) -> None:
    (out / f"{section}.json").write_text(json.dumps(data, indent=1, default=str))


def slim(result: dict[str, Any]) -> dict[str, Any]:
    c = result["config"]
    return {
        "status": result["status"],
        "error": result.get("error"),
        "config": {
            "model": c["model"]["id"],
            "precision": c["precision"]["id"],
            "mode": c["compile"]["mode"],
            "scope": c["compile"]["scope"],
            "optimizer_compiled": c["compile"]["optimizer"],
            "fused": c["trainer"]["optimizer"]["fused"],
            "loader": c["data"]["loader"],
            "batch_size": c["trainer"]["batch_size"],
        },
        "metrics": result["metrics"],
        "info": {
            k: result["info"].get(k)
            for k in (
                "timeline",
                "worker_started_at",
                "worker_module_loaded_at",
                "worker_ended_at",
                "mlflow_log_s",
                "inductor_cache",
                "gpu_pool_index",
                "mfu_note",
            )
        },
        "environment": result.get("environment", {}),
    }


# ------------------------------------------------------------------------------------------- sections
def overhead(out: Path, reps: dict[str, int]) -> dict[str, Any]:
    """Bare loop and pipeline job alternate, per precision, mode and repeat (`reps`: precision -> repeats)."""
    cache = str(
        (out / "inductor_cache").resolve()
    )  # shared by bare and pipeline: warm after the first compile
    rows = []
    for precision, n in reps.items():
        vit = [p for p in VIT if not p.startswith("precision=")] + [f"precision={precision}"]
        for mode in ("eager", "default"):
            for rep in range(n):
                bare = last_json(
                    run_on_a_gpu(
                        [
                            sys.executable,
                            "benchmarks/bare_loop.py",
                            "--precision",
                            precision,
                            "--compile",
                            mode,
                        ],
                        env={"TORCHINDUCTOR_CACHE_DIR": cache, "TRITON_CACHE_DIR": f"{cache}/triton"},
                    )
                )
                (job,) = pipeline(
                    [
                        *vit,
                        f"compile.mode={mode}",
                        "benchmark.paired_eager=false",
                        f"diagnose.cache_dir={cache}",
                    ],
                    out,
                    f"overhead-{precision}-{mode}-{rep}",
                )
                rows.append(
                    {"precision": precision, "mode": mode, "rep": rep, "bare": bare, "pipeline": slim(job)}
                )
                save(out, "overhead", {"rows": rows, "partial": True})  # a timeout never loses finished rows
    return {"rows": rows}


def cache(out: Path) -> dict[str, Any]:
    """Each mode's sweep shares its own fresh cache: job 0 compiles cold, the later jobs warm. The
    default-mode sweep runs 3 full jobs with the paired eager baseline, so it also gives the paired
    speedup over 3 repeats (its summary.md). The warm cache then seeds SHARED_CACHE, which the
    fastest-configuration sweep reuses (its compile times are then warm, and marked so)."""
    rows = []
    plans = {
        "default": ["trainer.seed=0,1,2"],
        "max-autotune-no-cudagraphs": [
            "trainer.seed=0,1",
            "benchmark.paired_eager=false",
            "trainer.steps=20",
            "trainer.warmup_steps=5",
        ],
    }
    for mode, extra in plans.items():
        jobs = pipeline([*VIT, f"compile.mode={mode}", *extra], out, f"cache-{mode}", multirun=True)
        rows.append({"mode": mode, "jobs": [slim(j) for j in jobs]})
        save(out, "cache", {"rows": rows, "partial": True})
        subprocess.run(
            ["cp", "-r", f"{out / f'cache-{mode}' / 'inductor_cache'}/.", str(out / SHARED_CACHE)],
            check=False,
        )
    return {"rows": rows}


def fastest(out: Path) -> dict[str, Any]:
    """Mode x fused optimizer on a cache the cache section warmed; then, for the best of those, a
    compiled optimizer, the other scopes and the DataLoader path; the article's seed loop beside."""
    seed = last_json(run_on_a_gpu([sys.executable, "benchmarks/seed_loop.py", "--amp"]))
    (out / SHARED_CACHE).mkdir(parents=True, exist_ok=True)
    base = [*VIT, "benchmark.paired_eager=false", f"diagnose.cache_dir={(out / SHARED_CACHE).resolve()}"]
    grid = [
        *base,
        "compile.mode=default,reduce-overhead,max-autotune-no-cudagraphs",
        "trainer.optimizer.fused=null,true",
    ]
    jobs = pipeline(grid, out, "fastest-grid", multirun=True)
    done = [j for j in jobs if j["status"] == "FINISHED"]
    variants: list[dict[str, Any]] = []

    def collected() -> dict[str, Any]:
        return {"seed_loop": seed, "grid": [slim(j) for j in jobs], "variants": [slim(j) for j in variants]}

    def keep() -> None:  # a timeout never loses finished rows
        save(out, "fastest", {**collected(), "partial": True})

    keep()
    if done:
        c = min(done, key=lambda j: j["metrics"]["step_time_ms_p50"])["config"]
        fused = c["trainer"]["optimizer"]["fused"]
        fixed = [
            *base,
            f"compile.mode={c['compile']['mode']}",
            f"trainer.optimizer.fused={'null' if fused is None else str(fused).lower()}",
        ]
        variants += pipeline([*fixed, "data.loader=true"], out, "fastest-loader")
        keep()
        # a compiled optimizer step runs the foreach kernels (torch.compile does not trace fused Adam)
        compiled_step = [*fixed[:-1], "trainer.optimizer.fused=false", "compile.optimizer=true"]
        variants += pipeline(compiled_step, out, "fastest-compiled-optimizer")
        keep()
        variants += pipeline(
            [*fixed, "compile.scope=model_and_loss,regional,step"], out, "fastest-scopes", multirun=True
        )
    return collected()


def search(out: Path, trials: int, overrides: list[str]) -> dict[str, Any]:
    """`overrides` narrow the search (e.g. compile.mode=choice(default,reduce-overhead)) or shorten it."""
    parallel = [f"hydra.sweeper.n_jobs={min(GPUS, trials)}"] if GPUS > 1 else []
    jobs = pipeline(
        ["sweep=compile_search", *VIT, f"hydra.sweeper.n_trials={trials}", *parallel, *overrides],
        out,
        "search",
        multirun=True,
    )
    best_file = out / "search" / "optimization_results.yaml"
    return {
        "overrides": overrides,
        "trials": [slim(j) for j in jobs],
        "optimization_results": best_file.read_text() if best_file.exists() else None,
    }


# ------------------------------------------------------------------------------------------- report
def load(dirs: list[Path]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for d in dirs:
        for name in ("overhead", "cache", "fastest", "search", "meta"):
            path = d / f"{name}.json"
            if path.exists():
                data[name] = json.loads(path.read_text())
    return data


def job_cost(row: dict[str, Any]) -> dict[str, float]:
    """Job wall time minus (compile + measured steps), and where that time went."""
    m, info = row["metrics"], row["info"]
    measured = m["step_time_ms_mean"] * m["measured_steps"] / 1000
    compile_s = m.get("compile_time_s", 0.0)
    phases = dict(info.get("timeline") or {})
    spawn = info["worker_module_loaded_at"] - info["worker_started_at"]
    cost = m["job_wall_s"] + (info.get("mlflow_log_s") or 0.0) - compile_s - measured
    accounted = spawn + sum(phases.values()) + (info.get("mlflow_log_s") or 0.0)
    return {
        "job_wall_s": m["job_wall_s"] + (info.get("mlflow_log_s") or 0.0),
        "compile_s": compile_s,
        "measured_steps_s": measured,
        "cost_s": cost,
        "process_start_s": spawn,
        "imports_s": phases.get("imports", 0.0) + phases.get("model_library", 0.0),
        "device_init_s": phases.get("device_init", 0.0),
        "model_build_s": phases.get("build", 0.0) + phases.get("flops", 0.0),
        "warmup_steady_and_rounds_s": phases.get("variants_warmup_and_rounds", 0.0) - compile_s - measured,
        "diagnostics_s": phases.get("diagnostics", 0.0),
        "mlflow_logging_s": info.get("mlflow_log_s") or 0.0,
        "exit_and_other_s": m["job_wall_s"] + (info.get("mlflow_log_s") or 0.0) - accounted,
    }


def verdict(ok: bool) -> str:
    return "meets target" if ok else "MISSES target"


def report(dirs: list[Path]) -> str:
    """RESULTS.md: one part per result dir (each dir is one GPU host and one call)."""
    lines = [
        "# Benchmarks of the instrument",
        "",
        "Written by `python benchmarks/bench.py --report <dirs>` from the raw JSON in each dir.",
        "",
    ]
    targets = ROOT / "benchmarks" / "results" / "TARGETS.md"  # the targets' status, kept by hand
    if targets.exists():
        lines += [targets.read_text().strip(), ""]
    for d in dirs:
        lines += report_dir(d)
    return "\n".join(lines) + "\n"


def report_dir(d: Path) -> list[str]:
    data = load([d])
    meta = data.get("meta", {})
    where = str(d.resolve().relative_to(ROOT)) if d.resolve().is_relative_to(ROOT) else str(d)
    notes = d / "NOTES.md"
    lines = [
        f"# {where}",
        "",
        *([notes.read_text().strip(), ""] if notes.exists() else []),
        f"Measured {meta.get('date', '?')} on {meta.get('gpu', '?')} x{meta.get('gpus', 1)} (driver {meta.get('driver', '?')}), torch {meta.get('torch', '?')}, CUDA {meta.get('cuda', '?')}, Python {meta.get('python', '?')}, timm {meta.get('timm', '?')}.",
        f"Command: `{meta.get('command', '?')}`",
        "",
    ]
    if "overhead" in data:
        rows = data["overhead"]["rows"]
        lines += [
            "### Harness overhead and stability (ViT-B/16, batch 64, bf16 autocast, on-device data)",
            "",
            "| precision | mode | rep | bare loop mean ms | pipeline mean ms | pipeline p50 ms | ratio (mean/mean) | pipeline compile s | pipeline peak GiB reserved |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            pm = r["pipeline"]["metrics"]
            lines.append(
                f"| {r.get('precision', 'amp')} | {r['mode']} | {r['rep']} | {r['bare']['step_time_ms_mean']:.3f} | {pm['step_time_ms_mean']:.3f} | {pm['step_time_ms_p50']:.3f} | {pm['step_time_ms_mean'] / r['bare']['step_time_ms_mean']:.4f} | {pm.get('compile_time_s', 0):.1f} | {pm.get('peak_mem_reserved_gib', float('nan')):.2f} |"
            )
        lines.append("")
        groups = sorted(
            {(r.get("precision", "amp"), r["mode"]) for r in rows}, key=lambda g: (g[0] != "amp", g)
        )
        for precision, mode in groups:
            mine = [
                r
                for r in rows
                if (r.get("precision", "amp"), r["mode"]) == (precision, mode)
                and r["pipeline"]["status"] == "FINISHED"
            ]
            if not mine:
                continue
            ratio = statistics.fmean(
                r["pipeline"]["metrics"]["step_time_ms_mean"] for r in mine
            ) / statistics.fmean(r["bare"]["step_time_ms_mean"] for r in mine)
            p50s = [r["pipeline"]["metrics"]["step_time_ms_p50"] for r in mine]
            cv = statistics.stdev(p50s) / statistics.fmean(p50s) if len(p50s) > 1 else None
            stability = (
                f"stability: CV of the median over {len(p50s)} jobs {cv:.2%} (target <= 1%: {verdict(cv <= 0.01)})"
                if cv is not None
                else "stability: not measured (one job finished)"
            )
            lines.append(
                f"- {precision} {mode}: overhead ratio {ratio:.4f} (target <= 1.01: {verdict(ratio <= 1.01)}); {stability}"
            )
        lines += [
            "",
            "### Job cost (job wall time minus compile time and measured steps)",
            "",
            "| precision | mode | rep | job wall s | compile s | measured steps s | cost s | process start | imports | device init | model build | warm-up and rounds (steady) | diagnostics | MLflow logging | exit, other |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        costs = []
        for r in rows:
            if r["pipeline"]["status"] != "FINISHED":
                continue
            c = job_cost(r["pipeline"])
            if r.get("precision", "amp") == "amp":
                costs.append(c["cost_s"])
            lines.append(
                f"| {r.get('precision', 'amp')} | {r['mode']} | {r['rep']} | {c['job_wall_s']:.1f} | {c['compile_s']:.1f} | {c['measured_steps_s']:.1f} | **{c['cost_s']:.1f}** | {c['process_start_s']:.2f} | {c['imports_s']:.2f} | {c['device_init_s']:.2f} | {c['model_build_s']:.2f} | {c['warmup_steady_and_rounds_s']:.2f} | {c['diagnostics_s']:.2f} | {c['mlflow_logging_s']:.2f} | {c['exit_and_other_s']:.2f} |"
            )
        if costs:
            lines += [
                "",
                f"- median job cost of the amp jobs {statistics.median(costs):.1f} s (target <= 5 s: {verdict(statistics.median(costs) <= 5)})",
                "",
            ]
    if "cache" in data:
        lines += [
            "### Compile cache: cold vs warm (two-job sweep sharing the sweep's inductor cache)",
            "",
            "| mode | job 0 (cold) compile s | later jobs (warm) compile s | speed-up (cold / median warm) | cache state, job by job |",
            "|---|---|---|---|---|",
        ]
        for r in data["cache"]["rows"]:
            jobs = r["jobs"]
            if len(jobs) >= 2 and all(j["status"] == "FINISHED" for j in jobs):
                cold, *warm = (j["metrics"]["compile_time_s"] for j in jobs)
                speedup = cold / statistics.median(warm)
                lines.append(
                    f"| {r['mode']} | {cold:.1f} | {', '.join(f'{w:.1f}' for w in warm)} | {speedup:.1f}x ({verdict(speedup >= 3)}) | {' / '.join(j['info']['inductor_cache'] for j in jobs)} |"
                )
        lines.append("")
    if "fastest" in data:
        f = data["fastest"]
        seed = f["seed_loop"]["step_time_ms_mean"]
        lines += [
            "### Fastest configuration (ViT-B/16, batch 64, bf16 autocast)",
            "",
            f"Seed loop (the article's loop: DataLoader-fed, host-to-device copy every step, eager amp), same call: **{seed:.2f} ms/step** (the article's own unsynchronized per-step average: {f['seed_loop']['article_step_ms']:.2f} ms).",
            "",
            "| mode | scope | optimizer | fused | data | status | step p50 ms | vs seed loop | compile s | MFU |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        rows = f["grid"] + f["variants"]
        for r in sorted(rows, key=lambda r: r["metrics"].get("step_time_ms_p50", 1e9)):
            c, m = r["config"], r["metrics"]
            p50 = m.get("step_time_ms_p50")
            lines.append(
                f"| {c['mode']} | {c['scope']} | {'compiled' if c['optimizer_compiled'] else 'eager'} | {c['fused']} | {'loader' if c['loader'] else 'device'} | {r['status']} | {p50:.2f} | {p50 / seed:.3f} | {m.get('compile_time_s', 0):.1f} | {m.get('mfu', float('nan')):.1%} |"
                if p50
                else f"| {c['mode']} | {c['scope']} | {c['optimizer_compiled']} | {c['fused']} | {c['loader']} | {r['status']} | – | – | – | – |"
            )
        done = [r for r in rows if r["status"] == "FINISHED"]
        if done:
            best = min(done, key=lambda r: r["metrics"]["step_time_ms_p50"])
            ratio = best["metrics"]["step_time_ms_p50"] / seed
            lines += [
                "",
                f"- best: {best['config']} at {best['metrics']['step_time_ms_p50']:.2f} ms, MFU {best['metrics'].get('mfu', float('nan')):.1%}; {ratio:.3f}x the seed loop (target <= 0.67: {verdict(ratio <= 0.67)})",
                "",
            ]
    if "search" in data:
        s = data["search"]
        lines += [
            "### Search: Hydra's Optuna sweeper over the compile knobs (sweep=compile_search)",
            "",
            *([f"Search narrowed by: `{' '.join(s['overrides'])}`", ""] if s.get("overrides") else []),
            "| trial | mode | scope | optimizer compiled | fused | status | step p50 ms |",
            "|---|---|---|---|---|---|---|",
        ]
        for i, r in enumerate(s["trials"]):
            c = r["config"]
            lines.append(
                f"| {i} | {c['mode']} | {c['scope']} | {c['optimizer_compiled']} | {c['fused']} | {r['status']} | {r['metrics'].get('step_time_ms_p50', float('nan')):.2f} |"
            )
        lines += ["", "```", (s.get("optimization_results") or "no result file").strip(), "```", ""]
    return lines


def meta(command: str) -> dict[str, Any]:
    import platform

    import torch

    info: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "command": command,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    try:
        import timm

        info["timm"] = timm.__version__
    except Exception as err:  # a library that does not load is named in the results, not a traceback
        info["timm"] = f"not importable ({type(err).__name__}: {err})"
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
        info["gpus"] = torch.cuda.device_count()
        try:
            import pynvml

            pynvml.nvmlInit()
            info["driver"] = pynvml.nvmlSystemGetDriverVersion()
        except Exception:
            pass
    return info


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sections", default="overhead,cache,fastest,search")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "benchmarks" / "results" / f"run-{datetime.date.today().isoformat()}",
    )
    parser.add_argument(
        "--reps", default="amp:3,fp32:1", help="overhead repeats per precision, e.g. amp:3,fp32:1"
    )
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument(
        "--search-args",
        default="",
        help="overrides for the search, space-separated, e.g. 'compile.mode=choice(default,reduce-overhead) trainer.steps=40'",
    )
    parser.add_argument(
        "--report", nargs="*", type=Path, help="write benchmarks/RESULTS.md from these result dirs and stop"
    )
    parser.add_argument(
        "--gpu-pool", default="all", help="GPUs this benchmark may use on a multi-GPU host, e.g. [2,3]"
    )
    args = parser.parse_args()
    if args.report is not None:
        dirs = args.report or [args.out]
        (ROOT / "benchmarks" / "RESULTS.md").write_text(report(dirs))
        print(f"wrote benchmarks/RESULTS.md from {', '.join(map(str, dirs))}")
        return 0
    info = meta(" ".join(sys.argv))
    if "gpu" not in info:
        print(
            "bench: no CUDA GPU here: these sections measure the instrument with ViT-B/16 on a GPU (hours on a "
            "CPU); nothing ran. `--report DIR` writes RESULTS.md from a GPU host's results",
            file=sys.stderr,
        )
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    meta_file = args.out / "meta.json"
    if meta_file.exists():  # several calls into one dir: keep every command
        info["command"] = json.loads(meta_file.read_text())["command"] + "; " + info["command"]
    meta_file.write_text(json.dumps(info, indent=1))
    global GPUS, POOL
    GPUS, POOL = info.get("gpus", 1), args.gpu_pool
    sections = {
        "overhead": lambda: overhead(
            args.out, {p: int(n) for p, n in (item.split(":") for item in args.reps.split(","))}
        ),
        "cache": lambda: cache(args.out),
        "fastest": lambda: fastest(args.out),
        "search": lambda: search(args.out, args.trials, args.search_args.split()),
    }
    for name in args.sections.split(","):
        started = time.monotonic()
        result = sections[name]()
        result["wall_s"] = time.monotonic() - started
        save(args.out, name, result)
        print(f"section {name}: {result['wall_s']:.0f} s", flush=True)
    print(report([args.out]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
