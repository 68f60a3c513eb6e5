"""Everything that is measured, and how: step clocks, statistics, memory, compile statistics, the
environment, and the names (with units) of every metric the pipeline logs.

How a job is measured (also written into every run's description, see :func:`describe_method`):

* Warm-up steps run first, one at a time, each timed with a wall clock after a device sync. Compilation
  happens here; no warm-up step is ever part of the step-time statistics.
* Measured steps are timed with CUDA events recorded on the stream at every step boundary (on the CPU:
  `time.perf_counter`), with no host sync inside the timed loop; the events are read once, after the
  last step. A step's time is the gap between consecutive boundary events, so the mean equals
  (last event - first event) / steps.
* Compile time = the torch.compile call itself (backend imports and set-up: `compile_setup_s`) plus
  the warm-up's wall time in excess of the steady-state median: everything from asking for
  compilation to running compiled code at full speed (graph capture, compilation, autotuning,
  CUDA-graph recording).
* Memory is read from the CUDA caching allocator's counters: peaks over the warm-up (which holds
  compilation) and over the measured steps, always while the measured variant is alone on the device
  (in paired mode an eager probe runs alone first and is freed; the compiled variant's warm-up and
  first round run before the eager copy is built). Under CUDA graphs the graph pool shows as reserved,
  not allocated, so compare reserved peaks across modes.
* cuBLAS/cuDNN handles and workspaces are created before anything is timed.
"""

from __future__ import annotations

import math
import os
import platform
import resource
import socket
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from pipeline.provenance import git_commit

GIB = 1024**3

# One place defines the metrics: name -> (unit, meaning). Every metric a run logs is listed here.
METRICS: dict[str, tuple[str, str]] = {
    "step_time_ms_p50": ("ms", "median step time over the measured steps"),
    "step_time_ms_mean": ("ms", "mean step time over the measured steps"),
    "step_time_ms_p10": ("ms", "10th percentile step time"),
    "step_time_ms_p90": ("ms", "90th percentile step time"),
    "step_time_ms_std": ("ms", "standard deviation of step time"),
    "step_time_ms_min": ("ms", "fastest measured step"),
    "step_time_ms_max": ("ms", "slowest measured step"),
    "step_time_ms_p50_ci95_low": ("ms", "95% confidence interval of the median (order statistics), low end"),
    "step_time_ms_p50_ci95_high": ("ms", "95% confidence interval of the median, high end"),
    "measured_steps": ("steps", "steps in the step-time statistics"),
    "step_time_spread_pct": (
        "%",
        "(p90 - p10) / p50 of the measured steps: how much steady-state steps vary",
    ),
    "measurement_noisy": (
        "bool",
        "1 if step_time_spread_pct > benchmark.noisy_spread_pct: trust paired speedups more than step times",
    ),
    "cpu_steal_pct": (
        "%",
        "host CPU time stolen by the hypervisor during the measured steps (/proc/stat, all CPUs; Linux guests)",
    ),
    "throughput_samples_per_s": ("samples/s", "batch size / median step time"),
    "throughput_tokens_per_s": ("tokens/s", "batch size x sequence length / median step time (token models)"),
    "compile_time_s": (
        "s",
        "the torch.compile call(s) plus the warm-up wall time in excess of the steady-state median (compiled modes)",
    ),
    "compile_setup_s": (
        "s",
        "the torch.compile call(s) themselves, before any step: backend imports and set-up (compiled modes)",
    ),
    "warmup_excess_s": ("s", "warm-up wall time in excess of the steady-state median (every mode)"),
    "first_step_s": ("s", "wall time of the first step, synced"),
    "warmup_time_s": ("s", "wall time of all warm-up steps"),
    "torch_compile_time_s": ("s", "torch's own total: Dynamo frame compiles plus backward compiles"),
    "peak_mem_allocated_gib": ("GiB", "peak allocated by tensors over the measured steps"),
    "peak_mem_reserved_gib": ("GiB", "peak reserved by the caching allocator over the measured steps"),
    "job_peak_mem_allocated_gib": ("GiB", "peak allocated over the whole job, compilation included"),
    "job_peak_mem_reserved_gib": ("GiB", "peak reserved over the whole job, compilation included"),
    "nvml_process_mem_gib": ("GiB", "GPU memory of this process as NVML reports it (context included)"),
    "cpu_rss_peak_gib": ("GiB", "peak resident set size of the worker process"),
    "worker_wall_s": (
        "s",
        "the worker process from spawn to exit (imports, build, compile, steps, diagnostics)",
    ),
    "job_wall_s": ("s", "the whole job as its parent saw it: worker plus MLflow logging"),
    "loss_first": ("loss", "loss of the first step"),
    "loss_final": ("loss", "loss of the last step"),
    "graph_breaks": ("count", "graph breaks Dynamo recorded"),
    "unique_graphs": ("count", "distinct graphs Dynamo compiled"),
    "frames_compiled": ("count", "Dynamo frame compilations (first compiles and recompiles)"),
    "recompiles_after_warmup": ("count", "frame compilations during the measured steps"),
    "flops_per_step": (
        "FLOP",
        "forward + backward FLOPs of one step (torch.utils.flop_counter, meta device)",
    ),
    "achieved_tflops": ("TFLOP/s", "flops_per_step / median step time"),
    "mfu": ("ratio", "achieved_tflops / the GPU's dense datasheet peak for the precision in use"),
    "host_syncs_per_step": (
        "count",
        "host-device syncs in one training step (torch.cuda.set_sync_debug_mode)",
    ),
    "compile_dynamo_s": ("s", "compile phase: Dynamo bytecode tracing"),
    "compile_aot_autograd_s": ("s", "compile phase: AOTAutograd (joint graph, partitioning)"),
    "compile_inductor_s": ("s", "compile phase: inductor, forward and backward"),
    "compile_codegen_s": ("s", "of which inductor code generation"),
    "compile_triton_s": ("s", "of which Triton kernel compilation"),
    "compile_autotune_s": ("s", "autotuning (max-autotune), at compile time and at run time"),
    "compile_backward_s": ("s", "backward graph compilation (lazily, at the first backward)"),
    "cudagraph_record_s": ("s", "CUDA-graph recording"),
    "inductor_cache_hits": ("count", "FX-graph and AOTAutograd cache hits (a warm cache)"),
    "inductor_cache_misses": ("count", "FX-graph and AOTAutograd cache misses"),
    "cudagraph_skips": ("count", "graphs that did not get CUDA graphs (reasons in diagnostics.json)"),
    "frames_failed": ("count", "frames whose compilation failed"),
    "eager_step_time_ms_p50": ("ms", "paired eager baseline: median step time"),
    "eager_step_time_ms_p10": ("ms", "paired eager baseline: 10th percentile"),
    "eager_step_time_ms_p90": ("ms", "paired eager baseline: 90th percentile"),
    "eager_peak_mem_allocated_gib": (
        "GiB",
        "paired eager baseline: peak allocated over its measured steps (solo probe)",
    ),
    "eager_peak_mem_reserved_gib": (
        "GiB",
        "paired eager baseline: peak reserved over its measured steps (solo probe)",
    ),
    "speedup_vs_eager": ("x", "eager median / compiled median, same worker, interleaved rounds"),
    "speedup_vs_eager_round_min": ("x", "lowest per-round speedup"),
    "speedup_vs_eager_round_max": ("x", "highest per-round speedup"),
    "memory_ratio_vs_eager": (
        "x",
        "compiled / eager peak reserved over the measured steps (each alone on the device; CUDA-graph pools are reserved)",
    ),
    "loss_divergence_max_rel": (
        "ratio",
        "max |compiled - eager| / |eager| loss over the first benchmark.parity_steps steps",
    ),
    "loss_divergence_final_rel": (
        "ratio",
        "gap between the mean losses of the last 10% of steps (not judged: chaotic)",
    ),
    "loss_divergence_onset_step": (
        "step",
        "first step whose relative loss gap exceeds benchmark.loss_rtol, -1 if none (not judged)",
    ),
    "loss_parity": ("bool", "1 if loss_divergence_max_rel <= benchmark.loss_rtol"),
}

SERIES: dict[str, tuple[str, str]] = {
    "step_time_ms": ("ms", "per measured step (step index = training step)"),
    "loss": ("loss", "per training step, warm-up included"),
    "eager_step_time_ms": ("ms", "paired eager baseline, per measured step"),
    "eager_loss": ("loss", "paired eager baseline, per training step"),
}


def gib(n_bytes: float) -> float:
    return n_bytes / GIB


# --------------------------------------------------------------------------------------------- clocks
class StepClock:
    """Marks step boundaries without a host sync: CUDA events on the current stream, or perf_counter on
    the CPU (where ops are synchronous). Events are created up front, outside the timed loop."""

    def __init__(self, device: torch.device, steps: int):
        self.cuda = device.type == "cuda"
        self.marks: list[Any] = []
        if self.cuda:
            self.events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]

    def mark(self) -> None:
        if self.cuda:
            event = self.events[len(self.marks)]
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter_ns())

    def durations_ms(self) -> list[float]:
        """Per-step times; syncs once (after the timed loop)."""
        if self.cuda:
            self.marks[-1].synchronize()
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:], strict=False)]
        return [(b - a) / 1e6 for a, b in zip(self.marks, self.marks[1:], strict=False)]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --------------------------------------------------------------------------------------------- stats
def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def median_ci95(sorted_values: list[float]) -> tuple[float, float]:
    """Distribution-free 95% confidence interval of the median from order statistics."""
    n = len(sorted_values)
    half_width = 1.96 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half_width) - 1)
    hi = min(n - 1, math.ceil(n / 2 + half_width))
    return sorted_values[lo], sorted_values[hi]


def summarize(times_ms: list[float], prefix: str = "step_time_ms") -> dict[str, float]:
    s = sorted(times_ms)
    low, high = median_ci95(s)
    return {
        f"{prefix}_p50": percentile(s, 0.5),
        f"{prefix}_mean": statistics.fmean(s),
        f"{prefix}_p10": percentile(s, 0.1),
        f"{prefix}_p90": percentile(s, 0.9),
        f"{prefix}_std": statistics.stdev(s) if len(s) > 1 else 0.0,
        f"{prefix}_min": s[0],
        f"{prefix}_max": s[-1],
        f"{prefix}_p50_ci95_low": low,
        f"{prefix}_p50_ci95_high": high,
    }


# --------------------------------------------------------------------------------------------- memory
class Memory:
    """The CUDA caching allocator's counters (nothing on the CPU, where these metrics are not logged)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.device = device

    def reset_peak(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)

    def allocated(self) -> int:
        return torch.cuda.memory_allocated(self.device) if self.cuda else 0

    def reserved(self) -> int:
        return torch.cuda.memory_reserved(self.device) if self.cuda else 0

    def peak_allocated(self) -> int:
        return torch.cuda.max_memory_allocated(self.device) if self.cuda else 0

    def peak_reserved(self) -> int:
        return torch.cuda.max_memory_reserved(self.device) if self.cuda else 0


def cpu_rss_peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB  # ru_maxrss is in KiB on Linux


def nvml_process_memory_gib(device: torch.device) -> float | None:
    """This process's GPU memory as NVML sees it, or None where NVML is not available."""
    if device.type != "cuda":
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByPciBusId(_pci_bus_id(device))
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if proc.pid == os.getpid() and proc.usedGpuMemory is not None:
                    return gib(proc.usedGpuMemory)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None
    return None


def _pci_bus_id(device: torch.device) -> str:
    props = torch.cuda.get_device_properties(device)
    return f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"


# --------------------------------------------------------------------------------------------- variants
@dataclass
class Variant:
    """One way of running the training step (compiled, or the paired eager baseline), with its own
    weights, optimizer state, batch stream and record of what was measured."""

    name: str
    step: Callable[[Any], torch.Tensor]
    batches: Iterator[Any]
    losses: torch.Tensor  # one slot per training step, on the device
    done: int = 0
    warmup_s: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    round_p50_ms: list[float] = field(default_factory=list)
    setup_s: float = 0.0  # the torch.compile call(s) that made this variant's step
    job_peak_allocated: int = 0
    job_peak_reserved: int | None = None
    cpu_jiffies: int = 0  # all CPUs' time over the measured steps, and the part stolen from this VM
    steal_jiffies: int = 0
    peak_allocated: int = 0
    peak_reserved: int | None = None

    def run_step(self, record: bool = True) -> None:
        loss = self.step(next(self.batches))
        if record:  # extra diagnostic steps after the measurement are not recorded
            # Copy the loss out at once: with CUDA graphs the next replay overwrites the step's outputs.
            self.losses[self.done].copy_(loss)
            self.done += 1


ProgressFn = Callable[[str, str, int, int], None]


def quiet(*args: Any, **kwargs: Any) -> None:
    """A progress callback that shows nothing (for the eager memory probe)."""


def warm_up(variant: Variant, steps: int, device: torch.device, progress: ProgressFn) -> None:
    """Run warm-up steps one at a time, each timed by a wall clock after a sync."""
    for i in range(steps):
        start = time.perf_counter()
        variant.run_step()
        synchronize(device)
        variant.warmup_s.append(time.perf_counter() - start)
        progress(variant.name, "warmup", i + 1, steps)


def cpu_times() -> tuple[int, int] | None:
    """(steal, total) jiffies of all CPUs since boot, from /proc/stat; None where there is none."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return steal, user + nice + system + idle + iowait + irq + softirq + steal


def timed_round(
    variant: Variant, steps: int, device: torch.device, progress: ProgressFn, progress_every: int, total: int
) -> list[float]:
    """Run `steps` measured steps with boundary events and no host sync; return their times (ms). The
    host's CPU steal is read before the first and after the last step (outside the timed loop)."""
    clock = StepClock(device, steps)
    before = cpu_times()
    clock.mark()
    for i in range(steps):
        variant.run_step()
        clock.mark()
        if (i + 1) % progress_every == 0:
            progress(variant.name, "measure", len(variant.step_ms) + i + 1, total)
    times = clock.durations_ms()
    after = cpu_times()
    if before is not None and after is not None:
        variant.steal_jiffies += after[0] - before[0]
        variant.cpu_jiffies += after[1] - before[1]
    variant.step_ms.extend(times)
    variant.round_p50_ms.append(percentile(sorted(times), 0.5))
    return times


def solo_phase(
    variant: Variant,
    memory: Memory,
    warmup: int,
    steps: int,
    device: torch.device,
    progress: ProgressFn,
    progress_every: int,
    total: int | None = None,
) -> None:
    """Warm-up, then one timed round, with nothing else on the device: the variant's memory peaks over
    the warm-up (compilation included) and over measured steps are its own."""
    memory.reset_peak()
    warm_up(variant, warmup, device, progress)
    variant.job_peak_allocated, variant.job_peak_reserved = memory.peak_allocated(), memory.peak_reserved()
    memory.reset_peak()
    timed_round(variant, steps, device, progress, progress_every, total or steps)
    variant.peak_allocated, variant.peak_reserved = memory.peak_allocated(), memory.peak_reserved()
    variant.job_peak_allocated = max(variant.job_peak_allocated, variant.peak_allocated)
    variant.job_peak_reserved = max(variant.job_peak_reserved or 0, variant.peak_reserved or 0)


def release(variant: Variant, memory: Memory, baseline: int) -> int:
    """Free a variant's device memory (weights, optimizer state, batches) and return how many bytes
    stayed allocated above `baseline` (allocated before it was built): ~0 unless something leaked."""
    import gc

    variant.step = variant.batches = None  # type: ignore[assignment]
    variant.losses = torch.empty(0)
    gc.collect()
    if memory.cuda:
        torch.cuda.empty_cache()
    return max(0, memory.allocated() - baseline)


def init_device_libraries(device: torch.device) -> None:
    """Create the cuBLAS/cuBLASLt handles and workspaces and initialize cuDNN before anything is timed,
    so that one-time library set-up never shows up as compile time or as a slow first step."""
    if device.type != "cuda":
        return
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        a = torch.randn(64, 64, device=device, dtype=dtype, requires_grad=True)
        (a @ a).sum().backward()
        x = torch.randn(1, 3, 8, 8, device=device, dtype=dtype, requires_grad=True)
        torch.nn.functional.conv2d(x, torch.randn(4, 3, 3, 3, device=device, dtype=dtype)).sum().backward()
    torch.cuda.synchronize(device)


def split_rounds(total: int, rounds: int) -> list[int]:
    """`total` measured steps split into `rounds` near-equal rounds (no empty round)."""
    rounds = max(1, min(rounds, total))
    return [total // rounds + (1 if r < total % rounds else 0) for r in range(rounds)]


def compile_excess_s(warmup_s: list[float], steady_ms: float) -> float:
    """Warm-up wall time beyond what the same number of steady-state steps takes."""
    return sum(max(0.0, w - steady_ms / 1000) for w in warmup_s)


def variant_metrics(
    v: Variant, batch_size: int, tokens_per_sample: int | None, compiled: bool
) -> dict[str, float]:
    m = summarize(v.step_ms)
    p50 = m["step_time_ms_p50"]
    m["measured_steps"] = len(v.step_ms)
    m["step_time_spread_pct"] = 100 * (m["step_time_ms_p90"] - m["step_time_ms_p10"]) / p50
    if v.cpu_jiffies > 0:
        m["cpu_steal_pct"] = 100 * v.steal_jiffies / v.cpu_jiffies
    m["throughput_samples_per_s"] = batch_size / (p50 / 1000)
    if tokens_per_sample:
        m["throughput_tokens_per_s"] = batch_size * tokens_per_sample / (p50 / 1000)
    m["first_step_s"] = v.warmup_s[0]
    m["warmup_time_s"] = sum(v.warmup_s)
    m["warmup_excess_s"] = compile_excess_s(v.warmup_s, p50)
    if compiled:
        m["compile_setup_s"] = v.setup_s
        m["compile_time_s"] = v.setup_s + m["warmup_excess_s"]
    return m


def noise_note(metrics: dict[str, float], limit_pct: float) -> str | None:
    """Why the step times of a job should not be trusted to a few percent, or None when they can."""
    spread = metrics["step_time_spread_pct"]
    if spread <= limit_pct:
        return None
    steal = metrics.get("cpu_steal_pct")
    return (
        f"noisy: p10-p90 of the measured steps spans {spread:.0f}% of the median (benchmark.noisy_spread_pct={limit_pct:g})"
        + (f", host CPU steal {steal:.1f}%" if steal is not None else "")
        + "; compare configurations on paired speedups, or rerun"
    )


def memory_metrics(v: Variant) -> dict[str, float]:
    m = {
        "peak_mem_allocated_gib": gib(v.peak_allocated),
        "job_peak_mem_allocated_gib": gib(v.job_peak_allocated),
    }
    if v.peak_reserved is not None:
        m["peak_mem_reserved_gib"] = gib(v.peak_reserved)
    if v.job_peak_reserved is not None:
        m["job_peak_mem_reserved_gib"] = gib(v.job_peak_reserved)
    return m


def paired_metrics(
    main: Variant, eager: Variant, probe: Variant | None, benchmark: dict[str, Any], device: torch.device
) -> dict[str, float]:
    """Speedup (median of eager / median of compiled, same worker, interleaved rounds), its spread over
    rounds, memory ratio (solo reserved peaks), and loss parity."""
    e = summarize(eager.step_ms)
    m = {
        "eager_step_time_ms_p50": e["step_time_ms_p50"],
        "eager_step_time_ms_p10": e["step_time_ms_p10"],
        "eager_step_time_ms_p90": e["step_time_ms_p90"],
    }
    m["speedup_vs_eager"] = e["step_time_ms_p50"] / percentile(sorted(main.step_ms), 0.5)
    per_round = [pe / pc for pe, pc in zip(eager.round_p50_ms, main.round_p50_ms, strict=True)]
    m["speedup_vs_eager_round_min"], m["speedup_vs_eager_round_max"] = min(per_round), max(per_round)
    if device.type == "cuda" and probe is not None and probe.peak_reserved:
        m["eager_peak_mem_allocated_gib"] = gib(probe.peak_allocated)
        m["eager_peak_mem_reserved_gib"] = gib(probe.peak_reserved)
        m["memory_ratio_vs_eager"] = (main.peak_reserved or 0) / probe.peak_reserved
    m.update(
        loss_divergence(
            main.losses.tolist(), eager.losses.tolist(), benchmark["loss_rtol"], benchmark["parity_steps"]
        )
    )
    return m


def loss_divergence(
    compiled: list[float], eager: list[float], rtol: float, parity_steps: int
) -> dict[str, float]:
    """Compare two loss curves from the same initial weights and batches. Parity is judged on the first
    `parity_steps` steps, where a gap can only come from numerics (or a bug); later, training on rotated
    random batches amplifies any rounding difference chaotically (Adam's first updates are nearly
    sign(grad), so a rounding-sized gradient difference becomes a full-size update), so the step where
    the curves first separate and the end-of-curve gap (means of the last 10% of steps) are reported
    but not judged."""
    n = min(parity_steps, len(compiled))
    values = compiled + eager
    if any(math.isnan(x) or math.isinf(x) for x in values):
        return {"loss_divergence_max_rel": math.inf, "loss_parity": 0.0}
    gaps = [abs(c - e) / max(abs(e), 1e-12) for c, e in zip(compiled, eager, strict=True)]
    tail = max(1, len(compiled) // 10)
    end_c, end_e = statistics.fmean(compiled[-tail:]), statistics.fmean(eager[-tail:])
    worst = max(gaps[:n])
    return {
        "loss_divergence_max_rel": worst,
        "loss_divergence_final_rel": abs(end_c - end_e) / max(abs(end_e), 1e-12),
        "loss_divergence_onset_step": float(next((i for i, g in enumerate(gaps) if g > rtol), -1)),
        "loss_parity": float(worst <= rtol),
    }


# --------------------------------------------------------------------------------------------- compile statistics
def _field(entry: Any, name: str) -> float:
    return getattr(entry, name, None) or 0


def compile_stats() -> dict[str, Any]:
    """torch's own compile records so far in this process (`torch._dynamo.utils`): frames compiled
    (forward entries; a backward compile is a separate entry), graph breaks with their reasons, unique
    graphs, and compile time: Dynamo frame compiles plus the backward compiles AOTAutograd runs lazily."""
    from torch._dynamo.utils import counters, get_compilation_metrics

    entries = get_compilation_metrics()
    forward = [e for e in entries if getattr(e, "is_forward", True) is not False]
    backward = [e for e in entries if getattr(e, "is_forward", True) is False]
    breaks = dict(counters["graph_break"])
    return {
        "frames_compiled": len(forward),
        "graph_breaks": sum(breaks.values()),
        "graph_break_reasons": breaks,
        "unique_graphs": counters["stats"].get("unique_graphs", 0),
        "torch_compile_time_s": sum(_field(e, "entire_frame_compile_time_s") for e in forward)
        + sum(_field(e, "backward_cumulative_compile_time_us") for e in backward) / 1e6,
        "recompile_reasons": [e.recompile_reason for e in forward if getattr(e, "recompile_reason", None)],
    }


# --------------------------------------------------------------------------------------------- environment
def _version(module: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return None


def gpu_environment(device: torch.device) -> dict[str, Any]:
    props = torch.cuda.get_device_properties(device)
    env: dict[str, Any] = {
        "gpu_name": props.name,
        "gpu_memory_gib": round(gib(props.total_memory), 2),
        "gpu_sm_count": props.multi_processor_count,
        "gpu_capability": f"{props.major}.{props.minor}",
        "gpu_index": torch.cuda.current_device(),
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version(),
    }
    try:
        import pynvml

        pynvml.nvmlInit()
        env["driver_version"] = pynvml.nvmlSystemGetDriverVersion()
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(_pci_bus_id(device))
        env["gpu_uuid"] = pynvml.nvmlDeviceGetUUID(handle)
        env["gpu_physical_index"] = pynvml.nvmlDeviceGetIndex(handle)
        pynvml.nvmlShutdown()
    except Exception as exc:  # NVML missing or not permitted: say so rather than guess
        env["nvml"] = f"unavailable: {type(exc).__name__}"
    return env


def environment(device: torch.device) -> dict[str, Any]:
    """What a reader needs to reproduce or compare the figures. Never the whole process environment."""
    env: dict[str, Any] = {
        "device": str(device),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "timm": _version("timm"),
        "transformers": _version("transformers"),
        "triton": _version("triton"),
        "git_commit": git_commit(),
        "cpu_count": os.cpu_count(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "command": os.environ.get("PIPELINE_COMMAND"),
    }
    if device.type == "cuda":
        env.update(gpu_environment(device))
    return {k: v for k, v in env.items() if v is not None}


def describe_method(
    device: torch.device, warmup: int, measured: int, rounds: int, paired: bool, data_loader: bool
) -> str:
    clock = (
        "CUDA events recorded at every step boundary on the compute stream, read after the loop"
        if device.type == "cuda"
        else "time.perf_counter at every step boundary (CPU ops are synchronous)"
    )
    lines = [
        f"Step time: {measured} measured steps after {warmup} warm-up steps; {clock}; no host sync inside the timed loop.",
        "Statistics: median (p50), mean, p10, p90, std, and a distribution-free 95% CI of the median. A job whose p10-p90 spread exceeds "
        "benchmark.noisy_spread_pct of the median is flagged (measurement_noisy), with the host's CPU steal over the measured steps (cpu_steal_pct).",
        "Compile time: the torch.compile call(s) (compile_setup_s) plus the warm-up wall time (each warm-up step synced) in excess of the steady-state median; torch's own compile totals are logged beside it as torch_compile_time_s.",
        "Data: "
        + (
            "a DataLoader making CPU batches, copied to the device inside every step (the copy is measured)."
            if data_loader
            else "batches generated once on the device and rotated (no host work in the step)."
        ),
    ]
    if device.type == "cuda":
        lines.append(
            "Memory: CUDA caching-allocator peaks (allocated, reserved) over the warm-up including compilation (job_*) and over the measured steps; NVML per-process usage; CPU peak RSS."
        )
    else:
        lines.append("Memory: CPU peak RSS only (no device allocator on the CPU).")
    if paired:
        lines.append(
            f"Paired eager baseline: an eager copy with the same initial weights and batches, in the same worker, timed in {rounds} rounds alternating with the compiled variant "
            "(C1 E1 C2 E2 ...) so drift hits both alike; speedup = eager median / compiled median. Memory figures come from solo phases only: an eager probe runs alone "
            "first and is freed, then the compiled variant warms up and runs round 1 before the eager copy exists; memory_ratio_vs_eager compares reserved peaks "
            "(CUDA-graph pools show as reserved, not allocated)."
        )
    lines.append(
        "Isolation: every job runs in a fresh spawned Python process; nothing (compile caches in memory, CUDA context, peak counters) carries over between jobs."
    )
    return "\n".join(lines)
