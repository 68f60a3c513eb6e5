"""How a job was measured, in words: written into every run's description. The unit is the scenario's
(a training step, a call, a generation) and the isolation line says how the worker really started."""

from __future__ import annotations

import torch

from pipeline.config.schema import Config


def describe_method(
    cfg: Config, *, device: torch.device, world_size: int, unit: str, worker_start: str, overlap_cpus: str
) -> str:
    benchmark, warmup, measured = cfg.benchmark, cfg.trainer.warmup_steps, cfg.trainer.measured_steps
    min_effect_pct, paired, parallel = cfg.sweep.min_effect_pct, cfg.paired, cfg.parallel.strategy
    host_check_s, units = benchmark.host_check_s, f"{unit}s"
    clock = (
        f"CUDA events recorded at every {unit} boundary on the compute stream, read after the loop; each round after a drain "
        f"and one untimed {unit} of its own variant (a lead-in), so that no other variant's queued work hides its launches"
        if device.type == "cuda"
        else f"time.perf_counter at every {unit} boundary (CPU ops are synchronous)"
    )
    question = (
        f"the paired speedup's interval clear of 1 +- {min_effect_pct:g}% (faster, slower) or inside it (no difference), "
        f"and within +-{benchmark.target_pct:g}%"
        if paired
        else f"the median's interval within +-{benchmark.target_pct:g}%"
    )
    lines = [
        f"Timing: {warmup} warm-up {units}, then timed rounds of about {benchmark.round_s:g} s (units sized from the warm-up; "
        f"at least {measured} measured {units} and {benchmark.rounds} rounds before the first look); {clock}; no host sync inside a round.",
        f"Measuring until decided: looks at round counts fixed in advance (each about 1.5x the last, the last at what benchmark.budget_s="
        f"{benchmark.budget_s:g} s of rounds holds); at each look the job stops once {question}, or at the last look "
        "(out of budget: undecided, or imprecise). Each of the K looks spends 5%/K (Bonferroni), so every interval reported holds with 95% "
        "over all looks together, wherever the job stopped (measure/* says how long it measured and why it stopped).",
        f"Statistics: median (p50), mean, p10, p90, std, and a 95% interval of the median that counts the {units}' effective number "
        f"(consecutive {units} are autocorrelated: n (1 - rho) / (1 + rho) from their lag-1 autocorrelation rho). A job whose p10-p90 spread exceeds "
        f"benchmark.noisy_spread_pct of the median is flagged (step/noisy), with the host's CPU steal over the measured {units} (step/cpu_steal_pct) and the share of the time the worker's threads wanted a CPU that they spent waiting for one (step/cpu_wait_pct, the scheduler's schedstat); several compute threads waiting over 10% while other processes used over 10% of the worker's CPUs (step/cpu_others_pct: /proc/stat's busy time less the worker's own threads' and child processes') is contended (step/cpu_contended): no separate job's {unit} times are compared then.",
        f"Compile time: the torch.compile call(s) (compile/setup_s) plus the warm-up wall time (each warm-up {unit} synced) in excess of the steady-state median; torch's own compile totals are logged beside it as compile/torch_total_s.",
        "Data: "
        + (
            f"a DataLoader making CPU batches, copied to the device inside every {unit} (the copy is measured)."
            if cfg.data.loader
            else f"batches generated once on the device and rotated (no host work in the {unit})."
        ),
    ]
    if host_check_s > 0:
        lines.append(
            f"Host: a fixed, torch-free Python workload timed in short bursts before each timed round, outside its time "
            f"({host_check_s:g} s in all, benchmark.host_check_s): its median (host/reference_p50_ms) and p10-p90 spread "
            f"(host/reference_spread_pct) say how fast the host's CPU ran and how far that moved; a {unit} that waits on "
            "the host launching its kernels runs at that speed."
        )
    lines.append(
        f"Memory: CUDA caching-allocator peaks (allocated, reserved) over the warm-up including compilation (job_*) and over the measured {units}; NVML per-process usage; CPU peak RSS."
        if device.type == "cuda"
        else "Memory: CPU peak RSS only (no device allocator on the CPU)."
    )
    if paired:
        lines.append(
            "Paired eager baseline: an eager copy with the same initial weights and batches, in the same worker, its rounds alternating with the compiled "
            "variant's (C E | E C | C E ..., the compiled variant's solo round opening the first pair) so the host's changing speed hits both alike; each pair of adjacent rounds gives a ratio (eager round median / "
            "compiled round median), and speedup/vs_eager is their Hodges-Lehmann estimate with Wilcoxon's signed-rank interval (rank-based: a round the host "
            "stalled is one outlier among many pairs), widened for autocorrelated pairs. Memory figures come from solo phases only: an eager probe runs alone "
            "first and is freed, then the compiled variant warms up and runs one round before the eager copy exists; memory/ratio_vs_eager compares reserved peaks "
            "(CUDA-graph pools show as reserved, not allocated)."
        )
    if parallel != "none":
        lines.append(
            f"Distributed ({parallel}, {world_size} ranks started by torchrun, one process per device): every rank times its own {units}, the ranks "
            f"meeting at a barrier before the timed rounds and after each look; after the measured loop the per-{unit} times are gathered and the job's are its slowest "
            f"rank's own (the rank with the largest median; the statistics above are of those); "
            "trainer.batch_size is per rank and throughput counts every rank; each rank's own median, memory, compile time and graph counts "
            "are logged as rank/* histories (step = rank) with their maximum and spread; the paired eager copy runs in the same process group."
        )
    lines.append(ISOLATION.get(worker_start, ISOLATION["spawn"]))
    if overlap_cpus:
        lines.append(
            f"Overlap (benchmark.overlap): this job shared its GPU with up to {benchmark.overlap_jobs - 1} other job(s), "
            f"which may have been compiling; while this job ran its eager probe and everything after its compilation "
            f"(warm-up, timed rounds, diagnostics) it held the GPU's measure lock, and the other jobs' workers and their compile processes were "
            f"paused (SIGSTOP) until it let go; this worker compiled on CPU cores {overlap_cpus} only and, while it held "
            "the lock, ran on all of the GPU's cores (the paused workers' too), as without overlap. The lock's holds, "
            "the workers each paused and the cores it ran on are in run_info.json (measure_gate)."
        )
    return "\n".join(lines)


NOTHING_CARRIES = "nothing (compile caches in memory, CUDA context, peak counters) carries over between jobs."
ISOLATION = {
    "spawn": f"Isolation: the job ran in a fresh spawned Python process; {NOTHING_CARRIES}",
    "template": "Isolation: the job ran in a process of its own, forked from a template process (its sweep's, or the one PIPELINE_TEMPLATE_SOCKET names), which had "
    "imported torch and the model libraries once and holds no CUDA context, compiled code or compiler state (checked "
    f"before every fork, and recorded in run_info.json as worker_start_state); {NOTHING_CARRIES}",
}
