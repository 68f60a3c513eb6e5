"""A plain loop over one inference unit (a timm model, one call of each batch size in turn: the pipeline's
`scenario.batch_sizes`), timed three ways, interleaved round by round in one process so that a host whose
CPU speed moves weighs on every way alike; no Hydra, no worker, no pipeline code:

- `sync`: each unit alone, synchronized before and after, host clock (the pipeline's latency/*);
- `b2b N gap G`: a timed round as the pipeline's Timer runs one: synchronize, one untimed lead-in unit,
  G ms of host work, a start event, N units back to back with an end event; the round's time per unit
  (the pipeline's step/* with N units a round, and the host's work between lead-in and start);
- `b2b N rotated`: the same with no gap, each call on the next of `--rotate` batches of its size (the
  pipeline's data.num_batches rotation) rather than on one batch.

With the medians, `host_cpu_ms`: the process's CPU time per unit over the `b2b` rounds of the most units
(near the unit's time: launch-bound); `gc`: the garbage collector's passes over the timed rounds and the
time they took, per generation; `allocator`: the CUDA caching allocator's device allocations, frees and
retries over them. `--eager-between` runs the model's eager copy (one unit, synchronized) before each way's
round, as the pipeline's paired rounds do; `--gc-freeze` moves every object alive after the warm-up out of
the collector's reach (`gc.freeze()`).

Prints one JSON line: each way's median over the rounds, in ms per unit.

    python benchmarks/rounds_loop.py --model resnet50 --batch-sizes 32,64,128 --units 1,9 --gaps-ms 0,3
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import statistics
import time

import torch
from latency_loop import model_and_inputs  # this folder's: the same model, inputs and compile


def spin(ms: float) -> None:
    """Host work that keeps the CPU busy for `ms` (what the pipeline's counters' reads were)."""
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-sizes", default="32,64,128")
    parser.add_argument("--dynamic", choices=["true", "false", "none"], default="false")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--compile", choices=["eager", "default"], default="default")
    parser.add_argument("--units", default="1,9", help="units per back-to-back round, comma-separated")
    parser.add_argument("--gaps-ms", default="0,3", help="host work between lead-in and start, ms")
    parser.add_argument("--rotate", type=int, default=8, help="batches of each size the rotated way cycles")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--eager-between", action="store_true", help="an eager unit before each round")
    parser.add_argument("--gc-freeze", action="store_true", help="gc.freeze() after the warm-up")
    args = parser.parse_args()

    sizes = [int(b) for b in args.batch_sizes.split(",")]
    device, model, xs = model_and_inputs(args, sizes)
    cuda = device.type == "cuda"
    pools = [itertools.cycle([torch.randn_like(x) for _ in range(args.rotate)]) for x in xs]

    def unit(rotated: bool = False, run: torch.nn.Module = model) -> None:
        for x in (next(pool) for pool in pools) if rotated else xs:
            with torch.autocast(device.type, dtype=torch.bfloat16):
                run(x)

    eager = getattr(model, "_orig_mod", model)  # the compiled model's own module, run eagerly

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def synchronized() -> float:
        sync()
        start = time.perf_counter()
        unit()
        sync()
        return (time.perf_counter() - start) * 1000

    cpu_ms: list[float] = []  # host CPU per unit over the rounds of the most units

    def back_to_back(n: int, gap_ms: float, rotated: bool = False) -> float:
        """CUDA events on the GPU (the host's clock on a CPU, where ops are synchronous)."""
        events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)] if cuda else []
        sync()
        unit(rotated)  # the lead-in
        spin(gap_ms)
        if cuda:
            events[0].record()
        start = time.perf_counter()  # the round's clock on a CPU, where ops are synchronous
        cpu_start = time.process_time()
        for i in range(n):
            unit(rotated)
            if cuda:
                events[i + 1].record()
        if n == most and not gap_ms and not rotated:
            cpu_ms.append((time.process_time() - cpu_start) * 1000 / n)
        if not cuda:
            return (time.perf_counter() - start) * 1000 / n
        events[-1].synchronize()
        return events[0].elapsed_time(events[-1]) / n

    ways = {"sync": synchronized}
    units = [int(u) for u in args.units.split(",")]
    most = max(units)
    for n in units:
        for gap in (float(g) for g in args.gaps_ms.split(",")):
            ways[f"b2b {n} gap {gap:g}"] = lambda n=n, gap=gap: back_to_back(n, gap)
    ways[f"b2b {most} rotated"] = lambda: back_to_back(most, 0.0, rotated=True)
    times: dict[str, list[float]] = {name: [] for name in ways}
    passes: dict[int, list[float]] = {0: [], 1: [], 2: []}  # the collector's pauses (ms) per generation
    started: list[float] = []

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            started[:] = [time.perf_counter()]
        elif started:
            passes[info["generation"]].append((time.perf_counter() - started[0]) * 1000)

    allocator_keys = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_sync_all_streams")
    with torch.inference_mode():
        for _ in range(args.warmup):
            unit()
            if args.eager_between:
                unit(run=eager)
        if args.gc_freeze:
            gc.collect()
            gc.freeze()
        memory_before = torch.cuda.memory_stats() if cuda else {}
        gc.callbacks.append(on_gc)
        for r in range(args.rounds):
            order = list(ways) if r % 2 == 0 else list(reversed(ways))
            for name in order:
                if args.eager_between:
                    sync()
                    unit(run=eager)
                    sync()
                times[name].append(ways[name]())
        gc.callbacks.remove(on_gc)
        memory_after = torch.cuda.memory_stats() if cuda else {}
    print(
        json.dumps(
            {
                "config": f"{args.model}/bs{'+'.join(map(str, sizes))}/{args.compile}/dynamic={args.dynamic}",
                "p50_ms": {name: round(statistics.median(t), 3) for name, t in times.items()},
                "p10_p90_ms": {
                    name: [round(q, 3) for q in statistics.quantiles(t, n=10)[::8]]
                    for name, t in times.items()
                },
                "host_cpu_ms": round(statistics.median(cpu_ms), 3),
                "gc": {f"gen{g}": [len(p), round(sum(p), 2)] for g, p in passes.items()},  # [passes, ms]
                "allocator": {k: memory_after.get(k, 0) - memory_before.get(k, 0) for k in allocator_keys},
                "eager_between": args.eager_between,
                "gc_freeze": args.gc_freeze,
                "rounds": args.rounds,
                "gpu": torch.cuda.get_device_name() if cuda else "cpu",
                "torch": torch.__version__,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
