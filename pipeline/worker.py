"""The worker: a fresh Python process that turns one resolved config into one result file.

    python -m pipeline.worker --config job_config.json --result result.json

It never talks to MLflow (its parent does, so a crash here is still recorded). It reports progress as
`@@progress {json}` lines on stdout and writes the result file at the end, failed or not.
"""

from __future__ import annotations

import argparse
import copy
import faulthandler
import json
import os
import sys
import time
import traceback
from typing import Any

PROGRESS_PREFIX = "@@progress "


class Progress:
    """Progress lines for the parent, at most a few per second."""

    def __init__(self, min_interval_s: float = 0.25):
        self.min_interval_s, self.last = min_interval_s, 0.0

    def __call__(self, variant: str, phase: str, done: int, total: int, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= self.min_interval_s or done == total:
            self.last = now
            print(
                PROGRESS_PREFIX
                + json.dumps({"variant": variant, "phase": phase, "done": done, "total": total}),
                flush=True,
            )


def resolve_device(name: str) -> Any:
    import torch

    from pipeline.schema import ConfigError

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                "device",
                name,
                "no CUDA device is visible to this worker (torch.cuda.is_available() is False); use device=cpu or auto",
            )
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device(name)


def classify_error(exc: BaseException, cfg: dict[str, Any]) -> tuple[str, str]:
    """(error_type, message) for a failure inside the worker."""
    import torch

    from pipeline.schema import ConfigError

    if isinstance(exc, ConfigError):
        return "ConfigError", str(exc)
    if isinstance(exc, torch.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)
    ):
        return "OutOfMemoryError", str(exc)  # a CUDA OOM, or the CPU allocator refusing
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    if (
        module.startswith("torch._dynamo")
        and cfg["compile"]["fullgraph"]
        and name in ("Unsupported", "UserError", "UncapturedHigherOrderOpError")
    ):
        return "GraphBreakInFullgraph", f"compile.fullgraph=true but Dynamo hit a graph break: {exc}"
    if module.startswith(("torch._dynamo", "torch._inductor")):
        return f"CompileError.{name}", str(exc)
    return name, str(exc)


def run_job(cfg: dict[str, Any], result: Any, progress: Progress) -> None:
    """Build everything from the config, warm up, measure, and fill in `result`.

    Order (paired mode): eager memory probe alone (then freed) -> compiled warm-up and round 1 alone
    -> eager copy warm-up -> rounds E1 C2 E2 C3 E3 ... Every memory figure comes from a phase where its
    variant is alone on the device; the timing rounds alternate so drift hits both variants alike.
    """
    import torch

    from losses import build_loss
    from models import build_model
    from pipeline import measure
    from pipeline.compile import apply_compile, needs_tensor_lr
    from pipeline.data import make_batches
    from pipeline.precision import Precision
    from pipeline.train import TrainParts, build_optimizer

    device = resolve_device(cfg["device"])
    if device.type == "cuda":
        torch.cuda.set_device(device)
    trainer, compile_cfg, model_cfg = cfg["trainer"], cfg["compile"], cfg["model"]
    compiled = compile_cfg["mode"] != "eager"
    paired = compiled and bool(cfg["benchmark"]["paired_eager"])
    warmup, measured = trainer["warmup_steps"], trainer["steps"] - trainer["warmup_steps"]
    rounds = measure.split_rounds(measured, cfg["benchmark"]["rounds"] if paired else 1)
    batch_size, spec = trainer["batch_size"], model_cfg["input"]
    every = max(1, measured // 50)

    precision = Precision.from_config(cfg["precision"])
    result.info["worker_pid"] = os.getpid()
    result.info["precision_flags"] = precision.apply_backend_flags()
    result.info["rounds"] = rounds
    result.environment = measure.environment(device)
    result.method = measure.describe_method(
        device, warmup, measured, len(rounds), paired, cfg["data"]["loader"]
    )
    memory = measure.Memory(device)
    measure.init_device_libraries(device)

    torch.manual_seed(trainer["seed"])
    initial_model = build_model(model_cfg)  # stays on the host: every variant starts from these weights
    loss = build_loss(cfg["loss"], spec).to(device=device, dtype=precision.param_dtype).train()
    result.info["parameters"] = sum(p.numel() for p in initial_model.parameters())

    def make_variant(name: str, net: torch.nn.Module, compile_settings: dict[str, Any]) -> measure.Variant:
        net = net.to(device=device, dtype=precision.param_dtype).train()
        optimizer = build_optimizer(
            net.parameters(), trainer["optimizer"], tensor_lr=needs_tensor_lr(compile_settings), device=device
        )
        parts = TrainParts(net, loss, optimizer, precision.make_scaler(device.type), precision, device)
        built = apply_compile(compile_settings, parts)
        if compile_settings is compile_cfg:
            result.info.update(
                {
                    "compiled": built.description,
                    "compile_kwargs": built.kwargs or {},
                    "compiled_regions": built.regions,
                }
            )
        batches = make_batches(cfg["data"], spec, batch_size, device, precision.input_dtype, trainer["seed"])
        losses = torch.zeros(trainer["steps"], device=device, dtype=torch.float32)
        return measure.Variant(name, built.step, batches, losses)

    eager_settings = {**compile_cfg, "mode": "eager", "optimizer": False}
    probe = None
    if paired:
        baseline = memory.allocated()
        probe = make_variant("eager", copy.deepcopy(initial_model), eager_settings)
        measure.solo_phase(probe, memory, warmup, rounds[0], device, measure.quiet, every)
        result.info["eager_probe_leak_bytes"] = measure.release(probe, memory, baseline)

    main = make_variant(
        "compiled" if compiled else "eager",
        initial_model if not paired else copy.deepcopy(initial_model),
        compile_cfg,
    )
    measure.solo_phase(main, memory, warmup, rounds[0], device, progress, every, total=measured)
    stats_after_warmup = measure.compile_stats() if compiled else None
    nvml = measure.nvml_process_memory_gib(device)

    eager = None
    if paired:
        eager = make_variant("eager", initial_model, eager_settings)
        measure.warm_up(eager, warmup, device, progress)
        schedule = [(eager, rounds[0])] + [pair for n in rounds[1:] for pair in ((main, n), (eager, n))]
        for variant, n in schedule:
            measure.timed_round(variant, n, device, progress, every, measured)

    result.series["loss"] = main.losses.tolist()
    result.series["step_time_ms"] = main.step_ms
    m = measure.variant_metrics(
        main, batch_size, spec["seq_len"] if spec["kind"] == "tokens" else None, compiled
    )
    if device.type == "cuda":
        m.update(measure.memory_metrics(main))
        if nvml is not None:
            m["nvml_process_mem_gib"] = nvml
    m["loss_first"], m["loss_final"] = result.series["loss"][0], result.series["loss"][-1]
    if compiled:
        stats = measure.compile_stats()
        m["torch_compile_time_s"] = stats_after_warmup["torch_compile_time_s"]
        m["graph_breaks"], m["unique_graphs"], m["frames_compiled"] = (
            stats["graph_breaks"],
            stats["unique_graphs"],
            stats["frames_compiled"],
        )
        m["recompiles_after_warmup"] = stats["frames_compiled"] - stats_after_warmup["frames_compiled"]
        result.diagnostics["graph_break_reasons"] = stats["graph_break_reasons"]
        result.diagnostics["recompile_reasons"] = stats["recompile_reasons"]
    if eager is not None:
        m.update(measure.paired_metrics(main, eager, probe, cfg["benchmark"], device))
        result.series["eager_loss"] = eager.losses.tolist()
        result.series["eager_step_time_ms"] = eager.step_ms
    m["cpu_rss_peak_gib"] = measure.cpu_rss_peak_gib()
    result.metrics.update(m)
    progress(main.name, "done", 1, 1, force=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", required=True, help="resolved job config (JSON)")
    parser.add_argument("--result", required=True, help="where to write the result file")
    args = parser.parse_args(argv)
    faulthandler.enable()  # a segfault still leaves a Python stack in the worker log

    from pipeline.result import FAILED, FINISHED, JobResult

    with open(args.config) as f:
        cfg = json.load(f)
    result = JobResult()
    progress = Progress()
    try:
        run_job(cfg, result, progress)
        result.status = FINISHED
    except BaseException as exc:
        error_type, message = (
            classify_error(exc, cfg)
            if not isinstance(exc, KeyboardInterrupt)
            else ("Interrupted", "interrupted")
        )
        result.fail(FAILED, error_type, message, traceback.format_exc())
        _record_memory_at_failure(result)
    finally:
        result.write(args.result)
    print(
        f"worker: {result.status}"
        + (f" ({result.error.type}: {result.error.message})" if result.error else ""),
        flush=True,
    )
    return 0 if result.status == FINISHED else 1


def _record_memory_at_failure(result: Any) -> None:
    """Peak memory up to the failure (an out-of-memory error is only useful with it)."""
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            result.metrics["job_peak_mem_allocated_gib"] = torch.cuda.max_memory_allocated() / 1024**3
            result.metrics["job_peak_mem_reserved_gib"] = torch.cuda.max_memory_reserved() / 1024**3
        from pipeline.measure import cpu_rss_peak_gib

        result.metrics["cpu_rss_peak_gib"] = cpu_rss_peak_gib()
    except Exception:
        pass


if __name__ == "__main__":
    sys.exit(main())
