"""A plain inference loop, timed per call as seed 004 times it: the reference for the pipeline's
`latency/*` (scenario=inference). No Hydra, no worker, no pipeline code: a timm model in eval mode, fp32
weights, every call under torch.inference_mode() and bf16 autocast (the pipeline's precision=amp),
optionally torch.compile'd; warm-up calls first, then each measured call alone: synchronize, host
clock, the call, synchronize, host clock. Prints one JSON line with the median and mean per call.
`--batch-sizes 1,8,32`: a measured call is a cycle, one call of each size back to back (the pipeline's
`scenario.batch_sizes`), with its samples per second at the median cycle.

    python benchmarks/latency_loop.py --model resnet152 --batch-size 1 --compile reduce-overhead
    python benchmarks/latency_loop.py --model resnet50 --batch-sizes 1,8,32 --compile default --dynamic true
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def model_and_inputs(
    args: argparse.Namespace, sizes: list[int]
) -> tuple[torch.device, torch.nn.Module, list[torch.Tensor]]:
    """The timm model `args.model` in eval mode on `args.device`, torch.compile'd unless `args.compile` is
    eager (with `args.dynamic`), and one random image batch of each size."""
    import timm

    device = torch.device(args.device)
    torch.manual_seed(0)
    model = timm.create_model(args.model, pretrained=False).to(device).eval().requires_grad_(False)
    if args.compile != "eager":
        dynamic = {"true": True, "false": False, "none": None}[args.dynamic]
        mode = {} if args.compile == "default" else {"mode": args.compile}
        model = torch.compile(model, dynamic=dynamic, **mode)
    return device, model, [torch.randn(b, 3, args.image_size, args.image_size, device=device) for b in sizes]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="resnet152")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--batch-sizes", default="", help="comma-separated: a call is one of each, in turn")
    parser.add_argument("--dynamic", choices=["true", "false", "none"], default="none")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--compile", choices=["eager", "default", "reduce-overhead"], default="eager")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()

    sizes = [int(b) for b in args.batch_sizes.split(",")] if args.batch_sizes else [args.batch_size]
    device, model, xs = model_and_inputs(args, sizes)
    cuda = device.type == "cuda"

    def call() -> None:
        for x in xs:
            if args.compile == "reduce-overhead":
                torch.compiler.cudagraph_mark_step_begin()
            with torch.autocast(device.type, dtype=torch.bfloat16):
                model(x)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    times = []
    with torch.inference_mode():
        for _ in range(args.warmup):
            call()
        for _ in range(args.calls):
            sync()
            start = time.perf_counter()
            call()
            sync()
            times.append((time.perf_counter() - start) * 1000)
    print(
        json.dumps(
            {
                "config": f"{args.model}/bs{'+'.join(map(str, sizes))}/{args.compile}/dynamic={args.dynamic}",
                "latency_ms_p50": statistics.median(times),
                "samples_per_s_at_p50": sum(sizes) * 1000 / statistics.median(times),
                "latency_ms_mean": statistics.fmean(times),
                "calls": args.calls,
                "gpu": torch.cuda.get_device_name() if cuda else "cpu",
                "torch": torch.__version__,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
