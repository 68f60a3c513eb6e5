"""The flat metric names of the raw results under benchmarks/results/ (`step_time_ms_p50` for the
registry's `step/p50_ms`), which bench.py and gpu/collect.py still read and write."""

from __future__ import annotations

from typing import Any

OLD_NAMES: dict[str, str] = {
    "step/p50_ci95_low_ms": "step_time_ms_p50_ci95_low",
    "step/p50_ci95_high_ms": "step_time_ms_p50_ci95_high",
    "step/p50_ms": "step_time_ms_p50",
    "step/mean_ms": "step_time_ms_mean",
    "step/p10_ms": "step_time_ms_p10",
    "step/p90_ms": "step_time_ms_p90",
    "step/std_ms": "step_time_ms_std",
    "step/min_ms": "step_time_ms_min",
    "step/max_ms": "step_time_ms_max",
    "step/count": "measured_steps",
    "step/spread_pct": "step_time_spread_pct",
    "step/noisy": "measurement_noisy",
    "step/cpu_steal_pct": "cpu_steal_pct",
    "throughput/samples_per_s": "throughput_samples_per_s",
    "throughput/tokens_per_s": "throughput_tokens_per_s",
    "compile/total_s": "compile_time_s",
    "compile/setup_s": "compile_setup_s",
    "warmup/excess_s": "warmup_excess_s",
    "warmup/first_step_s": "first_step_s",
    "warmup/total_s": "warmup_time_s",
    "compile/torch_total_s": "torch_compile_time_s",
    "memory/peak_allocated_gib": "peak_mem_allocated_gib",
    "memory/peak_reserved_gib": "peak_mem_reserved_gib",
    "memory/job_peak_allocated_gib": "job_peak_mem_allocated_gib",
    "memory/job_peak_reserved_gib": "job_peak_mem_reserved_gib",
    "memory/nvml_process_gib": "nvml_process_mem_gib",
    "memory/cpu_rss_peak_gib": "cpu_rss_peak_gib",
    "job/worker_wall_s": "worker_wall_s",
    "job/wall_s": "job_wall_s",
    "loss/first": "loss_first",
    "loss/final": "loss_final",
    "diagnose/unique_graphs": "unique_graphs",
    "diagnose/frames_compiled": "frames_compiled",
    "diagnose/recompiles_after_warmup": "recompiles_after_warmup",
    "flops/per_step": "flops_per_step",
    "flops/achieved_tflops": "achieved_tflops",
    "diagnose/host_syncs_per_step": "host_syncs_per_step",
    "compile/dynamo_s": "compile_dynamo_s",
    "compile/aot_autograd_s": "compile_aot_autograd_s",
    "compile/inductor_s": "compile_inductor_s",
    "compile/codegen_s": "compile_codegen_s",
    "compile/triton_s": "compile_triton_s",
    "compile/autotune_s": "compile_autotune_s",
    "compile/backward_s": "compile_backward_s",
    "compile/cudagraph_record_s": "cudagraph_record_s",
    "compile/cache_hits": "inductor_cache_hits",
    "compile/cache_misses": "inductor_cache_misses",
    "diagnose/cudagraph_skips": "cudagraph_skips",
    "eager/p50_ms": "eager_step_time_ms_p50",
    "eager/p10_ms": "eager_step_time_ms_p10",
    "eager/p90_ms": "eager_step_time_ms_p90",
    "eager/peak_allocated_gib": "eager_peak_mem_allocated_gib",
    "eager/peak_reserved_gib": "eager_peak_mem_reserved_gib",
    "speedup/round_min": "speedup_vs_eager_round_min",
    "speedup/round_max": "speedup_vs_eager_round_max",
    "speedup/vs_eager": "speedup_vs_eager",
    "memory/ratio_vs_eager": "memory_ratio_vs_eager",
    "parity/max_rel": "loss_divergence_max_rel",
    "parity/final_rel": "loss_divergence_final_rel",
    "parity/onset_step": "loss_divergence_onset_step",
    "parity/ok": "loss_parity",
    "curve/step_ms": "step_time_ms",
    "curve/loss": "loss",
    "curve/eager_step_ms": "eager_step_time_ms",
    "curve/eager_loss": "eager_loss",
    "diagnose/graph_breaks": "graph_breaks",
    "diagnose/frames_failed": "frames_failed",
    "flops/mfu": "mfu",
}


def with_old_names(result: dict[str, Any], keys: tuple[str, ...] = ("metrics", "series")) -> dict[str, Any]:
    """A job's result file with its `keys` renamed to the raw results' names."""
    for key in keys:
        result[key] = {OLD_NAMES.get(k, k): v for k, v in (result.get(key) or {}).items()}
    return result
