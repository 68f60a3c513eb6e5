"""The metric registry: every figure a run logs, with its unit and meaning, in one table.

Torch-free, so the job's parent and the sweep report can check and describe metrics without
importing torch. The worker's records (:mod:`pipeline.measure`, :mod:`pipeline.diagnose`) produce
these names; a test checks that everything a job logs is listed here.
"""

from __future__ import annotations

from typing import NamedTuple


class Metric(NamedTuple):
    unit: str
    meaning: str


# One place defines the metrics: name -> (unit, meaning).
METRICS: dict[str, Metric] = {
    "step_time_ms_p50": Metric("ms", "median step time over the measured steps"),
    "step_time_ms_mean": Metric("ms", "mean step time over the measured steps"),
    "step_time_ms_p10": Metric("ms", "10th percentile step time"),
    "step_time_ms_p90": Metric("ms", "90th percentile step time"),
    "step_time_ms_std": Metric("ms", "standard deviation of step time"),
    "step_time_ms_min": Metric("ms", "fastest measured step"),
    "step_time_ms_max": Metric("ms", "slowest measured step"),
    "step_time_ms_p50_ci95_low": Metric(
        "ms", "95% confidence interval of the median (order statistics), low end"
    ),
    "step_time_ms_p50_ci95_high": Metric("ms", "95% confidence interval of the median, high end"),
    "measured_steps": Metric("steps", "steps in the step-time statistics"),
    "step_time_spread_pct": Metric(
        "%", "(p90 - p10) / p50 of the measured steps: how much steady-state steps vary"
    ),
    "measurement_noisy": Metric(
        "bool",
        "1 if step_time_spread_pct > benchmark.noisy_spread_pct: trust paired speedups more than step times",
    ),
    "cpu_steal_pct": Metric(
        "%",
        "host CPU time stolen by the hypervisor during the measured steps (/proc/stat, all CPUs; Linux guests)",
    ),
    "throughput_samples_per_s": Metric("samples/s", "batch size / median step time"),
    "throughput_tokens_per_s": Metric(
        "tokens/s", "batch size x sequence length / median step time (token models)"
    ),
    "compile_time_s": Metric(
        "s",
        "the torch.compile call(s) plus the warm-up wall time in excess of the steady-state median (compiled modes)",
    ),
    "compile_setup_s": Metric(
        "s",
        "the torch.compile call(s) themselves, before any step: backend imports and set-up (compiled modes)",
    ),
    "warmup_excess_s": Metric("s", "warm-up wall time in excess of the steady-state median (every mode)"),
    "first_step_s": Metric("s", "wall time of the first step, synced"),
    "warmup_time_s": Metric("s", "wall time of all warm-up steps"),
    "torch_compile_time_s": Metric("s", "torch's own total: Dynamo frame compiles plus backward compiles"),
    "peak_mem_allocated_gib": Metric("GiB", "peak allocated by tensors over the measured steps"),
    "peak_mem_reserved_gib": Metric("GiB", "peak reserved by the caching allocator over the measured steps"),
    "job_peak_mem_allocated_gib": Metric("GiB", "peak allocated over the whole job, compilation included"),
    "job_peak_mem_reserved_gib": Metric("GiB", "peak reserved over the whole job, compilation included"),
    "nvml_process_mem_gib": Metric("GiB", "GPU memory of this process as NVML reports it (context included)"),
    "cpu_rss_peak_gib": Metric("GiB", "peak resident set size of the worker process"),
    "worker_wall_s": Metric(
        "s", "the worker process from spawn to exit (imports, build, compile, steps, diagnostics)"
    ),
    "job_wall_s": Metric("s", "the whole job as its parent saw it: worker plus MLflow logging"),
    "loss_first": Metric("loss", "loss of the first step"),
    "loss_final": Metric("loss", "loss of the last step"),
    "graph_breaks": Metric("count", "graph breaks Dynamo recorded"),
    "unique_graphs": Metric("count", "distinct graphs Dynamo compiled"),
    "frames_compiled": Metric("count", "Dynamo frame compilations (first compiles and recompiles)"),
    "recompiles_after_warmup": Metric("count", "frame compilations during the measured steps"),
    "flops_per_step": Metric(
        "FLOP", "forward + backward FLOPs of one step (torch.utils.flop_counter, meta device)"
    ),
    "achieved_tflops": Metric("TFLOP/s", "flops_per_step / median step time"),
    "mfu": Metric("ratio", "achieved_tflops / the GPU's dense datasheet peak for the precision in use"),
    "host_syncs_per_step": Metric(
        "count", "host-device syncs in one training step (torch.cuda.set_sync_debug_mode)"
    ),
    "compile_dynamo_s": Metric("s", "compile phase: Dynamo bytecode tracing"),
    "compile_aot_autograd_s": Metric("s", "compile phase: AOTAutograd (joint graph, partitioning)"),
    "compile_inductor_s": Metric("s", "compile phase: inductor, forward and backward"),
    "compile_codegen_s": Metric("s", "of which inductor code generation"),
    "compile_triton_s": Metric("s", "of which Triton kernel compilation"),
    "compile_autotune_s": Metric("s", "autotuning (max-autotune), at compile time and at run time"),
    "compile_backward_s": Metric("s", "backward graph compilation (lazily, at the first backward)"),
    "cudagraph_record_s": Metric("s", "CUDA-graph recording"),
    "inductor_cache_hits": Metric("count", "FX-graph and AOTAutograd cache hits (a warm cache)"),
    "inductor_cache_misses": Metric("count", "FX-graph and AOTAutograd cache misses"),
    "cudagraph_skips": Metric("count", "graphs that did not get CUDA graphs (reasons in diagnostics.json)"),
    "frames_failed": Metric("count", "frames whose compilation failed"),
    "eager_step_time_ms_p50": Metric("ms", "paired eager baseline: median step time"),
    "eager_step_time_ms_p10": Metric("ms", "paired eager baseline: 10th percentile"),
    "eager_step_time_ms_p90": Metric("ms", "paired eager baseline: 90th percentile"),
    "eager_peak_mem_allocated_gib": Metric(
        "GiB", "paired eager baseline: peak allocated over its measured steps (solo probe)"
    ),
    "eager_peak_mem_reserved_gib": Metric(
        "GiB", "paired eager baseline: peak reserved over its measured steps (solo probe)"
    ),
    "speedup_vs_eager": Metric("x", "eager median / compiled median, same worker, interleaved rounds"),
    "speedup_vs_eager_round_min": Metric("x", "lowest per-round speedup"),
    "speedup_vs_eager_round_max": Metric("x", "highest per-round speedup"),
    "memory_ratio_vs_eager": Metric(
        "x",
        "compiled / eager peak reserved over the measured steps (each alone on the device; CUDA-graph pools are reserved)",
    ),
    "loss_divergence_max_rel": Metric(
        "ratio", "max |compiled - eager| / |eager| loss over the first benchmark.parity_steps steps"
    ),
    "loss_divergence_final_rel": Metric(
        "ratio", "gap between the mean losses of the last 10% of steps (not judged: chaotic)"
    ),
    "loss_divergence_onset_step": Metric(
        "step", "first step whose relative loss gap exceeds benchmark.loss_rtol, -1 if none (not judged)"
    ),
    "loss_parity": Metric("bool", "1 if loss_divergence_max_rel <= benchmark.loss_rtol"),
}

# Per-step curves, logged as metric histories (the step is the training step).
SERIES: dict[str, Metric] = {
    "step_time_ms": Metric("ms", "per measured step (step index = training step)"),
    "loss": Metric("loss", "per training step, warm-up included"),
    "eager_step_time_ms": Metric("ms", "paired eager baseline, per measured step"),
    "eager_loss": Metric("loss", "paired eager baseline, per training step"),
}


def unregistered(names: object) -> list[str]:
    """The names among `names` that the registry does not list (a bug: every logged metric is here)."""
    return sorted(n for n in names if n not in METRICS and n not in SERIES)  # type: ignore[attr-defined]
