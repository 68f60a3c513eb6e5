"""Is it the host? Issue 26's question for launch-bound compiled steps, asked without the pipeline.

A launch-bound compiled step (many small kernels) runs at the speed the host issues them. Three
readings tell whether the host's own speed moves, and whether the Python garbage collector is part of
it:

- `python`: a fixed, torch-free Python workload (about 1 ms a call), back to back for some seconds in
  this process (its spread and its half-second medians), then pinned to each CPU in turn (each CPU's
  median). A host whose speed drifts shows it here with no GPU, no torch and no pipeline involved.
- `sampler` (a separate process pinned to the last CPU, for the whole run): the same workload every
  50 ms, timestamped: the host's speed over time, beside everything else this script does.
- `gc` per model: the bare compiled training step (timm model, Adam, cross-entropy, bf16 autocast: the
  project's bare loop) in timed rounds that alternate the collector as Python leaves it (`gc_on`) and
  frozen and disabled for the round (`gc_off`: `gc.collect(); gc.freeze(); gc.disable()`, enabled
  again after). Before every round, the workload's median (the host's speed just then) and the time
  of a small CUDA op's launch (the launch path's speed). Per round: the steps' median by CUDA events,
  the host's time per step call, the thread's CPU time per step, the collections that ran and their
  time.

    python benchmarks/host_probe.py --out /tmp/probe --models mobilenetv3_large_100:256 resnet50:64
    python benchmarks/host_probe.py --out /tmp/probe --device cpu --image-size 32 --models resnet18:2 --smoke
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from truth_probe import bare_step, timed  # the bare loop's step (benchmarks/bare_loop.py's), its timed loop


def workload(n: int = 2500) -> int:
    """A fixed piece of Python work (tuples, dict stores, hashing, calls): about 1 ms on a server core."""
    acc = 0
    table: dict[int, tuple] = {}
    for i in range(n):
        item = (i, i + 1, str(i))
        table[i & 255] = item
        acc += len(item) + hash(item[2]) % 7
    return acc


def time_workload(calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        start = time.perf_counter()
        workload()
        out.append((time.perf_counter() - start) * 1000)
    return out


def summary(values: list[float]) -> dict[str, float]:
    s = sorted(values)
    p = lambda q: s[min(len(s) - 1, int(q * len(s)))]  # noqa: E731
    p50 = statistics.median(s)
    return {
        "n": len(s),
        "p10": round(p(0.1), 4),
        "p50": round(p50, 4),
        "p90": round(p(0.9), 4),
        "spread_pct": round(100 * (p(0.9) - p(0.1)) / p50, 2) if p50 else 0.0,
    }


def python_speed(seconds: float) -> dict:
    """Back to back for `seconds`: spread, half-second medians; then each CPU's median."""
    times, stamps = [], []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        workload()
        t1 = time.perf_counter()
        times.append((t1 - t0) * 1000)
        stamps.append(t1 - start)
    halves: dict[int, list[float]] = {}
    for stamp, ms in zip(stamps, times, strict=True):
        halves.setdefault(int(stamp * 2), []).append(ms)
    half_medians = [round(statistics.median(v), 4) for _, v in sorted(halves.items())]
    per_cpu = {}
    allowed = sorted(os.sched_getaffinity(0))
    for cpu in allowed:
        os.sched_setaffinity(0, {cpu})
        time_workload(20)
        per_cpu[cpu] = round(statistics.median(time_workload(250)), 4)
    os.sched_setaffinity(0, set(allowed))
    return {
        "unpinned": summary(times),
        "half_second_medians": half_medians,
        "half_second_spread_pct": round(
            100 * (max(half_medians) - min(half_medians)) / statistics.median(half_medians), 2
        ),
        "per_cpu_median_ms": per_cpu,
        "per_cpu_spread_pct": round(
            100 * (max(per_cpu.values()) - min(per_cpu.values())) / statistics.median(per_cpu.values()), 2
        ),
    }


def sampler(path: str, period_s: float) -> None:
    """The host's speed over time, until killed: one line per sample (seconds since start, ms)."""
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[-1]})
    start = time.time()
    with open(path, "w") as f:
        f.write(f"# pinned to cpu {cpus[-1]}, started {start:.3f}\n")
        while True:
            t0 = time.perf_counter()
            workload()
            ms = (time.perf_counter() - t0) * 1000
            f.write(f"{time.time() - start:.3f},{ms:.4f}\n")
            f.flush()
            time.sleep(period_s)


def host_facts() -> dict:
    facts: dict[str, object] = {"cpus": os.cpu_count(), "affinity": len(os.sched_getaffinity(0))}
    try:
        info = Path("/proc/cpuinfo").read_text()
        facts["model"] = next(
            (line.split(":", 1)[1].strip() for line in info.splitlines() if "model name" in line), None
        )
        facts["mhz"] = sorted(
            {line.split(":", 1)[1].strip() for line in info.splitlines() if "cpu MHz" in line}
        )[:4]
        siblings = set()
        for cpu in range(os.cpu_count() or 0):
            p = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
            if p.exists():
                siblings.add(p.read_text().strip())
        facts["thread_siblings"] = sorted(siblings)
        facts["loadavg"] = Path("/proc/loadavg").read_text().strip()
    except OSError as exc:
        facts["error"] = str(exc)
    return facts


class Collections:
    """The collector's runs (generation, ms) while installed."""

    def __init__(self) -> None:
        self.runs: list[tuple[int, float]] = []
        self._start = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.runs.append((info["generation"], (time.perf_counter() - self._start) * 1000))

    def take(self) -> dict[str, float]:
        runs, self.runs = self.runs, []
        out: dict[str, float] = {}
        for gen in (0, 1, 2):
            mine = [ms for g, ms in runs if g == gen]
            out[f"gen{gen}_count"] = len(mine)
            out[f"gen{gen}_ms"] = round(sum(mine), 3)
        return out


def launch_us(device, calls: int = 400) -> float | None:
    """Host time per launch of a tiny CUDA op, back to back (median of 4 blocks)."""
    import torch

    if device.type != "cuda":
        return None
    x = torch.zeros(1, device=device)
    blocks = []
    for _ in range(4):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            x.add_(1)
        blocks.append((time.perf_counter() - start) * 1e6 / calls)
    torch.cuda.synchronize()
    return round(statistics.median(blocks), 3)


def timed_round(step, steps: int, device) -> dict[str, float]:
    """truth_probe's timed loop (CUDA events at step boundaries, the host's time per call), with the
    thread's CPU time and the wall time around it."""
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize()
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    event, host = timed(step, steps, device)
    cpu1, wall1 = time.thread_time(), time.perf_counter()
    return {
        "event_p50_ms": round(statistics.median(event), 3),
        "event_mean_ms": round(statistics.fmean(event), 3),
        "host_p50_ms": round(statistics.median(host), 3),
        "thread_cpu_ms_per_step": round((cpu1 - cpu0) * 1000 / steps, 3),
        "wall_ms_per_step": round((wall1 - wall0) * 1000 / steps, 3),
        "event_ms": [round(x, 3) for x in event],
    }


def gc_rounds(spec: str, args, device) -> dict:
    import torch

    name, batch = spec.split(":")
    started = time.perf_counter()
    step = bare_step(name, int(batch), args.mode, device, args.image_size)
    for _ in range(args.warmup):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    compile_s = time.perf_counter() - started
    print(f"{name}: compiled and warmed up in {compile_s:.1f} s", flush=True)
    collections = Collections()
    gc.callbacks.append(collections)
    rounds = []
    for r in range(args.rounds):
        mode = ("gc_on", "gc_off")[r % 2] if (r // 2) % 2 == 0 else ("gc_off", "gc_on")[r % 2]  # ABBA
        host_ms = round(statistics.median(time_workload(30)), 4)
        launch = launch_us(device)
        if mode == "gc_off":
            gc.collect()
            gc.freeze()
            gc.disable()
        collections.take()
        found = timed_round(step, args.steps, device)
        found.update(collections.take())
        if mode == "gc_off":
            gc.enable()
            gc.unfreeze()
        found.update(
            {"round": r, "mode": mode, "host_workload_ms": host_ms, "launch_us": launch, "t": time.time()}
        )
        rounds.append(found)
        print(
            f"  round {r:2d} {mode:6s} step p50 {found['event_p50_ms']:8.3f} ms  host call {found['host_p50_ms']:8.3f}"
            f"  thread cpu {found['thread_cpu_ms_per_step']:8.3f}  workload {host_ms:.4f} ms  launch {launch} us"
            f"  gc0/1/2 {found['gen0_count']}/{found['gen1_count']}/{found['gen2_count']} ({found['gen0_ms'] + found['gen1_ms'] + found['gen2_ms']:.1f} ms)",
            flush=True,
        )
    gc.callbacks.remove(collections)
    by_mode = {}
    for mode in ("gc_on", "gc_off"):
        mine = [r for r in rounds if r["mode"] == mode]
        steps = [x for r in mine for x in r["event_ms"]]
        by_mode[mode] = {
            **summary(steps),
            "round_p50_ms": [r["event_p50_ms"] for r in mine],
            "gc_ms_per_round": [r["gen0_ms"] + r["gen1_ms"] + r["gen2_ms"] for r in mine],
        }
    pairs = [(r["host_workload_ms"], r["event_p50_ms"]) for r in rounds]
    return {
        "model": name,
        "batch": int(batch),
        "compile_and_warmup_s": round(compile_s, 1),
        "rounds": rounds,
        "by_mode": by_mode,
        "corr_host_workload_vs_step": round(statistics.correlation(*zip(*pairs, strict=True)), 3)
        if len(pairs) > 2
        else None,
        "corr_launch_vs_step": round(
            statistics.correlation([r["launch_us"] for r in rounds], [r["event_p50_ms"] for r in rounds]), 3
        )
        if device.type == "cuda" and len(rounds) > 2
        else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True)
    parser.add_argument("--models", nargs="*", default=["mobilenetv3_large_100:256", "resnet50:64"])
    parser.add_argument("--mode", default="default")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--python-seconds", type=float, default=8.0)
    parser.add_argument("--smoke", action="store_true", help="short phases (a check of the script)")
    parser.add_argument("--sampler", nargs=2, metavar=("PATH", "PERIOD_S"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sampler:
        sampler(args.sampler[0], float(args.sampler[1]))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.smoke:
        args.python_seconds, args.rounds, args.steps, args.warmup = 1.0, 4, 3, 2
    background = subprocess.Popen(
        [sys.executable, __file__, "--out", str(out), "--sampler", str(out / "host_sampler.csv"), "0.05"]
    )
    report: dict[str, object] = {"args": vars(args), "host": host_facts()}
    try:
        report["python_before"] = python_speed(args.python_seconds)
        print("python workload:", json.dumps(report["python_before"]), flush=True)
        import torch

        device = torch.device(args.device, 0) if args.device == "cuda" else torch.device(args.device)
        report["torch"] = torch.__version__
        if device.type == "cuda":
            torch.cuda.set_device(device)
            report["gpu"] = torch.cuda.get_device_name(device)
        report["models"] = [gc_rounds(spec, args, device) for spec in args.models]
        report["python_after"] = python_speed(args.python_seconds)
        print("python workload after:", json.dumps(report["python_after"]), flush=True)
    finally:
        background.kill()
        (out / "host_probe.json").write_text(json.dumps(report, indent=1, default=str))
    for m in report.get("models", []):
        print(
            f"{m['model']}: gc_on p50 {m['by_mode']['gc_on']['p50']} spread {m['by_mode']['gc_on']['spread_pct']}%"
            f" | gc_off p50 {m['by_mode']['gc_off']['p50']} spread {m['by_mode']['gc_off']['spread_pct']}%"
            f" | corr(host workload, step) {m['corr_host_workload_vs_step']} corr(launch, step) {m['corr_launch_vs_step']}"
        )
    print("host_probe done")


if __name__ == "__main__":
    main()
