"""Issue 44's tables from a benchmarks/gpu/dist44.sh results folder (markdown on stdout):

1. per model (ViT-B/16, llama_1b): each cell of parallel=none,ddp,fsdp x eager,default (FSDP2 also
   regional): the pipeline's samples/s (the slowest rank's median step; its 95% interval), the speedup
   over its paired eager copy, the largest rank's peak memory, the scaling efficiency against the same
   model and mode on one GPU, the exposed communication and the collectives' bus bandwidth against the
   probe's, and the plain torchrun loop of the same cell (benchmarks/torchrun_loop.py) in the same call:
   pipeline / loop, median against median and mean against mean, within 3% or not;
2. what the paired eager copy costs (DDP, FSDP2 compiled, with and without it);
3. what parallel.optimize_ddp and compiled autograd change (DDP, compiled);
4. the machine's collective probe (busbw by size) and NCCL's transport lines;
5. the suite with one job per GPU on both GPUs: its pace against one GPU's (issue 45's one-H200 run).

    python benchmarks/gpu/dist44_table.py <results folder>

Every figure is read from the folder; a cell not run (or cut by its cap) says so.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

DASH = "–"
WITHIN = 0.03  # each distributed figure within 3% of the plain loop's, or explained
# Issue 45's one-H200 run of the same suite, same overrides, same order (benchmarks/results/h200-2026-11-28-s45):
# 23 jobs ended in 1360 s with two jobs on the GPU (overlap); their workers' own time less their pauses, 2106 s.
ONE_GPU_JOBS, ONE_GPU_OVERLAP_S, ONE_GPU_ALONE_S = 23, 1360.0, 2106.0


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def jobs(root: Path) -> list[dict[str, Any]]:
    """Every pipeline job under the folder's sweeps: its config, result and sweep."""
    out = []
    for result_path in sorted(root.glob("*/*/result.json")):
        config = read_json(result_path.parent / "job_config.json")
        result = read_json(result_path)
        if not isinstance(config, dict) or not isinstance(result, dict):
            continue
        out.append(
            {"sweep": result_path.parent.parent.name, "dir": result_path.parent, "config": config, **result}
        )
    return out


def cell_key(model: str, strategy: str, world: int, mode: str, scope: str | None, opt: str | None) -> tuple:
    compiled = mode != "eager"
    return (
        model,
        strategy,
        world if strategy != "none" else 1,
        mode,
        scope if compiled else None,
        opt if compiled and strategy == "ddp" else None,
    )


def job_key(job: dict[str, Any]) -> tuple:
    c = job["config"]
    par, comp = c["parallel"], c["compile"]
    return cell_key(
        c["model"]["id"], par["strategy"], par["nproc"] or 1, comp["mode"], comp["scope"], par["optimize_ddp"]
    )


def loops(root: Path) -> dict[tuple, dict[str, Any]]:
    found: dict[tuple, dict[str, Any]] = {}
    for path in sorted((root / "loops").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            key = cell_key(
                r["model"], r["parallel"], r["world_size"], r["compile"], r["scope"], r["optimize_ddp"]
            )
            found[key] = r
    return found


def loop_exposed_ms(loop: dict[str, Any] | None) -> float | None:
    """The plain loop's exposed communication per step, the most of any rank, read from its profiler traces
    as the pipeline reads its own (pipeline.diagnose.comm.read_trace)."""
    if not loop or not loop.get("profile") or not loop.get("profiled_steps") or loop["world_size"] < 2:
        return None
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from pipeline.diagnose.comm import read_trace

    found = []
    for path in sorted(Path(loop["profile"]).glob("trace.rank*.json.gz")):
        with gzip.open(path, "rt") as raw:
            events = json.load(raw).get("traceEvents", [])
        found.append(read_trace(events, world=loop["world_size"]).exposed_us / 1000 / loop["profiled_steps"])
    return max(found) if found else None


def fmt(value: float | None, spec: str = ".1f") -> str:
    return DASH if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def throughput(job: dict[str, Any]) -> tuple[float | None, float | None, float | None, float | None]:
    """samples/s from the median step, its 95% interval, and from the mean step."""
    m = job["metrics"]
    samples = (job.get("work") or {}).get("samples")
    if not samples or "step/p50_ms" not in m:
        return None, None, None, None
    per_ms = samples * 1000
    low = per_ms / m["step/p50_ci95_high_ms"] if m.get("step/p50_ci95_high_ms") else None
    high = per_ms / m["step/p50_ci95_low_ms"] if m.get("step/p50_ci95_low_ms") else None
    mean = per_ms / m["step/mean_ms"] if m.get("step/mean_ms") else None
    return per_ms / m["step/p50_ms"], low, high, mean


def cell_name(key: tuple) -> str:
    _model, strategy, world, mode, scope, opt = key
    name = "1 GPU" if strategy == "none" else f"{strategy.upper().replace('FSDP', 'FSDP2')} x{world}"
    name += f" {mode}"
    if scope and scope != "model":
        name += f" {scope}"
    if opt and opt != "on":
        name += f" optimize_ddp={opt}"
    return name


def memory(job: dict[str, Any]) -> str:
    m = job["metrics"]
    if "memory/rank_peak_allocated_max_gib" in m:
        return (
            f"{m['memory/rank_peak_allocated_max_gib']:.2f} ({fmt(m.get('memory/peak_reserved_gib'), '.2f')})"
        )
    if "memory/peak_allocated_gib" in m:
        return f"{m['memory/peak_allocated_gib']:.2f} ({m['memory/peak_reserved_gib']:.2f})"
    rss = m.get("memory/rank_cpu_rss_max_gib", m.get("memory/cpu_rss_peak_gib"))
    return f"RSS {fmt(rss, '.2f')}"


def speedup(job: dict[str, Any]) -> str:
    m = job["metrics"]
    if "speedup/vs_eager" not in m:
        return DASH
    low, high = m.get("speedup/ci95_low"), m.get("speedup/ci95_high")
    interval = f" [{low:.2f}, {high:.2f}]" if low and high and high / low <= 3 else " [undetermined]"
    return f"{m['speedup/vs_eager']:.2f}x{interval}"


def comm(job: dict[str, Any]) -> tuple[str, str]:
    m = job["metrics"]
    if "comm/exposed_ms" not in m:
        return DASH, DASH
    exposed = f"{m['comm/exposed_ms']:.2f} ({m['comm/exposed_pct']:.0f}%)"
    bus = fmt(m.get("comm/busbw_gbps"), ".3g")
    if "comm/busbw_vs_probe" in m:
        bus += f" ({m['comm/busbw_vs_probe']:.0%})"
    return exposed, bus


def status(job: dict[str, Any]) -> str:
    if job.get("status") != "FINISHED":
        error = job.get("error") or {}
        return f"{job.get('status')}: {error.get('type', '')} {str(error.get('message', ''))[:80]}"
    return "noisy" if job["metrics"].get("step/noisy") else "steady"


def loop_ratio(tput: float | None, mean: float | None, loop: dict[str, Any] | None) -> tuple[str, str, str]:
    if loop is None or tput is None:
        return DASH, DASH, "no loop" if loop is None else DASH
    p50 = tput / loop["samples_per_s_p50"]
    by_mean = mean / loop["samples_per_s_mean"] if mean else None
    verdict = "yes" if abs(p50 - 1) <= WITHIN else f"no ({(p50 - 1):+.1%})"
    return (
        f"{loop['samples_per_s_p50']:.1f} / {loop['samples_per_s_mean']:.1f}",
        f"{p50:.3f} / {fmt(by_mean, '.3f')}",
        verdict,
    )


def main_table(
    model: str, found: dict[tuple, dict[str, Any]], reference: dict[tuple, dict[str, Any]]
) -> list[str]:
    rows = [
        k for k in found if k[0] == model and k[5] in (None, "on") and k[4] in (None, "model", "regional")
    ]
    order = {"none": 0, "ddp": 1, "fsdp": 2}
    rows.sort(key=lambda k: (order.get(k[1], 9), k[3] != "eager", k[4] or ""))
    out = [
        f"### {model}",
        "",
        "| cell | pipeline samples/s [95%] | speedup vs paired eager [95%] | largest rank's peak GiB allocated (rank 0 reserved) "
        "| scaling vs 1 GPU | exposed comm ms/step (% of step) | busbw GB/s (vs probe) | plain loop's exposed comm ms/step "
        "| plain loop samples/s p50 / mean | pipeline / loop p50 / mean | within 3% | status |",
        "|" + "---|" * 12,
    ]
    for key in rows:
        job = found[key]
        tput, low, high, mean = throughput(job)
        single = found.get(cell_key(model, "none", 1, key[3], "model", None))
        scale = DASH
        if key[1] != "none" and single is not None and tput:
            base = throughput(single)[0]
            scale = f"{tput / (key[2] * base):.0%}" if base else DASH
        exposed, bus = comm(job)
        loop, ratio, within = loop_ratio(tput, mean, reference.get(key))
        loop_exposed = loop_exposed_ms(reference.get(key))
        interval = f" [{fmt(low)}, {fmt(high)}]" if low and high and high / low <= 3 else " [undetermined]"
        out.append(
            f"| {cell_name(key)} | {fmt(tput)}{interval} | {speedup(job)} | {memory(job)} | {scale} | {exposed} | {bus} "
            f"| {fmt(loop_exposed, '.2f')} | {loop} | {ratio} | {within} | {status(job)} |"
        )
    return out


def paired_table(all_jobs: list[dict[str, Any]], reference: dict[tuple, dict[str, Any]]) -> list[str]:
    """DDP and FSDP2 compiled: with the paired eager copy (the main sweep), without it, and without it
    with one intra-op thread per rank (torchrun's own default), against the plain loop."""
    out = [
        "| cell | paired: samples/s | unpaired | unpaired, OMP_NUM_THREADS=1 | plain loop p50 "
        "| paired / loop | unpaired / loop | unpaired OMP 1 / loop |",
        "|---|---|---|---|---|---|---|---|",
    ]
    by_sweep = {(j["sweep"], job_key(j)): j for j in all_jobs}
    keys = sorted({job_key(j) for j in all_jobs if j["sweep"] in ("vit_unpaired", "vit_unpaired_omp1")})
    for key in keys:
        tput = {
            sweep: throughput(by_sweep[(sweep, key)])[0] if (sweep, key) in by_sweep else None
            for sweep in ("vit", "vit_unpaired", "vit_unpaired_omp1")
        }
        loop = reference.get(key)
        base = loop["samples_per_s_p50"] if loop else None
        ratios = [fmt(t / base if t and base else None, ".3f") for t in tput.values()]
        out.append(
            f"| {cell_name(key)} | {fmt(tput['vit'])} | {fmt(tput['vit_unpaired'])} | {fmt(tput['vit_unpaired_omp1'])} "
            f"| {fmt(base)} | " + " | ".join(ratios) + " |"
        )
    return out


def ddp_table(all_jobs: list[dict[str, Any]], reference: dict[tuple, dict[str, Any]]) -> list[str]:
    out = [
        "| scope, optimize_ddp | samples/s | speedup vs paired eager | backend graphs (max rank) | graph breaks | compile s "
        "| exposed comm ms/step | plain loop p50 | pipeline / loop |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    picked = [
        j
        for j in all_jobs
        if j["sweep"] in ("vit", "vit_ddp_off", "vit_ddp_step")
        and j["config"]["parallel"]["strategy"] == "ddp"
        and j["config"]["compile"]["mode"] != "eager"
    ]
    for job in picked:
        key = job_key(job)
        m = job["metrics"]
        tput = throughput(job)[0]
        loop = reference.get(key)
        out.append(
            f"| {key[4]}, {key[5]} | {fmt(tput)} | {speedup(job)} | {fmt(m.get('diagnose/rank_max_backend_graphs'), '.0f')} "
            f"| {fmt(m.get('diagnose/rank_max_graph_breaks'), '.0f')} | {fmt(m.get('compile/rank_total_max_s'))} "
            f"| {comm(job)[0]} | {fmt(loop['samples_per_s_p50'] if loop else None)} "
            f"| {fmt(tput / loop['samples_per_s_p50'] if tput and loop else None, '.3f')} |"
        )
    return out


def probe_table(root: Path) -> list[str]:
    probe = read_json(root / "probe.json")
    if not isinstance(probe, dict):
        return ["(no probe.json: the probe part did not run)"]
    sizes = sorted({r["size_bytes"] for r in probe["rows"]})
    kinds = sorted({r["kind"] for r in probe["rows"]})
    by = {(r["kind"], r["size_bytes"]): r["busbw_gbps"] for r in probe["rows"]}
    out = [
        f"Machine: {json.dumps(probe['machine'])}; {probe['world_size']} ranks; {probe.get('seconds', 0):.1f} s.",
        "",
        "| busbw GB/s | " + " | ".join(size_words(s) for s in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    for kind in kinds:
        out.append(f"| {kind} | " + " | ".join(fmt(by.get((kind, s)), ".3g") for s in sizes) + " |")
    log = root / "probe.log"
    if log.exists():
        transports = sorted({m.group(1) for m in re.finditer(r" via (\S+)", log.read_text())})
        out += ["", f"NCCL transports (NCCL_DEBUG=INFO): {', '.join(transports) or 'none said'}"]
    return out


def size_words(size: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size:g} B"


def suite_table(root: Path, all_jobs: list[dict[str, Any]]) -> list[str]:
    suite = [j for j in all_jobs if j["sweep"] == "suite"]
    if not suite:
        return ["(the suite part did not run)"]
    finished = [j for j in suite if j.get("status") == "FINISHED"]
    spans = [
        (
            j["info"].get("worker_started_at"),
            j["info"].get("worker_ended_at"),
            j["info"].get("gpu_pool_index"),
        )
        for j in suite
        if (j.get("info") or {}).get("worker_started_at") and (j.get("info") or {}).get("worker_ended_at")
    ]
    times = dict(re.findall(r"suite (started_at|ended_at)=(\d+)", (root / "campaign.txt").read_text()))
    wall = float(times["ended_at"]) - float(times["started_at"]) if len(times) == 2 else None
    busy = sum(end - start for start, end, _ in spans)
    per_gpu: dict[str, int] = {}
    for _, _, gpu in spans:
        per_gpu[str(gpu)] = per_gpu.get(str(gpu), 0) + 1
    pace = wall / len(finished) if wall and finished else None
    alone = ONE_GPU_ALONE_S / ONE_GPU_JOBS
    overlap = ONE_GPU_OVERLAP_S / ONE_GPU_JOBS
    return [
        "| | two GPUs, one job per GPU (this run) | one H200, two jobs with overlap (issue 45) | one H200, one at a time (issue 45's estimate) |",
        "|---|---|---|---|",
        f"| jobs finished | {len(finished)} of {len(suite)} started (jobs per GPU: {per_gpu}) | {ONE_GPU_JOBS} | {ONE_GPU_JOBS} |",
        f"| wall time, s | {fmt(wall, '.0f')} (the sweep command, start to end) | {ONE_GPU_OVERLAP_S:.0f} | {ONE_GPU_ALONE_S:.0f} |",
        f"| s per finished job | {fmt(pace)} | {overlap:.1f} | {alone:.1f} |",
        f"| workers' time / wall | {fmt(busy / wall if wall else None, '.2f')} (jobs running at once, on average) | – | – |",
        f"| one-at-a-time one-GPU pace / this pace | {fmt(alone / pace if pace else None, '.2f')}x | {alone / overlap:.2f}x | 1x |",
    ]


def versions(all_jobs: list[dict[str, Any]], root: Path) -> str:
    env = next((j["environment"] for j in all_jobs if j.get("environment")), {})
    keys = (
        "gpu_name",
        "driver_version",
        "torch",
        "cuda_version",
        "timm",
        "transformers",
        "python",
        "cpu_count",
    )
    said = ", ".join(f"{k} {env[k]}" for k in keys if k in env)
    return said or "(no job's environment found)"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(argv[0])
    all_jobs = jobs(root)
    reference = loops(root)
    main_sweeps = {"vit", "vit_fsdp_regional", "llama", "llama_fsdp_regional", "vit_ddp_off", "vit_ddp_step"}
    found = {job_key(j): j for j in all_jobs if j["sweep"] in main_sweeps}
    lines = [f"# Issue 44: {root.name}", "", f"Versions: {versions(all_jobs, root)}.", ""]
    models = sorted({k[0] for k in found}, key=lambda m: (not m.startswith("vit"), m))
    lines += ["## Pipeline against the plain torchrun loop, per cell", ""]
    for model in models:
        lines += [*main_table(model, found, reference), ""]
    lines += [
        "Samples/s count the global batch (per-rank batch x ranks); the pipeline's are the slowest rank's median step's "
        "(benchmarks/torchrun_loop.py's p50: the slowest rank's median; mean: the slowest rank's mean). Scaling: "
        "samples/s / (ranks x the same model and mode on one GPU). Exposed comm and busbw: 3 profiled steps after the "
        "measurement (comm/*), busbw against the machine's probe at the same sizes.",
        "",
        "## What the paired eager copy costs (compiled, benchmark.paired_eager=false)",
        "",
        *paired_table(all_jobs, reference),
        "",
        "## What parallel.optimize_ddp and compiled autograd change (ViT-B/16 DDP, compiled)",
        "",
        *ddp_table(all_jobs, reference),
        "",
        "## The machine's collective probe",
        "",
        *probe_table(root),
        "",
        "## The suite, one job per GPU on two GPUs",
        "",
        *suite_table(root, all_jobs),
        "",
    ]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
