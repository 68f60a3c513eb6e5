"""Why is it slow or broken: graph breaks (with source lines), recompiles, CUDA-graph skips, host-device
syncs in the step, profiler traces, FLOPs and MFU, compile time by phase, inductor cache state.

Everything here runs in the worker, outside the timed loop: recorders listen while compilation happens
in the warm-up; syncs, profiles and FLOPs are counted in extra steps (or on the meta device) after the
measurement, so they never disturb a measured step.
"""

from __future__ import annotations

import contextlib
import logging
import re
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

# ------------------------------------------------------------------------------ compile log records
_BREAK_AT = re.compile(r"Graph break.*? in user code at (?P<loc>\S+:\d+)")


class CompileLogRecorder(logging.Handler):
    """Collects torch's own graph-break, recompile and perf-hint (CUDA-graph skip) log records while
    compilation happens. torch also prints them to the worker log, like `TORCH_LOGS=graph_breaks`."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.breaks: list[dict[str, str]] = []
        self.recompiles: list[str] = []
        self.perf_hints: list[str] = []

    def __enter__(self) -> CompileLogRecorder:
        import torch._logging

        torch._logging.set_logs(graph_breaks=True, recompiles=True, perf_hints=True)
        for name in ("torch._dynamo", "torch._inductor"):
            logging.getLogger(name).addHandler(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        for name in ("torch._dynamo", "torch._inductor"):
            logging.getLogger(name).removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:
            return
        if record.name.endswith("__graph_breaks"):
            match = _BREAK_AT.search(message)
            lines = [
                ln.strip() for ln in message.split("Graph Break Reason:", 1)[-1].splitlines() if ln.strip()
            ]
            if lines and lines[0].startswith("Encountered graph break when attempting to trace"):
                lines = lines[1:]  # generic; the next lines say what failed and why
            text = " ".join(ln for ln in lines[:2] if not ln.startswith(("User code", "For more details")))
            self.breaks.append({"location": match.group("loc") if match else "?", "reason": text[:400]})
        elif record.name.endswith("__recompiles"):
            self.recompiles.append(message.strip()[:600])
        elif record.name.endswith("__perf_hints"):
            self.perf_hints.append(message.strip()[:400])

    def summary(self) -> dict[str, Any]:
        distinct = Counter((b["location"], b["reason"]) for b in self.breaks)
        return {
            "graph_breaks": [
                {"location": loc, "reason": reason, "count": n} for (loc, reason), n in distinct.most_common()
            ],
            "recompiles": self.recompiles,
            "cudagraph_skips": [h for h in self.perf_hints if "cudagraph" in h.lower()],
        }


def compile_phases() -> dict[str, float]:
    """Compile seconds by phase, from torch's CompilationMetrics (where this torch version has them):
    Dynamo tracing, AOTAutograd, inductor (of which code generation and Triton compilation), autotuning
    and CUDA-graph recording."""
    from torch._dynamo.utils import get_compilation_metrics

    def total(name: str, forward_only: bool | None = None) -> float:
        s = 0.0
        for e in get_compilation_metrics():
            is_forward = getattr(e, "is_forward", True) is not False
            if forward_only is None or forward_only == is_forward:
                s += getattr(e, name, None) or 0
        return s

    frame = total("entire_frame_compile_time_s", True)
    backend = total("backend_compile_time_s", True)
    aot_us = total("aot_autograd_cumulative_compile_time_us", True)
    inductor_fwd_us = total("inductor_cumulative_compile_time_us", True)
    inductor_bwd_us = total("inductor_cumulative_compile_time_us", False)
    return {
        "compile_dynamo_s": max(0.0, frame - backend),
        "compile_aot_autograd_s": max(0.0, (aot_us - inductor_fwd_us) / 1e6),
        "compile_inductor_s": (inductor_fwd_us + inductor_bwd_us) / 1e6,
        "compile_codegen_s": total("inductor_code_gen_cumulative_compile_time_us") / 1e6,
        "compile_triton_s": total("triton_compile_time_us") / 1e6,
        "compile_autotune_s": (
            total("compile_time_autotune_time_us") + total("runtime_triton_autotune_time_us")
        )
        / 1e6,
        "compile_backward_s": total("backward_cumulative_compile_time_us", False) / 1e6,
        "cudagraph_record_s": total("runtime_cudagraphify_time_us") / 1e6,
    }


def cache_state() -> dict[str, Any]:
    """Inductor FX-graph and AOTAutograd cache hits and misses in this process. The state says what the
    on-disk cache held when the job started, judged by the first graph that used it: `warm` (found),
    `cold` (not found; later graphs of the same job may hit what it wrote), `unused` (no inductor)."""
    from torch._dynamo.utils import counters, get_compilation_metrics

    hits = counters["inductor"].get("fxgraph_cache_hit", 0) + counters["aot_autograd"].get(
        "autograd_cache_hit", 0
    )
    misses = counters["inductor"].get("fxgraph_cache_miss", 0) + counters["aot_autograd"].get(
        "autograd_cache_miss", 0
    )
    first = next(
        (
            e
            for e in get_compilation_metrics()
            if getattr(e, "inductor_fx_local_cache_hit_count", None)
            or getattr(e, "inductor_fx_local_cache_miss_count", None)
        ),
        None,
    )
    if not hits and not misses:
        state = "unused"
    elif first is not None:
        state = "cold" if first.inductor_fx_local_cache_miss_count else "warm"
    else:
        state = "cold" if misses else "warm"
    return {"inductor_cache_hits": hits, "inductor_cache_misses": misses, "inductor_cache": state}


def frames_failed() -> list[dict[str, str]]:
    """Frames whose compilation failed (torch ran them eagerly, or raised)."""
    from torch._dynamo.utils import get_compilation_metrics

    return [
        {
            "frame": f"{e.co_filename}:{e.co_firstlineno} {e.co_name}",
            "fail": f"{e.fail_type}: {e.fail_reason}"[:400],
        }
        for e in get_compilation_metrics()
        if getattr(e, "fail_type", None)
    ]


def reset_compile_state() -> None:
    """Forget what an analysis compiled, so the job's own statistics start from zero."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    if hasattr(torch._dynamo.utils, "clear_compilation_metrics"):
        torch._dynamo.utils.clear_compilation_metrics()


# ------------------------------------------------------------------------------ explain
def explain(forward_loss: Callable[[Any], torch.Tensor], batch: Any) -> str:
    """`torch._dynamo.explain` on the model + loss for one batch, as text."""
    output = torch._dynamo.explain(forward_loss)(batch)
    lines = [
        f"graphs: {output.graph_count}",
        f"graph breaks: {output.graph_break_count}",
        f"ops: {output.op_count}",
        "",
    ]
    for i, reason in enumerate(output.break_reasons, 1):
        frames = [f"{f.filename}:{f.lineno}" for f in reason.user_stack] if reason.user_stack else []
        lines.append(f"break {i}: {frames[-1] if frames else '?'}")
        lines.extend("    " + line for line in str(reason.reason).strip().splitlines()[:6])
    lines += ["", "full report:", str(output)]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ host-device syncs
def _roots() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(stdlib dirs, library dirs): the interpreter's own code, and installed packages plus this harness."""
    import sysconfig

    paths = sysconfig.get_paths()
    stdlib = tuple({paths["stdlib"], paths.get("platstdlib", paths["stdlib"])})
    libraries = tuple(
        {paths["purelib"], paths["platlib"], str(Path(torch.__file__).parent), str(Path(__file__).parent)}
    )
    return stdlib, libraries


def _user_frame(stack: list[traceback.FrameSummary]) -> str:
    """Where a sync comes from: the innermost frame of the user's code (model, loss: neither the
    interpreter's stdlib, nor an installed package, nor this harness); failing that, the innermost
    library frame (e.g. inside torch.optim), never the warnings machinery that reported it."""
    stdlib, libraries = _roots()
    outside_stdlib = [
        f for f in stack if not f.filename.startswith(stdlib) and not f.filename.startswith("<frozen")
    ]
    user = [f for f in outside_stdlib if not f.filename.startswith(libraries)]
    frame = (user or outside_stdlib or stack)[-1]
    return f"{frame.filename}:{frame.lineno}: {(frame.line or '').strip()}"


# What c10 warns on every host-device sync under `set_sync_debug_mode("warn")`. Only this counts: the
# mode's own one-time notice ("... does not yet detect all synchronizing operations") is not a sync.
SYNC_WARNING = "called a synchronizing CUDA operation"


@contextlib.contextmanager
def recording_sync_warnings() -> Iterator[list[str]]:
    """Inside the block, the source line of every sync warning torch emits is appended to the yielded
    list (see :func:`_user_frame`); every other warning is passed on as usual."""
    locations: list[str] = []
    previous = warnings.showwarning

    def record(
        message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
    ) -> None:
        if SYNC_WARNING in str(message):
            locations.append(_user_frame(traceback.extract_stack()[:-1]))
        else:
            previous(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        try:
            yield locations
        finally:
            warnings.showwarning = previous


def count_syncs(run_step: Callable[[], None], device: torch.device) -> dict[str, Any]:
    """Host-device syncs during one training step, from `torch.cuda.set_sync_debug_mode('warn')`, with
    the source line of each. CUDA only: on the CPU there is no device to wait for."""
    if device.type != "cuda":
        return {"note": "host-device syncs are counted on CUDA devices only"}
    torch.cuda.synchronize(device)
    with recording_sync_warnings() as locations:
        torch.cuda.set_sync_debug_mode("warn")
        try:
            run_step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize(device)
    return {"count": len(locations), "locations": dict(Counter(locations).most_common())}


# ------------------------------------------------------------------------------ profiler
def profile_steps(run_step: Callable[[], None], device: torch.device, out_dir: Path, active: int = 3) -> str:
    """A torch.profiler trace of `active` steps after one skipped and one warm-up step (Chrome/Perfetto
    JSON, readable by TensorBoard's profiler plugin) and the table of the top kernels by self time."""
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    out_dir.mkdir(parents=True, exist_ok=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=active),
        on_trace_ready=tensorboard_trace_handler(str(out_dir)),
        record_shapes=True,
    ) as prof:
        for _ in range(2 + active):
            run_step()
            prof.step()
    averages = prof.key_averages()
    for key in (
        ("self_device_time_total", "self_cuda_time_total")
        if device.type == "cuda"
        else ("self_cpu_time_total",)
    ):
        try:
            table = averages.table(sort_by=key, row_limit=25)
            break
        except (AttributeError, KeyError, ValueError):
            continue
    else:
        table = averages.table(row_limit=25)
    (out_dir / "top_kernels.txt").write_text(table)
    return table


# ------------------------------------------------------------------------------ FLOPs and MFU
# Dense peak TFLOP/s from the vendors' datasheets (no sparsity), by precision. An unknown GPU gets no MFU.
PEAK_TFLOPS: list[tuple[str, dict[str, float]]] = [
    (r"H100.*PCIe", {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.2}),
    (r"H100 NVL", {}),
    (r"GH200|H200|H100", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}),
    (r"A100", {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}),
    (r"L40S", {"bf16": 362.05, "fp16": 362.05, "tf32": 183.0, "fp32": 91.6}),
    (r"\bL4\b", {"bf16": 121.0, "fp16": 121.0, "tf32": 60.0, "fp32": 30.3}),
    (r"V100", {"fp16": 125.0, "fp32": 15.7}),
]


def precision_key(precision_cfg: dict[str, Any]) -> str:
    """Which peak applies: the dtype the matmuls run in."""
    if precision_cfg.get("autocast_dtype") == "float16":
        return "fp16"
    if precision_cfg.get("autocast_dtype") == "bfloat16" or precision_cfg.get("param_dtype") == "bfloat16":
        return "bf16"
    return "tf32" if precision_cfg.get("tf32") else "fp32"


def peak_tflops(gpu_name: str | None, precision_cfg: dict[str, Any]) -> tuple[float | None, str]:
    """(peak TFLOP/s, note). The note says why there is no peak when there is none."""
    key = precision_key(precision_cfg)
    if not gpu_name:
        return None, "no MFU: not a GPU run"
    for pattern, peaks in PEAK_TFLOPS:
        if re.search(pattern, gpu_name):
            if key in peaks:
                return peaks[key], f"peak {peaks[key]} TFLOP/s ({key}, dense, datasheet) for {gpu_name}"
            return None, f"no MFU: no {key} peak known for {gpu_name}"
    return None, f"no MFU: {gpu_name} is not in the peak table (pipeline/diagnose.py PEAK_TFLOPS)"


def count_flops(model_cfg: dict[str, Any], loss_cfg: dict[str, Any], batch_size: int) -> int:
    """FLOPs of one training step's forward and backward (teacher included), counted by
    torch.utils.flop_counter on tensors without data: shapes only, no memory, no time. Meta tensors
    first; where model code asks a tensor for a value (HF's causal-mask code calls `.all()` on the
    position ids), fake tensors, for which such code skips its data checks. timm's models need meta:
    they read values while building (drop-path rates) that fake tensors cannot give."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    try:
        with torch.device("meta"):
            return _count_step_flops(model_cfg, loss_cfg, batch_size)
    except RuntimeError as meta_error:
        try:
            with FakeTensorMode(allow_non_fake_inputs=True):
                return _count_step_flops(model_cfg, loss_cfg, batch_size)
        except Exception as fake_error:
            raise RuntimeError(f"meta: {meta_error}; fake: {fake_error}") from fake_error


def _count_step_flops(model_cfg: dict[str, Any], loss_cfg: dict[str, Any], batch_size: int) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    from losses import build_loss
    from models import build_model

    spec = model_cfg["input"]
    model = build_model(model_cfg).train()
    loss = build_loss(loss_cfg, spec)
    if spec["kind"] == "image":
        inputs = torch.randn(batch_size, spec["channels"], spec["height"], spec["width"])
        targets = torch.randint(spec["num_classes"], (batch_size,))
    else:
        inputs = torch.randint(spec["vocab_size"], (batch_size, spec["seq_len"]))
        targets = torch.randint(
            spec["vocab_size"] if spec["target"] != "class" else spec["num_classes"],
            (batch_size, spec["seq_len"]) if spec["target"] != "class" else (batch_size,),
        )
    batch = {"inputs": inputs, "targets": targets}
    with FlopCounterMode(display=False) as counter:
        loss(batch, model(inputs)).backward()
    return int(counter.get_total_flops())


def mfu_metrics(
    flops: int, step_time_ms: float, gpu_name: str | None, precision_cfg: dict[str, Any]
) -> tuple[dict[str, float], str]:
    achieved = flops / (step_time_ms / 1000) / 1e12
    metrics = {"flops_per_step": float(flops), "achieved_tflops": achieved}
    peak, note = peak_tflops(gpu_name, precision_cfg)
    if peak:
        metrics["mfu"] = achieved / peak
    return metrics, note
