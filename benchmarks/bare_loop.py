"""A bare, hand-written training loop: the reference the pipeline's step times are checked against.

No Hydra, no worker, no pipeline code: a timm model (ViT-B/16 by default, any timm name), Adam,
cross-entropy, the same precision settings, `--num-batches` batches made once on the GPU and rotated.
Warm-up steps run first; then the measured loop is timed two independent ways at once: one synchronized
wall clock around all steps (its figure is the mean step time) and a CUDA event at every step boundary
(their median, as the pipeline reports). The host's own time per step (the Python call, not synced)
says how much of a step the host spends launching work: on a launch-bound model it is the step time.

    python benchmarks/bare_loop.py --model resnet50 --batch-size 64 --precision amp --compile default
prints one JSON line: {"config": ..., "step_time_ms_mean": ..., "step_time_ms_p50": ..., "host_ms_p50": ...,
"compile_time_s": ..., "peak_mem_allocated_gib": ...}; `--profile-dir DIR` also records a torch.profiler
trace of a few steps after the measured ones (the same schedule as the pipeline's `profile=true`).
`--alternate-cpus 0-4` then times `--rounds` pairs of rounds of `--round-steps` steps, every thread on all
the process's CPUs in one and on those only in the other, the order alternating: whether the CPUs a
step is launched from change it, each pair under the same host state (its JSON key `alternate`).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import time

import torch


def set_tf32(enabled: bool) -> None:
    mode = "tf32" if enabled else "ieee"
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        torch.backends.cuda.matmul.fp32_precision = mode
        torch.backends.cudnn.conv.fp32_precision = mode
    else:
        torch.backends.cuda.matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="vit_base_patch16_224")
    parser.add_argument("--precision", choices=["amp", "fp32"], default="amp")
    parser.add_argument(
        "--compile",
        choices=["eager", "default", "reduce-overhead", "max-autotune-no-cudagraphs"],
        default="eager",
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--steps", type=int, default=100, help="all steps, warm-up included (as trainer.steps)"
    )
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--num-batches", type=int, default=4)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--profile-dir", default=None, help="record a profiler trace of 3 steps here")
    parser.add_argument("--alternate-cpus", default=None, help="e.g. 0-4: all CPUs against these, alternated")
    parser.add_argument("--rounds", type=int, default=40, help="pairs of rounds with --alternate-cpus")
    parser.add_argument("--round-steps", type=int, default=10)
    args = parser.parse_args()

    import timm

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    set_tf32(False)
    torch.manual_seed(args.seed)
    model = timm.create_model(args.model, pretrained=False).to(device).train()
    setup_started = time.perf_counter()  # compile time counts the torch.compile call too, as the pipeline's
    step_model = (
        model
        if args.compile == "eager"
        else torch.compile(model, **({} if args.compile == "default" else {"mode": args.compile}))
    )
    setup_s = time.perf_counter() - setup_started
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    size = args.image_size
    batches = [
        (
            torch.randn(args.batch_size, 3, size, size, device=device),
            torch.randint(0, 1000, (args.batch_size,), device=device),
        )
        for _ in range(args.num_batches)
    ]
    autocast = args.precision == "amp"

    def step(i: int) -> None:
        inputs, targets = batches[i % len(batches)]
        if args.compile == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            loss = torch.nn.functional.cross_entropy(step_model(inputs), targets)
        loss.backward()
        optimizer.step()

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    sync()
    start = time.perf_counter()
    for i in range(args.warmup):
        step(i)
    sync()
    warmup_s = time.perf_counter() - start
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    measured = args.steps - args.warmup
    events = [torch.cuda.Event(enable_timing=True) for _ in range(measured + 1)] if cuda else []
    host_ms: list[float] = []
    start = time.perf_counter()
    if cuda:
        events[0].record()
    for n, i in enumerate(range(args.warmup, args.steps)):
        called = time.perf_counter()
        step(i)
        host_ms.append((time.perf_counter() - called) * 1000)
        if cuda:
            events[n + 1].record()
    sync()
    mean_ms = (time.perf_counter() - start) * 1000 / measured
    step_ms = [a.elapsed_time(b) for a, b in itertools.pairwise(events)] if cuda else host_ms
    if args.profile_dir:
        profile(lambda: step(0), args.profile_dir, cuda)
    alternate = (
        alternate_cpus(step, sync, cpu_set(args.alternate_cpus), args.rounds, args.round_steps)
        if args.alternate_cpus
        else None
    )
    print(
        json.dumps(
            {
                "config": f"{args.model}/bs{args.batch_size}/{args.precision}/{args.compile}",
                "batch_size": args.batch_size,
                "measured_steps": measured,
                "step_time_ms_mean": mean_ms,
                "step_time_ms_p50": statistics.median(step_ms),
                "step_time_ms_p10": quantile(step_ms, 0.1),
                "step_time_ms_p90": quantile(step_ms, 0.9),
                "host_ms_p50": statistics.median(host_ms),
                "compile_time_s": setup_s + max(0.0, warmup_s - args.warmup * mean_ms / 1000),
                "peak_mem_allocated_gib": torch.cuda.max_memory_allocated() / 1024**3 if cuda else None,
                "gpu": torch.cuda.get_device_name() if cuda else "cpu",
                "torch": torch.__version__,
                **({"alternate": alternate} if alternate else {}),
            }
        ),
        flush=True,
    )


def quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def cpu_set(spec: str) -> set[int]:
    """`0-4,8` -> {0, 1, 2, 3, 4, 8} (taskset's list form)."""
    cpus: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def run_on(cpus: set[int]) -> None:
    """Every thread of this process (autograd's device threads too) on `cpus`."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(tid), cpus)


def alternate_cpus(step, sync, pinned: set[int], rounds: int, round_steps: int) -> dict:
    """Mean step time (synchronized wall clock) per round on all CPUs and on `pinned`, alternated."""
    every = os.sched_getaffinity(0)
    times: dict[str, list[float]] = {"all": [], "pinned": []}
    for r in range(rounds):
        for name in ("all", "pinned") if r % 2 == 0 else ("pinned", "all"):
            run_on(every if name == "all" else pinned)
            sync()
            start = time.perf_counter()
            for i in range(round_steps):
                step(i)
            sync()
            times[name].append((time.perf_counter() - start) * 1000 / round_steps)
    run_on(every)
    ratios = sorted(p / a for p, a in zip(times["pinned"], times["all"], strict=True))
    return {
        "cpus": sorted(pinned),
        "of": len(every),
        "rounds": rounds,
        "round_steps": round_steps,
        "all_ms_median": statistics.median(times["all"]),
        "pinned_ms_median": statistics.median(times["pinned"]),
        "pinned_over_all_median": statistics.median(ratios),
        "pinned_over_all_p10": quantile(ratios, 0.1),
        "pinned_over_all_p90": quantile(ratios, 0.9),
        "all_ms": times["all"],
        "pinned_ms": times["pinned"],
    }


def profile(run_step, out_dir: str, cuda: bool) -> None:
    """The pipeline's own schedule (pipeline/diagnose/profiler.py): one step skipped, one warm-up, 3 active."""
    from torch.profiler import ProfilerActivity, schedule, tensorboard_trace_handler

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch.profiler.profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=3),
        on_trace_ready=tensorboard_trace_handler(out_dir),
        record_shapes=True,
    ) as prof:
        for _ in range(5):
            run_step()
            prof.step()


if __name__ == "__main__":
    main()
