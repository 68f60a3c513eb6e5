"""A bare, hand-written training loop: the reference the pipeline's step times are checked against.

No Hydra, no worker, no pipeline code: timm's ViT-B/16 (or any timm name), Adam, cross-entropy, the
same precision settings, `--num-batches` batches made once on the GPU and rotated. Warm-up steps run
first; then the measured loop is timed with one synchronized wall clock around all steps, so its
figure is the mean step time (an independent method from the pipeline's per-step CUDA events).

    python benchmarks/bare_loop.py --precision amp --compile default --steps 100 --warmup 10
prints one JSON line: {"config": ..., "step_time_ms_mean": ..., "compile_time_s": ..., "peak_mem_allocated_gib": ...}
"""

from __future__ import annotations

import argparse
import json
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
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import timm

    device = torch.device("cuda")
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
    batches = [
        (
            torch.randn(args.batch_size, 3, 224, 224, device=device),
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
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = torch.nn.functional.cross_entropy(step_model(inputs), targets)
        loss.backward()
        optimizer.step()

    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(args.warmup):
        step(i)
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - start
    torch.cuda.reset_peak_memory_stats()
    measured = args.steps - args.warmup
    start = time.perf_counter()
    for i in range(args.warmup, args.steps):
        step(i)
    torch.cuda.synchronize()
    mean_ms = (time.perf_counter() - start) * 1000 / measured
    print(
        json.dumps(
            {
                "config": f"{args.precision}/{args.compile}",
                "batch_size": args.batch_size,
                "measured_steps": measured,
                "step_time_ms_mean": mean_ms,
                "compile_time_s": setup_s + max(0.0, warmup_s - args.warmup * mean_ms / 1000),
                "peak_mem_allocated_gib": torch.cuda.max_memory_allocated() / 1024**3,
                "gpu": torch.cuda.get_device_name(),
                "torch": torch.__version__,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
