"""A plain torchrun training loop: the independent reference a distributed pipeline job's figures are
checked against (issue 44), on one or several GPUs, or gloo processes on the CPU.

    torchrun --standalone --nproc-per-node=2 benchmarks/torchrun_loop.py --model vit_b16 --parallel ddp \\
        --compile eager,default
    python benchmarks/torchrun_loop.py --model vit_b16 --compile default          # one GPU, no process group

No Hydra, no worker, no pipeline code in the loop: the model of `conf/model/<model>.yaml` (its factory in
`models/`, the same weights for the same seed), `--num-batches` batches drawn once on the device from a
seeded generator (seed + rank, as a pipeline job draws them), Adam (lr 1e-3, torch's default kernels),
cross-entropy (shifted for next-token models), `--precision amp` (bf16 autocast over float32 weights, no
grad scaler) or fp32 (TF32 off); DDP (`bucket_cap_mb` 25) or FSDP2 (`fully_shard` on each innermost run
of same-class blocks, then the root), then torch.compile as the pipeline applies it (`--scope model`:
the wrapped model; `regional`: each repeated block; `step`: the whole step), `--optimize-ddp` as
`parallel.optimize_ddp`. Each variant of `--compile` is built fresh after the last is freed (never two
side by side). Timing: `--warmup` steps, then every rank meets at a barrier and the measured steps run
back to back with a CUDA event at each step boundary (perf_counter on the CPU); per rank the mean step
(its first to last event, over the steps) and the median; the job's step is the slowest rank's.
Samples/s count the global batch (the per-rank batch x the ranks). Prints one JSON line per variant
(rank 0). NVLink multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1), set here before the process group exists unless already set.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import gzip
import inspect
import itertools
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NVLINK_MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
for _key, _value in NVLINK_MULTICAST_OFF.items():
    os.environ.setdefault(_key, _value)

import torch  # noqa: E402 - after the environment NCCL reads
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="vit_b16", help="a conf/model/<name>.yaml")
    parser.add_argument("--parallel", choices=["none", "ddp", "fsdp"], default="ddp")
    parser.add_argument("--compile", default="eager,default", help="comma-separated: eager, default, ...")
    parser.add_argument("--scope", choices=["model", "regional", "step"], default="model")
    parser.add_argument(
        "--backend", default="inductor", help="torch.compile backend (aot_eager on a CPU smoke test)"
    )
    parser.add_argument("--optimize-ddp", choices=["on", "off", "compiled_autograd"], default="on")
    parser.add_argument("--precision", choices=["amp", "fp32"], default="amp")
    parser.add_argument("--batch-size", type=int, default=None, help="per rank; default the model's")
    parser.add_argument("--steps", type=int, default=40, help="all steps, warm-up included (trainer.steps)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--num-batches", type=int, default=4)
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="auto, cuda or cpu")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch.set_num_threads (default: as started)"
    )
    parser.add_argument("--profile-dir", default=None, help="a torch.profiler trace of 3 more steps per rank")
    parser.add_argument("--out", default=None, help="also append each JSON line to this file (rank 0)")
    return parser.parse_args(argv)


# ------------------------------------------------------------------------------------------ the model


def model_spec(name: str) -> dict[str, Any]:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "model" / f"{name}.yaml"), resolve=True)  # type: ignore[return-value]


def build_model(spec: dict[str, Any]) -> nn.Module:
    """The yaml's factory, called as the pipeline calls it (name, kwargs, the input spec if it takes one)."""
    import importlib

    module, _, attr = spec["_target_"].rpartition(".")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    factory = getattr(importlib.import_module(module), attr)
    kwargs = dict(spec.get("kwargs") or {})
    if spec.get("name") is not None:
        kwargs["name"] = spec["name"]
    if "input_spec" in inspect.signature(factory).parameters:
        kwargs["input_spec"] = dict(spec["input"])
    return factory(**kwargs)


def repeated_blocks(module: nn.Module) -> list[nn.Module]:
    """The innermost runs of two or more same-class modules in a ModuleList or Sequential (ViT's blocks,
    an HF model's layers): what FSDP2 shards one by one and the regional scope compiles."""
    found: list[nn.Module] = []
    for child in module.children():
        kids = list(child.children())
        if (
            isinstance(child, (nn.ModuleList, nn.Sequential))
            and len(kids) >= 2
            and len({type(k) for k in kids}) == 1
        ):
            inner = [b for k in kids for b in repeated_blocks(k)]
            found.extend(inner or kids)
        else:
            found.extend(repeated_blocks(child))
    return found


def make_batches(
    spec: dict[str, Any], batch: int, count: int, device: torch.device, seed: int
) -> list[tuple]:
    gen = torch.Generator(device=device).manual_seed(seed)
    inp = spec["input"]
    out = []
    for _ in range(count):
        if inp["kind"] == "image":
            x = torch.randn(
                (batch, inp["channels"], inp["height"], inp["width"]), generator=gen, device=device
            )
            y = torch.randint(inp["num_classes"], (batch,), generator=gen, device=device)
        else:
            x = torch.randint(inp["vocab_size"], (batch, inp["seq_len"]), generator=gen, device=device)
            y = x.clone()
        out.append((x, y))
    return out


def loss_of(logits: torch.Tensor, targets: torch.Tensor, shift: bool) -> torch.Tensor:
    if shift:
        logits, targets = logits[:, :-1], targets[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-100)


# ------------------------------------------------------------------------------------------ one variant


def build_step(
    args: argparse.Namespace, spec: dict[str, Any], mode: str, device: torch.device
) -> tuple[Any, float]:
    """A training step for `mode` (eager or a torch.compile mode) and the seconds its compile call took."""
    import torch._dynamo

    torch.manual_seed(args.seed)
    with torch.device(device):
        model = build_model(spec)
    model = model.to(device=device, dtype=torch.float32).train()
    if args.parallel == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        torch._dynamo.config.optimize_ddp = {"on": True, "off": False, "compiled_autograd": "python_reducer"}[
            args.optimize_ddp
        ]
        torch._dynamo.config.compiled_autograd = args.optimize_ddp == "compiled_autograd" and mode != "eager"
        ids = [device.index] if device.type == "cuda" else None
        model = DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=args.bucket_cap_mb)
    elif args.parallel == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for block in repeated_blocks(model):
            fully_shard(block)
        fully_shard(model)
    lr: float | torch.Tensor = 1e-3
    extra: dict[str, Any] = {}
    if mode != "eager" and args.scope == "step":  # a traced optimizer: a tensor lr (no guard on its value)
        lr = torch.tensor(1e-3, device=device)
        if device.type == "cuda":
            extra["capturable"] = True
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, **extra)
    shift = spec["input"].get("target") == "next_token"
    autocast = args.precision == "amp"
    kwargs: dict[str, Any] = {"backend": args.backend}
    if mode != "default":
        kwargs["mode"] = mode
    started = time.perf_counter()
    forward: Any = model
    if mode != "eager" and args.scope == "model":
        forward = torch.compile(model, **kwargs)
    elif mode != "eager" and args.scope == "regional":
        for block in repeated_blocks(model):
            block.compile(**kwargs)

    def step(batch: tuple) -> torch.Tensor:
        x, y = batch
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            loss = loss_of(forward(x), y, shift)
        loss.backward()
        optimizer.step()
        return loss.detach()

    if mode != "eager" and args.scope == "step":
        step = torch.compile(step, **kwargs)
    return step, time.perf_counter() - started


def run_variant(
    args: argparse.Namespace, spec: dict[str, Any], mode: str, device: torch.device
) -> dict[str, Any]:
    cuda = device.type == "cuda"
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    batch = args.batch_size or int(spec["batch_size"])
    batches = make_batches(spec, batch, args.num_batches, device, args.seed + rank)
    step, setup_s = build_step(args, spec, mode, device)
    losses = torch.zeros(args.steps, device=device)
    cycle = itertools.cycle(batches)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    def meet() -> None:
        sync()
        if dist.is_initialized() and cuda:
            dist.barrier(device_ids=[device.index])
            sync()
        elif dist.is_initialized():
            dist.barrier()

    meet()
    started = time.perf_counter()
    for i in range(args.warmup):
        losses[i].copy_(step(next(cycle)))
    sync()
    warmup_s = time.perf_counter() - started
    measured = args.steps - args.warmup
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    meet()
    marks: list[Any] = [torch.cuda.Event(enable_timing=True) for _ in range(measured + 1)] if cuda else []
    host_ms = []
    if cuda:
        marks[0].record()
    else:
        marks.append(time.perf_counter())
    for n in range(measured):
        called = time.perf_counter()
        losses[args.warmup + n].copy_(step(next(cycle)))
        host_ms.append((time.perf_counter() - called) * 1000)
        if cuda:
            marks[n + 1].record()
        else:
            marks.append(time.perf_counter())
    sync()
    if cuda:
        laps = [a.elapsed_time(b) for a, b in itertools.pairwise(marks)]
    else:
        laps = [(b - a) * 1000 for a, b in itertools.pairwise(marks)]
    mine = {
        "mean_ms": sum(laps) / len(laps),
        "p50_ms": statistics.median(laps),
        "p10_ms": quantile(laps, 0.1),
        "p90_ms": quantile(laps, 0.9),
        "host_p50_ms": statistics.median(host_ms),
        "peak_allocated_gib": torch.cuda.max_memory_allocated(device) / 2**30 if cuda else float("nan"),
        "peak_reserved_gib": torch.cuda.max_memory_reserved(device) / 2**30 if cuda else float("nan"),
        "compile_s": setup_s + max(0.0, warmup_s - args.warmup * sum(laps) / len(laps) / 1000),
    }
    every = [{k: None if math.isnan(v) else v for k, v in r.items()} for r in gather_dicts(mine, device)]
    traces = None
    if args.profile_dir:
        traces = Path(args.profile_dir) / mode
        profile(step, cycle, device, traces, rank)
    del step, batches
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    job_mean = max(r["mean_ms"] for r in every)
    job_p50 = max(r["p50_ms"] for r in every)
    return {
        "model": args.model,
        "parallel": args.parallel,
        "world_size": world,
        "compile": mode,
        "scope": args.scope if mode != "eager" else None,
        "optimize_ddp": args.optimize_ddp if args.parallel == "ddp" and mode != "eager" else None,
        "precision": args.precision,
        "batch_per_rank": batch,
        "global_batch": batch * world,
        "measured_steps": measured,
        "step_ms_mean": job_mean,
        "step_ms_p50": job_p50,
        "samples_per_s_mean": batch * world * 1000 / job_mean,
        "samples_per_s_p50": batch * world * 1000 / job_p50,
        "ranks": every,
        "profile": str(traces) if traces else None,  # trace.rank<r>.json.gz of PROFILED_STEPS more steps
        "profiled_steps": PROFILED_STEPS if traces else 0,
        "loss_first": float(losses[0]),
        "loss_last": float(losses[-1]),
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "nvls": {k: os.environ.get(k) for k in NVLINK_MULTICAST_OFF},
    }


def quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def gather_dicts(mine: dict[str, float], device: torch.device) -> list[dict[str, float]]:
    """Every rank's figures (same keys), on every rank."""
    if not dist.is_initialized():
        return [mine]
    keys = sorted(mine)
    where = device if dist.get_backend() == "nccl" else torch.device("cpu")
    tensor = torch.tensor([mine[k] for k in keys], dtype=torch.float64, device=where)
    out = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(out, tensor)
    return [dict(zip(keys, t.tolist(), strict=True)) for t in out]


PROFILED_STEPS = 3


def profile(step: Any, cycle: Any, device: torch.device, out_dir: Path, rank: int) -> None:
    """A Chrome trace of PROFILED_STEPS more steps (after one untraced, the ranks aligned), this rank's, as
    `trace.rank<r>.json.gz`: the same view as the pipeline job's comm/trace.rank<r>.json.gz."""
    from torch.profiler import ProfilerActivity

    out_dir.mkdir(parents=True, exist_ok=True)
    step(next(cycle))
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
    if dist.is_initialized() and cuda:
        dist.barrier(device_ids=[device.index])
    elif dist.is_initialized():
        dist.barrier()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch.profiler.profile(activities=activities, record_shapes=not cuda) as prof:
        for _ in range(PROFILED_STEPS):
            step(next(cycle))
        if cuda:
            torch.cuda.synchronize(device)
    trace = out_dir / f"trace.rank{rank}.json"
    prof.export_chrome_trace(str(trace))
    with open(trace, "rb") as raw, gzip.open(f"{trace}.gz", "wb") as packed:
        packed.writelines(raw)
    trace.unlink()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    distributed = "WORLD_SIZE" in os.environ and args.parallel != "none"
    if args.parallel != "none" and not distributed:
        print("torchrun_loop: --parallel ddp/fsdp runs under torchrun (WORLD_SIZE unset)", file=sys.stderr)
        return 2
    name = args.device
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local) if name == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # TF32 off, as precision=amp and fp32
            torch.backends.cuda.matmul.fp32_precision = "ieee"
            torch.backends.cudnn.conv.fp32_precision = "ieee"
        else:
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    if args.threads:
        torch.set_num_threads(args.threads)
    if distributed:
        if device.type == "cuda":
            dist.init_process_group("nccl", device_id=device)
        else:
            dist.init_process_group("gloo")
    spec = model_spec(args.model)
    for mode in [m.strip() for m in args.compile.split(",") if m.strip()]:
        row = run_variant(args, spec, mode, device)
        if not distributed or dist.get_rank() == 0:
            line = json.dumps(row)
            print(line, flush=True)
            if args.out:
                with open(args.out, "a") as out:
                    out.write(line + "\n")
        with contextlib.suppress(Exception):
            torch._dynamo.reset()  # the next variant compiles afresh, as a new job would
    if distributed:
        # The ranks leave together, their models' DDP state gone first: a gloo rank still writing its
        # results while its peer destroys the group can abort at exit, its figures printed but its exit
        # code a failure.
        gc.collect()
        if device.type == "cuda":
            dist.barrier(device_ids=[device.index])
        else:
            dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
