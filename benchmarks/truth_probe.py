"""Where does a compiled step lose time against a plain loop? In ONE process, the pipeline's own training
step (built by its training scenario exactly as the worker builds it) and the bare loop's step
(benchmarks/bare_loop.py's), compiled the same way, timed the same way, in alternating rounds: CUDA
events at step boundaries (median) and the host's time per step call (median). If the two agree here,
the pipeline's step is not the cause and the worker's process is; if they differ, the step is.

The process's global settings are printed next to a plain script's (`settings`), so a flag the worker
sets shows up as a difference.

    python benchmarks/truth_probe.py --model timm/resnet50 --timm-name resnet50 --batch-size 64 --mode default
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def settings() -> dict[str, object]:
    """Process-wide settings that change how a step runs (a plain script leaves them at torch's defaults)."""
    import torch

    out: dict[str, object] = {
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "num_threads": torch.get_num_threads(),
        "grad_enabled": torch.is_grad_enabled(),
        "threads": sorted(t.name for t in threading.enumerate()),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "env": {
            k: v
            for k, v in os.environ.items()
            if k.startswith(("TORCH", "PYTORCH", "CUDA", "TRITON", "NCCL"))
        },
    }
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        out["matmul.fp32_precision"] = torch.backends.cuda.matmul.fp32_precision
        out["cudnn.conv.fp32_precision"] = torch.backends.cudnn.conv.fp32_precision
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    for name, module in (("inductor", inductor_config), ("dynamo", dynamo_config)):
        copy = module.get_config_copy()
        out[f"{name}_not_default"] = {k: repr(copy[k]) for k in copy if not module._is_default(k)}
    return out


def bare_step(name: str, batch_size: int, mode: str, device, image: int):
    import timm
    import torch

    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False).to(device).train()
    compiled = (
        model if mode == "eager" else torch.compile(model, **({} if mode == "default" else {"mode": mode}))
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = [
        (
            torch.randn(batch_size, 3, image, image, device=device),
            torch.randint(0, 1000, (batch_size,), device=device),
        )
        for _ in range(4)
    ]
    state = {"i": 0}

    def step() -> None:
        inputs, targets = batches[state["i"] % 4]
        state["i"] += 1
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(compiled(inputs), targets)
        loss.backward()
        optimizer.step()

    return step


def pipeline_step(overrides: list[str], device):
    """The worker's own training step, built as pipeline/job/worker.py builds it."""
    from hydra import compose, initialize_config_dir

    from pipeline.config.schema import register_configs
    from pipeline.job.preflight import validate
    from pipeline.scenarios.protocol import Timeline, WorkerContext
    from pipeline.scenarios.train.scenario import TrainScenario

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        composed = compose("config", overrides=overrides)
    cfg = validate(composed)
    ctx = WorkerContext(
        device=device, progress=lambda *a, **k: None, out_dir=Path(tempfile.mkdtemp()), timeline=Timeline()
    )
    scenario = TrainScenario(cfg, ctx)
    scenario.precision.apply_backend_flags()
    scenario.head = scenario.prepare()
    variant, _ = scenario.make_variant("compiled", cfg.compile)
    eager, _ = scenario.make_variant("eager", cfg.compile.as_eager())
    return (lambda: variant.run_step(record=False)), (lambda: eager.run_step(record=False))


def timed(step, steps: int, device) -> tuple[list[float], list[float]]:
    import torch

    cuda = device.type == "cuda"
    events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)] if cuda else []
    host = []
    if cuda:
        events[0].record()
    for n in range(steps):
        called = time.perf_counter()
        step()
        host.append((time.perf_counter() - called) * 1000)
        if cuda:
            events[n + 1].record()
    if cuda:
        torch.cuda.synchronize()
        return [a.elapsed_time(b) for a, b in itertools.pairwise(events)], host
    return host, host


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="timm/resnet50", help="the pipeline's model config")
    parser.add_argument("--timm-name", default="resnet50", help="the same model's timm name (bare step)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--mode", default="default")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--extra", nargs="*", default=[], help="more pipeline overrides")
    args = parser.parse_args()

    import torch

    plain = settings()
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    overrides = [
        f"model={args.model}",
        f"trainer.batch_size={args.batch_size}",
        "precision=amp",
        f"compile.mode={args.mode}",
        f"device={args.device}",
        f"model.input.height={args.image_size}",  # the bare step's images, the same size
        f"model.input.width={args.image_size}",
        *args.extra,
    ]
    compiled, eager = pipeline_step(overrides, device)
    variants = {
        "pipeline": compiled,
        "bare": bare_step(args.timm_name, args.batch_size, args.mode, device, args.image_size),
        "pipeline_eager": eager,  # the paired eager copy, alternating as in a job
    }
    collections = [0]

    def count(phase: str, info: dict) -> None:
        if phase == "start" and info.get("generation") == 2:
            collections[0] += 1

    gc.callbacks.append(count)
    for name, step in variants.items():
        started = time.perf_counter()
        for _ in range(args.warmup):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        print(f"warm-up {name}: {time.perf_counter() - started:.1f} s", flush=True)
    found: dict[str, dict[str, list[float]]] = {n: {"event": [], "host": [], "rounds": []} for n in variants}
    order = list(variants)
    for r in range(args.rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            event, host = timed(variants[name], args.steps, device)
            found[name]["event"] += event
            found[name]["host"] += host
            found[name]["rounds"].append(round(statistics.median(event), 2))
    report = {
        name: {
            "event_p50_ms": statistics.median(v["event"]),
            "event_mean_ms": statistics.fmean(v["event"]),
            "host_p50_ms": statistics.median(v["host"]),
            "spread_pct": 100
            * (
                sorted(v["event"])[int(0.9 * len(v["event"]))]
                - sorted(v["event"])[int(0.1 * len(v["event"]))]
            )
            / statistics.median(v["event"]),
            "round_p50_ms": v["rounds"],
        }
        for name, v in found.items()
    }
    report["pipeline/bare"] = report["pipeline"]["event_p50_ms"] / report["bare"]["event_p50_ms"]
    report["gen2_collections_in_rounds"] = collections[0]
    report["affinity"] = sorted(os.sched_getaffinity(0))
    print(
        json.dumps(
            {"probe": vars(args), "report": report, "settings_plain": plain, "settings_after": settings()},
            default=str,
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
