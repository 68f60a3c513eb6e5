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
    "step/p50_ms": Metric("ms", "median step time over the measured steps"),
    "step/mean_ms": Metric("ms", "mean step time over the measured steps"),
    "step/p10_ms": Metric("ms", "10th percentile step time"),
    "step/p90_ms": Metric("ms", "90th percentile step time"),
    "step/p99_ms": Metric("ms", "99th percentile step time (inference: the tail latency of a call)"),
    "step/std_ms": Metric("ms", "standard deviation of step time"),
    "step/min_ms": Metric("ms", "fastest measured step"),
    "step/max_ms": Metric("ms", "slowest measured step"),
    "step/p50_ci95_low_ms": Metric(
        "ms", "95% interval of the median, low end (counts the autocorrelated steps' effective number)"
    ),
    "step/p50_ci95_high_ms": Metric("ms", "95% confidence interval of the median, high end"),
    "step/count": Metric("steps", "steps in the step-time statistics"),
    "step/spread_pct": Metric(
        "%", "(p90 - p10) / p50 of the measured steps: how much steady-state steps vary"
    ),
    "step/noisy": Metric(
        "bool",
        "1 if step/spread_pct > benchmark.noisy_spread_pct: trust paired speedups more than step times",
    ),
    "step/round_drift_pct": Metric(
        "%",
        "how far the timed rounds' medians drifted apart (max / min - 1): a host-bound step follows the host's speed",
    ),
    "eager/round_drift_pct": Metric(
        "%", "paired eager baseline: how far its timed rounds' medians drifted apart"
    ),
    "step/cpu_steal_pct": Metric(
        "%",
        "host CPU time stolen by the hypervisor during the measured steps (/proc/stat, all CPUs; Linux guests)",
    ),
    "step/cpu_wait_pct": Metric(
        "%",
        "of the time the worker's threads wanted a CPU during the measured steps, the share they waited for one "
        "while other processes held the cores (/proc/self/task/*/schedstat; Linux): 0 on a host with room to spare",
    ),
    "step/cpu_others_pct": Metric(
        "%",
        "other processes' share of the time of the CPUs the worker may use, during the measured steps: /proc/stat's "
        "busy time less the worker's own threads' and its child processes' (DataLoader workers); a few % on a quiet host",
    ),
    "step/cpu_contended": Metric(
        "bool",
        "1 if step/cpu_wait_pct > 10% while the unit's work ran on several CPU threads and other processes used over 10% "
        "of its CPUs (step/cpu_others_pct): its threads wait on each other, "
        "a whole job can run in a stall looking quiet, and the verdict compares no separate jobs' step times",
    ),
    "host/reference_p50_ms": Metric(
        "ms",
        "median time of a fixed, torch-free Python workload timed before each timed round: the host CPU's speed (lower is faster)",
    ),
    "host/reference_spread_pct": Metric(
        "%",
        "(p90 - p10) / p50 of that workload's times: how far the host's own CPU speed moved while the job measured "
        "(a steady core: a few %; a launch-bound step follows it)",
    ),
    "latency/p50_ms": Metric(
        "ms", "inference: median latency of one call as a request sees it (synchronized before and after)"
    ),
    "latency/mean_ms": Metric("ms", "inference: mean latency of one synchronized call"),
    "latency/p10_ms": Metric("ms", "inference: 10th percentile latency of one synchronized call"),
    "latency/p90_ms": Metric("ms", "inference: 90th percentile latency of one synchronized call"),
    "latency/p99_ms": Metric("ms", "inference: 99th percentile latency of one synchronized call"),
    "latency/std_ms": Metric("ms", "inference: standard deviation of the synchronized calls' latency"),
    "latency/min_ms": Metric("ms", "inference: fastest synchronized call"),
    "latency/max_ms": Metric("ms", "inference: slowest synchronized call"),
    "latency/p50_ci95_low_ms": Metric("ms", "inference: 95% interval of the median latency, low end"),
    "latency/p50_ci95_high_ms": Metric("ms", "inference: 95% interval of the median latency, high end"),
    "eager/latency_p50_ms": Metric(
        "ms", "inference, paired eager baseline: median latency of one synchronized call"
    ),
    "eager/latency_p10_ms": Metric("ms", "inference, paired eager baseline: 10th percentile latency"),
    "eager/latency_p90_ms": Metric("ms", "inference, paired eager baseline: 90th percentile latency"),
    "eager/latency_p99_ms": Metric("ms", "inference, paired eager baseline: 99th percentile latency"),
    "eager/latency_p50_ci95_low_ms": Metric(
        "ms", "inference, paired eager baseline: 95% interval of the median latency, low end"
    ),
    "eager/latency_p50_ci95_high_ms": Metric(
        "ms", "inference, paired eager baseline: 95% interval of the median latency, high end"
    ),
    "speedup/back_to_back_vs_eager": Metric(
        "x",
        "inference: eager median / compiled median of calls issued back to back (the throughput figure's speedup)",
    ),
    "generate/decode_bandwidth_gbs": Metric(
        "GB/s", "generate: bytes a decode step must read (weights, KV cache) / median decode step time"
    ),
    "generate/decode_bandwidth_util": Metric(
        "ratio",
        "generate: generate/decode_bandwidth_gbs / the GPU's peak memory bandwidth (named in the run)",
    ),
    "throughput/samples_per_s": Metric("samples/s", "batch size / median step time"),
    "throughput/tokens_per_s": Metric(
        "tokens/s", "batch size x sequence length / median step time (token models)"
    ),
    "compile/total_s": Metric(
        "s",
        "the torch.compile call(s) plus the warm-up wall time in excess of the steady-state median (compiled modes)",
    ),
    "compile/setup_s": Metric(
        "s",
        "the torch.compile call(s) themselves, before any step: backend imports and set-up (compiled modes)",
    ),
    "warmup/excess_s": Metric("s", "warm-up wall time in excess of the steady-state median (every mode)"),
    "warmup/first_step_s": Metric("s", "wall time of the first step, synced"),
    "warmup/total_s": Metric("s", "wall time of all warm-up steps"),
    "compile/torch_total_s": Metric("s", "torch's own total: Dynamo frame compiles plus backward compiles"),
    "memory/peak_allocated_gib": Metric("GiB", "peak allocated by tensors over the measured steps"),
    "memory/peak_reserved_gib": Metric(
        "GiB", "peak reserved by the caching allocator over the measured steps"
    ),
    "memory/job_peak_allocated_gib": Metric("GiB", "peak allocated over the whole job, compilation included"),
    "memory/job_peak_reserved_gib": Metric("GiB", "peak reserved over the whole job, compilation included"),
    "memory/nvml_process_gib": Metric(
        "GiB", "GPU memory of this process as NVML reports it (context included)"
    ),
    "memory/cpu_rss_peak_gib": Metric("GiB", "peak resident set size of the worker process"),
    "job/worker_wall_s": Metric(
        "s",
        "the worker process from its start (spawned or forked) to exit (imports, build, compile, steps, diagnostics)",
    ),
    "job/wall_s": Metric(
        "s", "the whole job as its parent saw it: worker plus MLflow logging (not job/gpu_wait_s)"
    ),
    "job/gpu_wait_s": Metric(
        "s",
        "time the job waited for a free GPU of gpu_pool (hydra/launcher=local_gpus: every job starts at once)",
    ),
    "loss/first": Metric("loss", "loss of the first step"),
    "loss/final": Metric("loss", "loss of the last step"),
    "diagnose/graph_breaks": Metric("count", "graph breaks Dynamo recorded"),
    "diagnose/unique_graphs": Metric("count", "distinct graphs Dynamo compiled"),
    "diagnose/backend_graphs": Metric(
        "count",
        "graphs the backend compiled through AOTAutograd (aot_eager, inductor): Dynamo's graphs, or with DDP "
        "(parallel.optimize_ddp=on) the pieces DDPOptimizer split them into at bucket boundaries",
    ),
    "diagnose/compiled_autograd_captures": Metric(
        "count",
        "backward graphs compiled autograd captured (logged with parallel.optimize_ddp=compiled_autograd only)",
    ),
    "diagnose/frames_compiled": Metric("count", "Dynamo frame compilations (first compiles and recompiles)"),
    "diagnose/recompiles_after_warmup": Metric("count", "frame compilations during the measured steps"),
    "flops/per_step": Metric(
        "FLOP", "forward + backward FLOPs of one step (torch.utils.flop_counter, meta device)"
    ),
    "flops/achieved_tflops": Metric("TFLOP/s", "flops/per_step / median step time"),
    "flops/mfu": Metric(
        "ratio", "flops/achieved_tflops / the GPU's dense datasheet peak for the precision in use"
    ),
    "diagnose/host_syncs_per_step": Metric(
        "count", "host-device syncs in one training step (torch.cuda.set_sync_debug_mode)"
    ),
    "compile/dynamo_s": Metric("s", "compile phase: Dynamo bytecode tracing"),
    "compile/aot_autograd_s": Metric(
        "s", "compile phase: AOTAutograd (joint graph, partitioning; backends other than `eager`)"
    ),
    "compile/inductor_s": Metric("s", "compile phase: inductor, forward and backward"),
    "compile/codegen_s": Metric("s", "of which inductor code generation"),
    "compile/triton_s": Metric("s", "of which Triton kernel compilation"),
    "compile/autotune_s": Metric("s", "autotuning (max-autotune), at compile time and at run time"),
    "compile/backward_s": Metric(
        "s", "backward graph compilation (lazily, at the first backward; jobs that compile a backward only)"
    ),
    "compile/cudagraph_record_s": Metric("s", "CUDA-graph recording"),
    "compile/cache_hits": Metric(
        "count", "FX-graph and AOTAutograd cache hits (a warm cache; inductor only)"
    ),
    "compile/cache_misses": Metric("count", "FX-graph and AOTAutograd cache misses (inductor only)"),
    "diagnose/cudagraph_skips": Metric(
        "count", "graphs that did not get CUDA graphs (reasons in diagnostics.json)"
    ),
    "diagnose/frames_failed": Metric("count", "frames whose compilation failed"),
    "eager/p50_ms": Metric("ms", "paired eager baseline: median step time"),
    "eager/p10_ms": Metric("ms", "paired eager baseline: 10th percentile"),
    "eager/p90_ms": Metric("ms", "paired eager baseline: 90th percentile"),
    "eager/p50_ci95_low_ms": Metric("ms", "paired eager baseline: 95% interval of the median, low end"),
    "eager/p50_ci95_high_ms": Metric("ms", "paired eager baseline: 95% interval of the median, high end"),
    "eager/peak_allocated_gib": Metric(
        "GiB", "paired eager baseline: peak allocated over its measured steps (solo probe)"
    ),
    "eager/peak_reserved_gib": Metric(
        "GiB", "paired eager baseline: peak reserved over its measured steps (solo probe)"
    ),
    "speedup/vs_eager": Metric(
        "x",
        "paired speedup of the scenario's objective (inference: latency per call): the Hodges-Lehmann estimate of the "
        "ratios eager round median / compiled round median over adjacent alternating rounds, same worker",
    ),
    "speedup/ci95_low": Metric(
        "x",
        "interval of speedup/vs_eager, low end (Wilcoxon's signed-rank interval of the round pairs' ratios; 95% over all "
        "of the job's looks)",
    ),
    "speedup/ci95_high": Metric("x", "interval of speedup/vs_eager, high end"),
    "speedup/round_min": Metric("x", "lowest ratio of a pair of adjacent rounds"),
    "speedup/round_max": Metric("x", "highest ratio of a pair of adjacent rounds"),
    "measure/seconds": Metric(
        "s",
        "time spent in timed rounds (warm-up and compilation not counted), until the job stopped measuring",
    ),
    "measure/rounds": Metric("rounds", "timed rounds per variant when the job stopped measuring"),
    "measure/looks": Metric(
        "looks", "at which look the job stopped (looks at round counts fixed in advance, each spending 5%/K)"
    ),
    "measure/decided": Metric(
        "bool",
        "1 if the job stopped because its question was answered (the paired speedup clear of or within "
        "sweep.min_effect_pct and within benchmark.target_pct; a lone figure within benchmark.target_pct), 0 if "
        "benchmark.budget_s ran out first",
    ),
    "measure/interval_level_pct": Metric(
        "%",
        "the level of each interval the job reports at its stopping look (95% over all its looks together: "
        "100 - 5/K for K looks)",
    ),
    "memory/ratio_vs_eager": Metric(
        "x",
        "compiled / eager peak reserved over the measured steps (each alone on the device; CUDA-graph pools are reserved)",
    ),
    "parity/max_rel": Metric(
        "ratio", "max |compiled - eager| / |eager| loss over the first benchmark.parity_steps steps"
    ),
    "parity/final_rel": Metric(
        "ratio", "gap between the mean losses of the last 10% of steps (not judged: chaotic)"
    ),
    "parity/onset_step": Metric(
        "step",
        "first step whose relative loss gap exceeds benchmark.loss_rtol (not judged; not logged when none does)",
    ),
    "parity/logits_max_abs": Metric(
        "logit", "inference: max |compiled - eager| logit on one batch, same weights"
    ),
    "parity/logits_max_rel": Metric("ratio", "inference: parity/logits_max_abs / max |eager logit|"),
    "parity/top1_agree": Metric(
        "ratio", "inference: share of rows whose top class is the same compiled and eager"
    ),
    "parity/topk_overlap": Metric(
        "ratio", "inference: mean share of scenario.topk classes in both top-k sets"
    ),
    "parity/tokens_agree": Metric(
        "tokens", "generate: leading greedy tokens equal in compiled and eager decode (first generation)"
    ),
    "parity/near_tie": Metric(
        "bool",
        "generate: 1 if the decodes part where eager's two best next tokens are within 1% of its largest logit",
    ),
    "generate/ttft_p50_ms": Metric(
        "ms",
        "generate: time to first token as a request sees it (the prefill, synchronized before it), median over measured generations",
    ),
    "generate/ttft_p90_ms": Metric("ms", "generate: time to first token, 90th percentile"),
    "generate/ttft_ci95_low_ms": Metric(
        "ms", "generate: 95% interval of the median time to first token, low end"
    ),
    "generate/ttft_ci95_high_ms": Metric(
        "ms", "generate: 95% interval of the median time to first token, high end"
    ),
    "generate/prompt_tokens": Metric("tokens", "generate: prompt length"),
    "generate/new_tokens": Metric("tokens", "generate: tokens per generation (the first from the prefill)"),
    "eager/ttft_p50_ms": Metric("ms", "generate, paired eager baseline: median time to first token"),
    "speedup/ttft_vs_eager": Metric("x", "generate: eager median time to first token / compiled"),
    "parity/ok": Metric(
        "bool",
        "1 if the compiled variant computes what eager does: train parity/max_rel <= benchmark.loss_rtol, inference parity/logits_max_rel <= benchmark.loss_rtol, generate scenario.parity_tokens equal greedy tokens",
    ),
    "parallel/world_size": Metric(
        "processes", "ranks of a distributed job (parallel=ddp/fsdp): parallel.nproc"
    ),
    "step/rank_p50_max_ms": Metric(
        "ms", "distributed: the slowest rank's own median step time (step/* are per-step maxima over ranks)"
    ),
    "step/rank_spread_pct": Metric(
        "%", "distributed: (max - min) / max of the ranks' own median step times: how unequal the ranks run"
    ),
    "eager/rank_spread_pct": Metric(
        "%", "distributed, paired eager baseline: spread of the ranks' own medians"
    ),
    "memory/rank_peak_allocated_max_gib": Metric(
        "GiB", "distributed (CUDA): the largest rank's peak allocated over the measured steps"
    ),
    "memory/rank_peak_allocated_spread_pct": Metric(
        "%", "distributed (CUDA): (max - min) / max of the ranks' peak allocated"
    ),
    "memory/rank_cpu_rss_max_gib": Metric(
        "GiB", "distributed: the largest rank process's peak resident set size"
    ),
    "memory/rank_cpu_rss_spread_pct": Metric("%", "distributed: (max - min) / max of the ranks' peak RSS"),
    "compile/rank_total_max_s": Metric("s", "distributed: the slowest rank's compile/total_s"),
    "compile/rank_total_spread_pct": Metric(
        "%", "distributed: (max - min) / max of the ranks' compile/total_s"
    ),
    "diagnose/rank_max_graph_breaks": Metric("count", "distributed: the most graph breaks any rank recorded"),
    "diagnose/rank_max_unique_graphs": Metric(
        "count",
        "distributed: the most distinct graphs any rank compiled (DDPOptimizer's bucket splits count here)",
    ),
    "diagnose/rank_max_backend_graphs": Metric(
        "count",
        "distributed: the most backend-compiled graphs any rank has (DDPOptimizer's bucket splits count here)",
    ),
    "diagnose/rank_max_recompiles": Metric(
        "count", "distributed: the most frame compilations any rank made during the measured steps"
    ),
}

# Per-step curves, logged as metric histories (the step is the training step).
SERIES: dict[str, Metric] = {
    "curve/step_ms": Metric("ms", "per measured step (step index = training step)"),
    "curve/loss": Metric("loss", "per training step, warm-up included"),
    "curve/eager_step_ms": Metric("ms", "paired eager baseline, per measured step"),
    "curve/eager_loss": Metric("loss", "paired eager baseline, per training step"),
    # Per-rank figures of a distributed job: histories whose step is the rank.
    "rank/step_p50_ms": Metric("ms", "distributed: each rank's own median step time (step = rank)"),
    "rank/eager_step_p50_ms": Metric("ms", "distributed: each rank's paired eager median (step = rank)"),
    "rank/peak_allocated_gib": Metric("GiB", "distributed (CUDA): each rank's peak allocated (step = rank)"),
    "rank/cpu_rss_peak_gib": Metric("GiB", "distributed: each rank's peak RSS (step = rank)"),
    "rank/compile_total_s": Metric("s", "distributed: each rank's compile/total_s (step = rank)"),
    "rank/graph_breaks": Metric("count", "distributed: each rank's graph breaks (step = rank)"),
    "rank/unique_graphs": Metric("count", "distributed: each rank's distinct graphs (step = rank)"),
    "rank/backend_graphs": Metric(
        "count", "distributed: each rank's backend-compiled graphs, DDP's splits included (step = rank)"
    ),
    "rank/recompiles_after_warmup": Metric(
        "count", "distributed: each rank's recompiles after warm-up (step = rank)"
    ),
}


# The sweep's parent run: aggregates over its jobs (pipeline/sweep/summary.py).
SWEEP_METRICS: dict[str, Metric] = {
    "sweep/pass_rate": Metric(
        "ratio", "passing compiled jobs / compiled jobs (finished, loss parity within tolerance)"
    ),
    "sweep/geomean_speedup": Metric("x", "geometric mean of speedup/vs_eager over passing compiled jobs"),
    "sweep/weighted_speedup": Metric(
        "x", "0.75 * geomean(AMP) + 0.25 * geomean(FP32) speedup (the PyTorch 2.0 launch's)"
    ),
    "sweep/wall_s": Metric(
        "s",
        "from the parent run's start to the end of the last job; a resumed sweep adds its sessions, not the idle time between",
    ),
    "sweep/geomean_speedup_ci95_low": Metric(
        "x", "95% bootstrap interval of sweep/geomean_speedup (passing configurations resampled), low end"
    ),
    "sweep/geomean_speedup_ci95_high": Metric(
        "x", "95% bootstrap interval of sweep/geomean_speedup, high end"
    ),
    "sweep/jobs_with_graph_breaks": Metric(
        "count", "passing compiled jobs whose graphs broke (fullgraph=false let them through)"
    ),
}


def unregistered(names: object) -> list[str]:
    """The names among `names` that the registry does not list (a bug: every logged metric is here)."""
    known = {**METRICS, **SERIES, **SWEEP_METRICS}
    return sorted(n for n in names if n not in known)  # type: ignore[attr-defined]


# Names before metrics were grouped by concern (`step/p50_ms` was `step_time_ms_p50`): the raw results
# of earlier benchmark runs (benchmarks/results/) use them; benchmarks/bench.py reads both.
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
