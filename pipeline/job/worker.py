"""The worker: a fresh Python process that turns one resolved config into one result file.

    python -m pipeline.job.worker --config job_config.json --result result.json

It runs the config's scenario, reports progress as `@@progress {json}` lines on stdout and writes the
result file at the end, failed or not. It never talks to MLflow: its parent does, so a crash is recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import faulthandler
import json
import math
import os
import signal
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

STARTED_AT = time.time()  # the interpreter reached this module (spawn + interpreter start are before it)

from pipeline.config.errors import ConfigError  # noqa: E402 - after STARTED_AT; no torch here
from pipeline.config.schema import WORKER_STARTS, Config, from_dict  # noqa: E402
from pipeline.job import lifeline  # noqa: E402
from pipeline.job.result import JobResult, write_timeout  # noqa: E402
from pipeline.jobdir import JobDir  # noqa: E402
from pipeline.measure.gate import parse_cpus, register_worker  # noqa: E402
from pipeline.progress import Progress, quiet  # noqa: E402
from pipeline.status import FAILED, FINISHED, NON_FINITE_LOSS  # noqa: E402


def resolve_device(name: str) -> Any:
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            why = "no CUDA device is visible to this worker (torch.cuda.is_available() is False)"
            raise ConfigError("device", name, why + "; use device=cpu or auto")
        local_rank = os.environ.get("LOCAL_RANK")  # a rank of a distributed job: its own GPU
        return torch.device("cuda", int(local_rank) if local_rank else torch.cuda.current_device())
    return torch.device(name)


def classify_error(exc: BaseException, cfg: Config) -> tuple[str, str]:
    """(error_type, message) for a failure inside the worker."""
    import torch

    if isinstance(exc, KeyboardInterrupt):
        return "Interrupted", "interrupted"
    if isinstance(exc, ConfigError):
        return "ConfigError", str(exc)
    if isinstance(exc, torch.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)
    ):
        return "OutOfMemoryError", str(exc)  # a CUDA OOM, or the CPU allocator refusing
    name, module = type(exc).__name__, type(exc).__module__ or ""
    graph_break = name in ("Unsupported", "UserError", "UncapturedHigherOrderOpError")
    if module.startswith("torch._dynamo") and cfg.compile.fullgraph and graph_break:
        return "GraphBreakInFullgraph", f"compile.fullgraph=true but Dynamo hit a graph break: {exc}"
    if module.startswith(("torch._dynamo", "torch._inductor")):
        return f"CompileError.{name}", str(exc)
    return name, str(exc)


def how_started() -> str:
    """`template` in a worker forked from a template (which hands it a lifeline pipe), else `spawn`."""
    template, spawn = WORKER_STARTS
    return template if os.environ.get(lifeline.LIFELINE_FD_ENV) else spawn


def rank_of_this_process(cfg: Config) -> int:
    """This worker's rank in a distributed job (torchrun's RANK), 0 otherwise (whatever RANK says)."""
    return int(os.environ.get("RANK", "0")) if cfg.parallel.distributed else 0


def start_state() -> dict[str, Any]:
    """What this process holds of torch before the job starts (a forked worker must inherit nothing but
    imports: no CUDA context, Dynamo state or compiled code); imports nothing."""
    torch = sys.modules.get("torch")
    dynamo_utils = sys.modules.get("torch._dynamo.utils")
    convert_frame = sys.modules.get("torch._dynamo.convert_frame")
    codecache = sys.modules.get("torch._inductor.codecache")
    return {
        "torch_imported": torch is not None,
        "cuda_initialized": bool(torch is not None and torch.cuda.is_initialized()),
        "dynamo_counters": sum(sum(c.values()) for c in dynamo_utils.counters.values())
        if dynamo_utils
        else 0,
        "dynamo_compile_times": len(dynamo_utils.compilation_time_metrics) if dynamo_utils else 0,
        "dynamo_frames_seen": len(convert_frame.input_codes.seen) if convert_frame else 0,
        "inductor_modules_loaded": len(codecache.PyCodeCache.modules) if codecache else 0,
    }


def run_job(cfg: Config, result: JobResult, out_dir: Path) -> None:
    """Run the config's scenario and fill `result` (raises on failure, keeping what was known before)."""
    # Imported here, not at the top: the timeline's first phase is what these imports cost (torch).
    from pipeline.measure import settings
    from pipeline.measure.environment import environment, init_device_libraries
    from pipeline.scenarios import runner_class
    from pipeline.scenarios.protocol import Timeline, WorkerContext

    settings_at_start = settings.snapshot()  # before the job sets anything (precision flags, ...)
    timeline = Timeline(started=STARTED_AT)
    result.info["worker_module_loaded_at"] = STARTED_AT
    try:
        scenario_type = runner_class(cfg.scenario)
        timeline.mark("imports")
        lifeline.wait_for_the_job()  # its run open, its CPUs quiet (the timeline says how long)
        timeline.mark("waiting_for_the_job")
        device = resolve_device(cfg.device)
        if device.type == "cuda":
            import torch

            torch.cuda.set_device(device)
        result.environment = environment(device)
        if cfg.parallel.distributed:
            from pipeline.axes.parallel import configure_dynamo, init_process_group

            result.info["process_group_backend"] = init_process_group(device)
            configure_dynamo(cfg.parallel)
            timeline.mark("process_group")
            if cfg.diagnose.comm:  # the machine's own bandwidth, once per machine, the device still empty
                from pipeline.diagnose import comm_probe

                probe = comm_probe.ensure(device, JobDir(out_dir).comm / comm_probe.PROBE_FILE)
                result.info["comm_probe"] = (
                    {"seconds": probe.seconds, "machine": probe.machine} if probe else None
                )
                timeline.mark("comm_probe")
        ctx = WorkerContext(
            device=device,
            progress=Progress() if rank_of_this_process(cfg) == 0 else quiet,
            out_dir=out_dir,
            timeline=timeline,
            settings_at_start=settings_at_start,
            worker_start=how_started(),
        )
        scenario = scenario_type(cfg, ctx)
        result.work = dataclasses.asdict(scenario.work)  # what a unit did and what it is judged on
        result.method = scenario.method()
        init_device_libraries(device)
        timeline.mark("device_init")
        report = scenario.run()
        result.metrics.update(report.metrics())
        result.series.update(report.series)
        result.diagnostics.update(report.diagnostics)
        result.info.update(report.info)
        if cfg.parallel.distributed:
            import torch.distributed as dist

            dist.destroy_process_group()
    finally:
        result.info["timeline"] = {k: round(v, 3) for k, v in timeline.phases.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", required=True, help="resolved job config (JSON)")
    parser.add_argument("--result", required=True, help="where to write the result file")
    args = parser.parse_args(argv)
    faulthandler.enable()  # a segfault still leaves a Python stack in the worker log
    # SLURM's time-limit warning reaches every process of the job; the job's parent decides what it means.
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)

    cfg = from_dict(json.loads(Path(args.config).read_text()))
    rank = rank_of_this_process(cfg)
    # each rank its own; the supervisor merges them
    result_path = JobDir(Path(args.result).parent).rank_result(rank)
    lifeline.hold(
        timeout_s=cfg.trainer.timeout_s,
        on_timeout=lambda why: write_timeout(result_path, why, worker_pid=os.getpid()),
    )
    library_warnings = keep_library_warnings(verbose=cfg.verbose)
    result = JobResult(info={"worker_pid": os.getpid()})
    if cfg.parallel.distributed:
        result.info["rank"] = rank
    result.info["worker_start_state"] = start_state()
    pinned = pin_to_cpus(os.environ.get("PIPELINE_CPUS", ""))
    if pinned:
        result.info["overlap"] = {"cpus": pinned, "gpu_slot": os.environ.get("PIPELINE_GPU_SLOT")}
    # benchmark.overlap: registered before any device work, so that a job measuring meanwhile pauses
    # this one's start too (its CUDA context, its model's build), not only its compilation
    register_worker()
    try:
        run_job(cfg, result, Path(args.result).parent)
        result.status = FINISHED
        over_compile_budget(cfg, result)
        non_finite_loss(result)
    except BaseException as exc:
        result.info["failed_at"] = time.time()  # the rank that failed first is the job's failure
        error_type, message = classify_error(exc, cfg)
        prefix = f"rank {rank}: " if cfg.parallel.distributed else ""
        result.fail(FAILED, error_type, prefix + message, traceback.format_exc())
        if cfg.parallel.distributed:
            from pipeline.axes.parallel import is_peer_failure

            result.info["peer_failure"] = is_peer_failure(exc)  # a broken collective: another rank's fault
        _record_memory_at_failure(result)
    finally:
        if not lifeline.parent_alive():  # its job is gone (a failure writing to it is no result)
            os._exit(1)
        if library_warnings:
            result.diagnostics["library_warnings"] = library_warnings
        result.write(result_path)
    if result.error:  # a finished job's result is the parent's last line; a failure is also in worker.log
        print(f"worker: {result.status} ({result.error.type}: {result.error.message})", flush=True)
    return 0 if result.status == FINISHED else 1


def pin_to_cpus(spec: str) -> list[int]:
    """benchmark.overlap: run on the slot's cores only (PIPELINE_CPUS, `0,1,2`), with as many torch and
    compile threads, so a compiling job never takes a measuring one's cores. Returns the cores ([]: none)."""
    cpus = sorted(parse_cpus(spec))
    if not cpus:
        return []
    os.sched_setaffinity(0, cpus)
    os.environ["OMP_NUM_THREADS"] = os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = str(len(cpus))
    torch = sys.modules.get("torch")  # a worker forked from the template has torch imported already
    if torch is not None:
        torch.set_num_threads(len(cpus))
        inductor_config = sys.modules.get("torch._inductor.config")
        if inductor_config is not None:
            inductor_config.compile_threads = len(cpus)
    return cpus


# Warnings a library gives about its own future (deprecations): the job's output is not where to act on them.
LIBRARY_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)
# UserWarnings torch raises about its own internals or as a performance hint, seen on every GPU job
# that reaches them (inductor's autotuner on TypedStorage; fp32 matmuls without TF32): kept the same way.
LIBRARY_USER_WARNINGS = (
    "TypedStorage is deprecated",
    "TensorFloat32 tensor cores for float32 matrix multiplication",
)


def keep_library_warnings(*, verbose: bool) -> list[str]:
    """Unless `verbose`, the libraries' deprecation and future warnings (and LIBRARY_USER_WARNINGS) go,
    once each, to the list returned (diagnostics.json's `library_warnings`) instead of the output."""
    kept: list[str] = []
    if verbose:
        return kept
    show = warnings.showwarning

    def keep(message: Any, category: type[Warning], filename: str, lineno: int, *args: Any) -> None:
        if not (
            issubclass(category, LIBRARY_WARNINGS)
            or (issubclass(category, UserWarning) and str(message).startswith(LIBRARY_USER_WARNINGS))
        ):
            show(message, category, filename, lineno, *args)
            return
        text = f"{category.__name__}: {message} ({filename}:{lineno})"
        if text not in kept:
            kept.append(text)

    warnings.showwarning = keep
    return kept


def over_compile_budget(cfg: Config, result: JobResult) -> None:
    """A job whose compilation took longer than `compile.budget_s` fails; its figures stay."""
    budget, compile_s = cfg.compile.budget_s, result.metrics.get("compile/total_s")
    if budget is not None and compile_s is not None and compile_s > budget:
        result.fail(
            FAILED,
            "OverCompileBudget",
            f"compilation took {compile_s:.1f} s, over compile.budget_s={budget:g} s (its figures are kept)",
        )


def non_finite_loss(result: JobResult) -> None:
    """A job whose training loss became NaN or infinite trained nothing: it fails (`NonFiniteLoss`) so it
    is never ranked; its figures stay, with how many steps' loss was not finite and the first."""
    losses = result.series.get("curve/loss") or []
    bad = [step for step, loss in enumerate(losses) if not math.isfinite(loss)]
    if not bad:
        return
    first = bad[0]
    result.metrics["loss/non_finite_steps"] = len(bad)
    result.metrics["loss/first_non_finite_step"] = first
    what = "NaN" if math.isnan(losses[first]) else "infinite"
    eager = result.series.get("curve/eager_loss") or []
    paired = (
        "; the paired eager copy's loss stayed finite: the compiled step computes something else"
        if eager and all(math.isfinite(loss) for loss in eager)
        else ""
    )
    result.fail(
        FAILED,
        NON_FINITE_LOSS,
        f"the loss is {what} from step {first} ({len(bad)} of {len(losses)} steps not finite): training "
        f"diverged (trainer.optimizer.lr, precision, the model's numerics); its figures are kept{paired}",
    )


def _record_memory_at_failure(result: JobResult) -> None:
    """Peak memory up to the failure (an out-of-memory error is only useful with it)."""
    with contextlib.suppress(Exception):
        import torch

        from pipeline.measure.memory import cpu_rss_peak_gib, gib

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            result.metrics["memory/job_peak_allocated_gib"] = gib(torch.cuda.max_memory_allocated())
            result.metrics["memory/job_peak_reserved_gib"] = gib(torch.cuda.max_memory_reserved())
        result.metrics["memory/cpu_rss_peak_gib"] = cpu_rss_peak_gib()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # The result file is written: skip interpreter teardown (CUDA context, inductor's compile-worker
    # pool), which can take seconds and measures nothing. The parent cleans up the process group.
    os._exit(code)
