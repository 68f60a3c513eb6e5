"""The metric registry: every figure a run logs, with its unit, meaning and better side, in one table.
Torch-free, so the job's parent and the sweep report can check and describe metrics without torch."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import NamedTuple

LOWER, HIGHER = "lower", "higher"


class Metric(NamedTuple):
    unit: str
    meaning: str
    # LOWER, HIGHER, or None for a reading with no better side (a count, a flag): the only source
    # of a metric's direction for ranking, tables and plots.
    better: str | None = None
    # The metrics holding its 95% interval (low end, high end): readers ask `estimate`, never build names.
    interval: tuple[str, str] | None = None
    # Its rank (0 first) among the figures that can head a job's line (`headline`).
    headline: int | None = None


lower = partial(Metric, better=LOWER)  # a figure whose smaller value is better
higher = partial(Metric, better=HIGHER)  # a figure whose larger value is better

METRICS: dict[str, Metric] = {
    "step/p50_ms": lower(
        "ms",
        "median step time over the measured steps",
        interval=("step/p50_ci95_low_ms", "step/p50_ci95_high_ms"),
        headline=1,
    ),
    "step/mean_ms": lower("ms", "mean step time over the measured steps"),
    "step/p10_ms": lower("ms", "10th percentile step time"),
    "step/p90_ms": lower("ms", "90th percentile step time"),
    "step/p99_ms": lower("ms", "99th percentile step time (inference: the tail latency of a call)"),
    "step/std_ms": lower("ms", "standard deviation of step time"),
    "step/min_ms": lower("ms", "fastest measured step"),
    "step/max_ms": lower("ms", "slowest measured step"),
    "step/p50_ci95_low_ms": lower(
        "ms", "95% interval of the median, low end (counts the autocorrelated steps' effective number)"
    ),
    "step/p50_ci95_high_ms": lower("ms", "95% confidence interval of the median, high end"),
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
    "step/host_bound": Metric(
        "bool",
        "1 if, on a GPU, the compiled step followed the host's speed while its paired eager copy held steady: the "
        "paired speedup holds for this process's host speed; the verdict widens it to speedup x p50/p90 .. x p50/p10",
    ),
    "step/above_latency": Metric(
        "bool",
        "1 if, on a GPU, calls back to back (step/*) read slower than calls alone, synchronized (latency/*), beyond "
        "both medians' intervals: the host held the queued calls back, so step/* and throughput/* understate the "
        "device; latency/* stands (inference)",
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
    "latency/p50_ms": lower(
        "ms",
        "inference: median latency of one call as a request sees it (synchronized before and after; where "
        "scenario.batch_sizes cycles, of one call of each size in turn)",
        interval=("latency/p50_ci95_low_ms", "latency/p50_ci95_high_ms"),
        headline=0,
    ),
    "latency/mean_ms": lower("ms", "inference: mean latency of one synchronized call"),
    "latency/p10_ms": lower("ms", "inference: 10th percentile latency of one synchronized call"),
    "latency/p90_ms": lower("ms", "inference: 90th percentile latency of one synchronized call"),
    "latency/p99_ms": lower("ms", "inference: 99th percentile latency of one synchronized call"),
    "latency/std_ms": lower("ms", "inference: standard deviation of the synchronized calls' latency"),
    "latency/min_ms": lower("ms", "inference: fastest synchronized call"),
    "latency/max_ms": lower("ms", "inference: slowest synchronized call"),
    "latency/p50_ci95_low_ms": lower("ms", "inference: 95% interval of the median latency, low end"),
    "latency/p50_ci95_high_ms": lower("ms", "inference: 95% interval of the median latency, high end"),
    "eager/latency_p50_ms": lower(
        "ms",
        "inference, paired eager baseline: median latency of one synchronized call",
        interval=("eager/latency_p50_ci95_low_ms", "eager/latency_p50_ci95_high_ms"),
    ),
    "eager/latency_p10_ms": lower("ms", "inference, paired eager baseline: 10th percentile latency"),
    "eager/latency_p90_ms": lower("ms", "inference, paired eager baseline: 90th percentile latency"),
    "eager/latency_p99_ms": lower("ms", "inference, paired eager baseline: 99th percentile latency"),
    "eager/latency_p50_ci95_low_ms": lower(
        "ms", "inference, paired eager baseline: 95% interval of the median latency, low end"
    ),
    "eager/latency_p50_ci95_high_ms": lower(
        "ms", "inference, paired eager baseline: 95% interval of the median latency, high end"
    ),
    "speedup/back_to_back_vs_eager": higher(
        "x",
        "inference: eager median / compiled median of calls issued back to back (the throughput figure's speedup)",
    ),
    "generate/decode_bandwidth_gbs": higher(
        "GB/s", "generate: bytes a decode step must read (weights, KV cache) / median decode step time"
    ),
    "generate/decode_bandwidth_util": higher(
        "ratio",
        "generate: generate/decode_bandwidth_gbs / the GPU's peak memory bandwidth (named in the run)",
    ),
    "throughput/samples_per_s": higher("samples/s", "batch size / median step time"),
    "throughput/tokens_per_s": higher(
        "tokens/s", "batch size x sequence length / median step time (token models)"
    ),
    "compile/total_s": lower(
        "s",
        "the torch.compile call(s) plus the warm-up wall time in excess of the steady-state median (compiled modes)",
    ),
    "compile/setup_s": lower(
        "s",
        "the torch.compile call(s) themselves, before any step: backend imports and set-up (compiled modes)",
    ),
    "warmup/excess_s": lower("s", "warm-up wall time in excess of the steady-state median (every mode)"),
    "warmup/first_step_s": lower("s", "wall time of the first step, synced"),
    "warmup/total_s": lower("s", "wall time of all warm-up steps"),
    "compile/torch_total_s": lower("s", "torch's own total: Dynamo frame compiles plus backward compiles"),
    "memory/peak_allocated_gib": lower("GiB", "peak allocated by tensors over the measured steps"),
    "memory/peak_reserved_gib": lower(
        "GiB", "peak reserved by the caching allocator over the measured steps"
    ),
    "memory/job_peak_allocated_gib": lower("GiB", "peak allocated over the whole job, compilation included"),
    "memory/job_peak_reserved_gib": lower("GiB", "peak reserved over the whole job, compilation included"),
    "memory/nvml_process_gib": lower(
        "GiB", "GPU memory of this process as NVML reports it (context included)"
    ),
    "memory/cpu_rss_peak_gib": lower("GiB", "peak resident set size of the worker process"),
    "job/worker_wall_s": lower(
        "s",
        "the worker process from its start (spawned or forked) to exit (imports, build, compile, steps, diagnostics)",
    ),
    "job/wall_s": lower(
        "s", "the whole job as its parent saw it: worker plus MLflow logging (not job/gpu_wait_s)"
    ),
    "job/gpu_wait_s": Metric(
        "s",
        "time the job waited for a free GPU of gpu_pool (hydra/launcher=local_gpus: every job starts at once)",
    ),
    "loss/first": Metric("loss", "loss of the first step"),
    "loss/final": Metric("loss", "loss of the last step"),
    "loss/non_finite_steps": Metric(
        "count", "training steps whose loss was NaN or infinite (any: the job FAILED, NonFiniteLoss)"
    ),
    "loss/first_non_finite_step": Metric("step", "the first training step whose loss was NaN or infinite"),
    "diagnose/graph_breaks": lower("count", "graph breaks Dynamo recorded"),
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
    "diagnose/recompiles_after_warmup": lower("count", "frame compilations during the measured steps"),
    "flops/per_step": Metric(
        "FLOP", "forward + backward FLOPs of one step (torch.utils.flop_counter, meta device)"
    ),
    "flops/achieved_tflops": higher("TFLOP/s", "flops/per_step / median step time"),
    "flops/mfu": higher(
        "ratio", "flops/achieved_tflops / the GPU's dense datasheet peak for the precision in use"
    ),
    "diagnose/host_syncs_per_step": lower(
        "count", "host-device syncs in one training step (torch.cuda.set_sync_debug_mode)"
    ),
    "compile/dynamo_s": lower("s", "compile phase: Dynamo bytecode tracing"),
    "compile/aot_autograd_s": lower(
        "s", "compile phase: AOTAutograd (joint graph, partitioning; backends other than `eager`)"
    ),
    "compile/inductor_s": lower("s", "compile phase: inductor, forward and backward"),
    "compile/codegen_s": lower("s", "of which inductor code generation"),
    "compile/triton_s": lower("s", "of which Triton kernel compilation"),
    "compile/autotune_s": lower("s", "autotuning (max-autotune), at compile time and at run time"),
    "compile/backward_s": lower(
        "s", "backward graph compilation (lazily, at the first backward; jobs that compile a backward only)"
    ),
    "compile/cudagraph_record_s": lower("s", "CUDA-graph recording"),
    "compile/cache_hits": Metric(
        "count", "FX-graph and AOTAutograd cache hits (a warm cache; inductor only)"
    ),
    "compile/cache_misses": Metric("count", "FX-graph and AOTAutograd cache misses (inductor only)"),
    "diagnose/cudagraph_skips": lower(
        "count", "graphs that did not get CUDA graphs (reasons in diagnostics.json)"
    ),
    "diagnose/frames_failed": lower("count", "frames whose compilation failed"),
    "eager/p50_ms": lower(
        "ms",
        "paired eager baseline: median step time",
        interval=("eager/p50_ci95_low_ms", "eager/p50_ci95_high_ms"),
    ),
    "eager/p10_ms": lower("ms", "paired eager baseline: 10th percentile"),
    "eager/p90_ms": lower("ms", "paired eager baseline: 90th percentile"),
    "eager/p50_ci95_low_ms": lower("ms", "paired eager baseline: 95% interval of the median, low end"),
    "eager/p50_ci95_high_ms": lower("ms", "paired eager baseline: 95% interval of the median, high end"),
    "eager/peak_allocated_gib": lower(
        "GiB", "paired eager baseline: peak allocated over its measured steps (solo probe)"
    ),
    "eager/peak_reserved_gib": lower(
        "GiB", "paired eager baseline: peak reserved over its measured steps (solo probe)"
    ),
    "speedup/vs_eager": higher(
        "x",
        "paired speedup of the scenario's objective (inference: latency per call): the Hodges-Lehmann estimate of the "
        "ratios eager round median / compiled round median over adjacent alternating rounds, same worker",
        interval=("speedup/ci95_low", "speedup/ci95_high"),
    ),
    "speedup/ci95_low": higher(
        "x",
        "interval of speedup/vs_eager, low end (Wilcoxon's signed-rank interval of the round pairs' ratios; 95% over all "
        "of the job's looks)",
    ),
    "speedup/ci95_high": higher("x", "interval of speedup/vs_eager, high end"),
    "speedup/round_min": higher("x", "lowest ratio of a pair of adjacent rounds"),
    "speedup/round_max": higher("x", "highest ratio of a pair of adjacent rounds"),
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
    "measure/answered": Metric(
        "bool",
        "a paired job's: 1 if its speedup's direction was decided when it stopped (faster, slower, or no difference "
        "beyond sweep.min_effect_pct), however precise",
    ),
    "measure/interval_level_pct": Metric(
        "%",
        "the level of each interval the job reports at its stopping look (95% over all its looks together: "
        "100 - 5/K for K looks)",
    ),
    "memory/ratio_vs_eager": lower(
        "x",
        "compiled / eager peak reserved over the measured steps (each alone on the device; CUDA-graph pools are reserved)",
    ),
    "parity/max_rel": lower(
        "ratio", "max |compiled - eager| / |eager| loss over the first benchmark.parity_steps steps"
    ),
    "parity/final_rel": lower(
        "ratio", "gap between the mean losses of the last 10% of steps (not judged: chaotic)"
    ),
    "parity/onset_step": Metric(
        "step",
        "first step whose relative loss gap exceeds benchmark.loss_rtol (not judged; not logged when none does)",
    ),
    "parity/logits_max_abs": lower(
        "logit", "inference: max |compiled - eager| logit on one batch, same weights"
    ),
    "parity/logits_max_rel": lower("ratio", "inference: parity/logits_max_abs / max |eager logit|"),
    "parity/top1_agree": higher(
        "ratio", "inference: share of rows whose top class is the same compiled and eager"
    ),
    "parity/topk_overlap": higher(
        "ratio", "inference: mean share of scenario.topk classes in both top-k sets"
    ),
    "parity/tokens_agree": higher(
        "tokens", "generate: leading greedy tokens equal in compiled and eager decode (first generation)"
    ),
    "parity/near_tie": Metric(
        "bool",
        "generate: 1 if the decodes part where eager's two best next tokens are within 1% of its largest logit",
    ),
    "generate/ttft_p50_ms": lower(
        "ms",
        "generate: time to first token as a request sees it (the prefill, synchronized before it), median over measured generations",
        interval=("generate/ttft_ci95_low_ms", "generate/ttft_ci95_high_ms"),
    ),
    "generate/ttft_p90_ms": lower("ms", "generate: time to first token, 90th percentile"),
    "generate/ttft_ci95_low_ms": lower(
        "ms", "generate: 95% interval of the median time to first token, low end"
    ),
    "generate/ttft_ci95_high_ms": lower(
        "ms", "generate: 95% interval of the median time to first token, high end"
    ),
    "generate/prompt_tokens": Metric("tokens", "generate: prompt length"),
    "generate/new_tokens": Metric("tokens", "generate: tokens per generation (the first from the prefill)"),
    "eager/ttft_p50_ms": lower("ms", "generate, paired eager baseline: median time to first token"),
    "speedup/ttft_vs_eager": higher("x", "generate: eager median time to first token / compiled"),
    "parity/ok": Metric(
        "bool",
        "1 if the compiled variant computes what eager does: train parity/max_rel <= benchmark.loss_rtol, inference parity/logits_max_rel <= benchmark.loss_rtol, generate scenario.parity_tokens equal greedy tokens",
    ),
    "parallel/world_size": Metric(
        "processes", "ranks of a distributed job (parallel=ddp/fsdp): parallel.nproc"
    ),
    "step/rank_p50_max_ms": lower(
        "ms", "distributed: the slowest rank's own median step time (step/* are that rank's own steps)"
    ),
    "step/rank_spread_pct": Metric(
        "%", "distributed: (max - min) / max of the ranks' own median step times: how unequal the ranks run"
    ),
    "eager/rank_spread_pct": Metric(
        "%", "distributed, paired eager baseline: spread of the ranks' own medians"
    ),
    "memory/rank_peak_allocated_max_gib": lower(
        "GiB", "distributed (CUDA): the largest rank's peak allocated over the measured steps"
    ),
    "memory/rank_peak_allocated_spread_pct": Metric(
        "%", "distributed (CUDA): (max - min) / max of the ranks' peak allocated"
    ),
    "memory/rank_cpu_rss_max_gib": lower(
        "GiB", "distributed: the largest rank process's peak resident set size"
    ),
    "memory/rank_cpu_rss_spread_pct": Metric("%", "distributed: (max - min) / max of the ranks' peak RSS"),
    "compile/rank_total_max_s": lower("s", "distributed: the slowest rank's compile/total_s"),
    "compile/rank_total_spread_pct": Metric(
        "%", "distributed: (max - min) / max of the ranks' compile/total_s"
    ),
    "diagnose/rank_max_graph_breaks": lower("count", "distributed: the most graph breaks any rank recorded"),
    "diagnose/rank_max_unique_graphs": Metric(
        "count",
        "distributed: the most distinct graphs any rank compiled (DDPOptimizer's bucket splits count here)",
    ),
    "diagnose/rank_max_backend_graphs": Metric(
        "count",
        "distributed: the most backend-compiled graphs any rank has (DDPOptimizer's bucket splits count here)",
    ),
    "diagnose/rank_max_recompiles": lower(
        "count", "distributed: the most frame compilations any rank made during the measured steps"
    ),
    # A distributed job's communication (diagnose.comm): a profiler trace of 3 extra steps after the measurement.
    "comm/exposed_ms": lower(
        "ms",
        "distributed: per step, the time collectives ran while the device ran nothing else (GPU: NCCL kernels with no "
        "other kernel, copy or memset at that moment; CPU: gloo's collectives while the step's thread ran no aten op), "
        "the most of any rank; a collective waiting for a late peer counts: what the step lost to communication",
    ),
    "comm/exposed_pct": lower(
        "%",
        "distributed: comm/exposed_ms / comm/profiled_step_ms: the share of a profiled step lost to communication",
    ),
    "comm/collective_ms": Metric(
        "ms", "distributed: per step, the time some collective ran, hidden or not (the most of any rank)"
    ),
    "comm/overlapped_pct": higher(
        "%", "distributed: of the collectives' time (all ranks), the share that ran beside compute (hidden)"
    ),
    "comm/mb_per_step": Metric(
        "MB",
        "distributed: rank 0's collectives' bytes per step, each as nccl-tests sizes it (an all-reduce's buffer, the "
        "whole gathered or scattered buffer), 1e6 bytes",
    ),
    "comm/profiled_step_ms": lower(
        "ms",
        "distributed: wall time per profiled step (the profiler's overhead included), the slowest rank's",
    ),
    "comm/busbw_gbps": higher(
        "GB/s",
        "distributed: the profiled collectives' achieved bus bandwidth (nccl-tests: algbw x 2(n-1)/n for an "
        "all-reduce, x (n-1)/n for an all-gather or reduce-scatter), their bus bytes over their time, all ranks, 1e9 B/s",
    ),
    "comm/probe_busbw_gbps": higher(
        "GB/s",
        "distributed: the bus bandwidth this machine's probe (an all-reduce/all-gather/reduce-scatter sweep over "
        "sizes, run once per machine) gives the same collectives at the same sizes",
    ),
    "comm/busbw_vs_probe": higher(
        "ratio",
        "distributed: comm/busbw_gbps / comm/probe_busbw_gbps: 1 when the step's collectives ran as fast as the "
        "machine's link does alone; below 1 they waited (for a peer, or for compute sharing the device)",
    ),
    "comm/probe_peak_busbw_gbps": higher(
        "GB/s", "distributed: the probe's best all-reduce bus bandwidth on this machine (its link's ceiling)"
    ),
}

# Per-step curves, logged as metric histories (the step is the training step).
SERIES: dict[str, Metric] = {
    "curve/step_ms": lower("ms", "per measured step (step index = training step)"),
    "curve/loss": Metric("loss", "per training step, warm-up included"),
    "curve/eager_step_ms": lower("ms", "paired eager baseline, per measured step"),
    "curve/eager_loss": Metric("loss", "paired eager baseline, per training step"),
    # Per-rank figures of a distributed job: histories whose step is the rank.
    "rank/step_p50_ms": lower("ms", "distributed: each rank's own median step time (step = rank)"),
    "rank/eager_step_p50_ms": lower("ms", "distributed: each rank's paired eager median (step = rank)"),
    "rank/peak_allocated_gib": lower("GiB", "distributed (CUDA): each rank's peak allocated (step = rank)"),
    "rank/cpu_rss_peak_gib": lower("GiB", "distributed: each rank's peak RSS (step = rank)"),
    "rank/compile_total_s": lower("s", "distributed: each rank's compile/total_s (step = rank)"),
    "rank/graph_breaks": lower("count", "distributed: each rank's graph breaks (step = rank)"),
    "rank/unique_graphs": Metric("count", "distributed: each rank's distinct graphs (step = rank)"),
    "rank/backend_graphs": Metric(
        "count", "distributed: each rank's backend-compiled graphs, DDP's splits included (step = rank)"
    ),
    "rank/recompiles_after_warmup": lower(
        "count", "distributed: each rank's recompiles after warm-up (step = rank)"
    ),
    "rank/comm_exposed_ms": lower("ms", "distributed: each rank's comm/exposed_ms (step = rank)"),
    "rank/comm_collective_ms": lower("ms", "distributed: each rank's comm/collective_ms (step = rank)"),
}


# The sweep's parent run: aggregates over its jobs (pipeline/sweep/summary.py).
SWEEP_METRICS: dict[str, Metric] = {
    "sweep/pass_rate": higher(
        "ratio", "passing compiled jobs / compiled jobs (finished, loss parity within tolerance)"
    ),
    "sweep/geomean_speedup": higher(
        "x",
        "geometric mean of speedup/vs_eager over passing compiled jobs",
        interval=("sweep/geomean_speedup_ci95_low", "sweep/geomean_speedup_ci95_high"),
    ),
    "sweep/weighted_speedup": higher(
        "x", "0.75 * geomean(AMP) + 0.25 * geomean(FP32) speedup (the PyTorch 2.0 launch's)"
    ),
    "sweep/wall_s": lower(
        "s",
        "from the parent run's start to the end of the last job; a resumed sweep adds its sessions, not the idle time between",
    ),
    "sweep/geomean_speedup_ci95_low": higher(
        "x", "95% bootstrap interval of sweep/geomean_speedup (passing configurations resampled), low end"
    ),
    "sweep/geomean_speedup_ci95_high": higher(
        "x", "95% bootstrap interval of sweep/geomean_speedup, high end"
    ),
    "sweep/jobs_with_graph_breaks": lower(
        "count", "passing compiled jobs whose graphs broke (fullgraph=false let them through)"
    ),
}


def interval_of(name: str) -> tuple[str, str] | None:
    """The metrics holding `name`'s 95% interval (low end, high end), or None where it has none."""
    entry = METRICS.get(name) or SWEEP_METRICS.get(name)
    return entry.interval if entry is not None else None


def estimate(metrics: Mapping[str, float], name: str) -> tuple[float, float | None, float | None]:
    """`name`'s figure in `metrics` and its 95% interval's ends where they were logged (None where not)."""
    ends = interval_of(name)
    if ends is None or not all(end in metrics for end in ends):
        return metrics[name], None, None
    return metrics[name], metrics[ends[0]], metrics[ends[1]]


# The figures that can head a job's line, first-ranked first (`Metric.headline`).
HEADLINES = tuple(
    name for _, name in sorted((e.headline, n) for n, e in METRICS.items() if e.headline is not None)
)


def headline(metrics: Mapping[str, float]) -> str | None:
    """The figure that heads a job's line among those it logged, or None for a job that measured nothing."""
    return next((name for name in HEADLINES if name in metrics), None)


def bounds(metrics: Mapping[str, float], name: str) -> tuple[float, float, float]:
    """`estimate`, the figure itself standing for the ends of an interval that was not logged."""
    value, low, high = estimate(metrics, name)
    return (value, value, value) if low is None or high is None else (value, low, high)


def unregistered(names: object) -> list[str]:
    """The names among `names` that the registry does not list (a bug: every logged metric is here)."""
    known = {**METRICS, **SERIES, **SWEEP_METRICS}
    return sorted(n for n in names if n not in known)  # type: ignore[attr-defined]
