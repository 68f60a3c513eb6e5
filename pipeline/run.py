"""Entry point: `python -m pipeline.run [-m] [overrides]`.

This process is the parent of each job: it validates the config, opens the job's MLflow run, spawns a
fresh worker process for the training, enforces the timeout, and logs whatever comes back (a result,
a failure, or a crash) before closing the run. It never trains and never initializes CUDA.
Exit code: 0 when every job finished, 1 when any failed (or could not be recorded), 2 for bad input,
130 when interrupted.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from pipeline.provenance import command_line
from pipeline.result import FAILED, FINISHED, KILLED, JobResult
from pipeline.schema import ConfigError, register_configs, to_container, validate
from pipeline.sweep import SweepContext, config_hash

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = PROJECT_ROOT / "conf"
SKIPPED, NOT_SYNCED, BAD_INPUT = "SKIPPED", "NOT_SYNCED", "BAD_INPUT"
OUTCOMES: list[str] = []  # one per job run by this process


def _job_label(hc: Any) -> str:
    return f"job {hc.job.num}" if hc.mode == RunMode.MULTIRUN else "job"


def report_config_error(err: ConfigError) -> None:
    for e in getattr(err, "errors", [err]):
        print(f"config error: {e}", file=sys.stderr, flush=True)


def run_job(cfg: DictConfig) -> str:
    """One job, start to finish. Returns its outcome; never raises for a failed job."""
    signals = SchedulerSignals()
    with signals.installed():
        return _run_job(cfg, signals)


def _run_job(cfg: DictConfig, signals: SchedulerSignals) -> str:
    from pipeline.progress import JobProgress, sweep_status
    from pipeline.tracking import Tracker, TrackingUnavailable, check_reachable, identity, redacted, run_name

    hc = HydraConfig.get()
    job_dir = Path(hc.runtime.output_dir)
    sweep = SweepContext.load(hc.sweep.dir) if hc.mode == RunMode.MULTIRUN else None
    try:
        validate(cfg)
        resolved = to_container(cfg)
    except ConfigError as err:
        report_config_error(err)
        if sweep is not None:
            _record_bad_job(cfg, sweep, err)
        return BAD_INPUT
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / "config.yaml").write_text(OmegaConf.to_yaml(redacted(resolved)))  # uploaded: no secrets
    name = run_name(resolved)
    chash = config_hash(resolved)
    tracker: Tracker | None = None
    try:
        if sweep is not None and sweep.resume:  # the store decides whether this job runs at all
            tracker = Tracker.from_config(resolved["mlflow"])
            done = tracker.finished_run_for(sweep.sweep_id, chash)
            if done is not None:
                print(
                    f"{name}: already FINISHED in sweep {sweep.sweep_id} (run {done.info.run_id}), skipped",
                    flush=True,
                )
                return SKIPPED
        else:  # a store that cannot be used stops the job before anything starts
            check_reachable(resolved["mlflow"]["tracking_uri"])
    except TrackingUnavailable as err:
        print(f"mlflow error: {err}", file=sys.stderr, flush=True)
        return FAILED

    tags = {**identity(resolved), "config_hash": chash, "job_dir": str(job_dir)}
    if sweep is not None:
        tags.update({"sweep_id": sweep.sweep_id, "job_num": str(hc.job.num)})
    for key in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"):
        if key in os.environ:
            tags[key.lower()] = os.environ[key]
    run = JobRun(tracker, resolved["mlflow"], name, tags, sweep.parent_run_id if sweep else None)

    def open_run() -> None:  # while the worker imports its libraries
        with signals_held():  # a Ctrl-C or scancel now lands once the run exists, to record it
            run_id = run.open()
        print(f"{_job_label(hc)} {name}: run {run_id}, output {job_dir}", flush=True)

    started = time.monotonic()
    display = JobProgress(name)
    try:
        with signals.interruptible():
            result = _run_worker(resolved, job_dir, sweep, display, on_started=open_run)
    except TrackingUnavailable as err:  # the store went away after the check; the worker was stopped
        display.close()
        print(f"mlflow error: {err}", file=sys.stderr, flush=True)
        return FAILED
    except BaseException as interrupt:  # Ctrl-C, SIGTERM, a scheduler's signal: the job is KILLED
        display.close()
        result = JobResult()
        result.fail(KILLED, "Interrupted", f"interrupted ({type(interrupt).__name__}: {interrupt})")
        try:
            run_id = run.open()  # stopped before its run was opened: the run records that too
        except Exception as exc:
            print(f"mlflow error: could not record the interrupted job ({exc})", file=sys.stderr, flush=True)
        else:
            _finish(run.tracker, run_id, resolved, result, job_dir, time.monotonic() - started)
        if in_submitit_job():  # only this job was stopped: the sweep collects its outcome and goes on
            print(_one_line(name, result), flush=True)
            return KILLED
        raise
    display.close()
    outcome = _finish(run.tracker, run.open(), resolved, result, job_dir, time.monotonic() - started)
    print(_one_line(name, result), flush=True)
    if sweep is not None:
        print(sweep_status(Path(sweep.sweep_dir), sweep.total_jobs), flush=True)
    return outcome


@contextlib.contextmanager
def signals_held(
    signums: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR2),
) -> Iterator[None]:
    """Hold these signals during a short critical section, then deliver them to their own handlers.
    Python takes signals in the main thread only; elsewhere (a launcher's thread) nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {
        signum: signal.signal(signum, lambda signum, frame: caught.append(signum)) for signum in signums
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(caught):
            signal.raise_signal(signum)


class JobRun:
    """The job's MLflow run, opened once, as late as possible: the worker is already importing its
    libraries while this process imports MLflow and creates the run."""

    def __init__(
        self,
        tracker: Any,
        mlflow_cfg: dict[str, Any],
        name: str,
        tags: dict[str, str],
        parent_run_id: str | None,
    ):
        self.tracker, self.mlflow_cfg, self.name, self.tags = tracker, mlflow_cfg, name, tags
        self.parent_run_id = parent_run_id
        self.run_id: str | None = None

    def open(self) -> str:
        """The run's id, creating the run (and the tracker) the first time."""
        if self.run_id is None:
            from pipeline.tracking import Tracker, TrackingUnavailable

            try:
                if self.tracker is None:
                    self.tracker = Tracker.from_config(self.mlflow_cfg)
                self.run_id = self.tracker.start_run(self.name, self.tags, parent_run_id=self.parent_run_id)
            except TrackingUnavailable:
                raise
            except Exception as exc:  # the store answered, but not with a run
                raise TrackingUnavailable(
                    f"could not open the job's run: {type(exc).__name__}: {exc}"
                ) from exc
        return self.run_id


# What SLURM's signals mean for a job running under submitit (hydra/launcher=slurm). slurmstepd sends
# them to every process of the job step, the worker included.
SCHEDULER_SIGNALS = {
    signal.SIGTERM: "the scheduler stopped the job (scancel, or its time limit was reached)",
    signal.SIGUSR2: "the scheduler's warning: the job's time limit is near (hydra.launcher.signal_delay_s), or it is preempted",
}


def in_submitit_job() -> bool:
    return bool(os.environ.get("SUBMITIT_EXECUTOR"))


class SchedulerSignal(KeyboardInterrupt):
    """A scheduler's signal stopped the job."""


class SchedulerSignals:
    """SLURM's SIGTERM (scancel, time limit) and SIGUSR2 (the warning before the limit) in a submitit
    job. Submitit only logs SIGTERM ("Bypassing signal SIGTERM"), so the job would run on until
    SIGKILL, and answers SIGUSR2 by requeuing the job or raising UncompletedJobError. Installed first
    thing in the job, these handlers remember a signal that comes while the job is starting (before its
    MLflow run exists) and raise SchedulerSignal as soon as the worker would start, or at once while
    it runs; the job then kills its worker and ends its run KILLED with the reason, within SLURM's
    KillWait. A signal that comes while the result is being logged only is remembered, so the logging
    completes. Outside submitit this does nothing: `main` handles SIGTERM."""

    def __init__(self) -> None:
        self.received: str | None = None
        self._armed = False

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.received = f"{signal.Signals(signum).name}: {SCHEDULER_SIGNALS[signum]}"
        if self._armed:
            self._armed = False
            raise SchedulerSignal(self.received)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if not in_submitit_job():
            yield
            return
        previous = {signum: signal.signal(signum, self._on_signal) for signum in SCHEDULER_SIGNALS}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """The worker's span: a signal already received, or one that comes now, raises SchedulerSignal."""
        if self.received:
            raise SchedulerSignal(self.received)
        self._armed = True
        try:
            yield
        finally:
            self._armed = False


def _run_worker(
    resolved: dict[str, Any],
    job_dir: Path,
    sweep: SweepContext | None,
    display: Any,
    on_started: Any = None,
) -> JobResult:
    from pipeline.gpu_pool import gpu_slot, pool_lock_dir
    from pipeline.supervisor import run_worker

    def run(extra_env: dict[str, str] | None = None) -> JobResult:
        extra_env = {**(extra_env or {}), "PIPELINE_COMMAND": command_line()}
        cache = inductor_cache_dir(resolved, job_dir, sweep)
        return run_worker(
            resolved,
            job_dir,
            resolved["trainer"]["timeout_s"],
            cache,
            display.update,
            display.line,
            extra_env,
            on_started,
        )

    pool = resolved.get("gpu_pool") or os.environ.get("PIPELINE_GPU_POOL")  # set by hydra/launcher=local_gpus
    if not pool:
        return run()
    with gpu_slot(pool, pool_lock_dir(), on_wait=display.line) as env:
        display.line(f"using GPU {env['PIPELINE_GPU_INDEX']} of gpu_pool={pool}")
        result = run(env)
    result.info["gpu_pool_index"] = int(env["PIPELINE_GPU_INDEX"])
    return result


def inductor_cache_dir(resolved: dict[str, Any], job_dir: Path, sweep: SweepContext | None) -> Path:
    """Shared by a sweep's jobs by default; per job with `diagnose.cold_cache=true`; or as configured."""
    diagnose = resolved["diagnose"]
    if diagnose.get("cold_cache"):
        return job_dir / "inductor_cache"
    if diagnose.get("cache_dir"):
        return Path(diagnose["cache_dir"]).resolve()
    return Path(sweep.sweep_dir if sweep else job_dir) / "inductor_cache"


def _finish(
    tracker: Any, run_id: str, resolved: dict[str, Any], result: JobResult, job_dir: Path, wall_s: float
) -> str:
    """Keep the result on disk first, then log it; a store lost mid-job loses nothing."""
    result.mlflow_run_id = run_id
    result.metrics["job_wall_s"] = wall_s
    result.info["parent_pid"] = os.getpid()
    write_job_files(result, job_dir, resolved["trainer"]["warmup_steps"])
    result.write(job_dir / "result.json")
    logging_started = time.monotonic()
    try:
        tracker.log_result(run_id, resolved, result, job_dir)
    except Exception as exc:
        print(
            f"mlflow error: could not log run {run_id} ({type(exc).__name__}: {exc}); the result is kept in {job_dir / 'result.json'}; upload it later with `python -m pipeline.report --sync {job_dir}`",
            file=sys.stderr,
            flush=True,
        )
        return NOT_SYNCED
    result.mlflow_synced = True
    result.info["mlflow_log_s"] = time.monotonic() - logging_started  # local copy only: MLflow has it already
    result.write(job_dir / "result.json")
    return result.status


def write_job_files(result: JobResult, job_dir: Path, warmup_steps: int) -> None:
    """Per-step times as CSV, and the error with its traceback, beside the result."""
    with open(job_dir / "step_times.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["variant", "step", "step_time_ms"])
        for variant, key in (("compiled_or_eager", "step_time_ms"), ("paired_eager", "eager_step_time_ms")):
            for i, ms in enumerate(result.series.get(key, [])):
                writer.writerow([variant, warmup_steps + i, f"{ms:.6f}"])
    if result.diagnostics:
        (job_dir / "diagnostics.json").write_text(json.dumps(result.diagnostics, indent=1, default=str))
    if result.error:
        (job_dir / "error.txt").write_text(
            f"{result.error.type}: {result.error.message}\n\n{result.error.traceback}"
        )


def _one_line(name: str, result: JobResult) -> str:
    if result.status == FINISHED:
        m = result.metrics
        parts = [f"step {m['step_time_ms_p50']:.2f} ms (p50)"]
        if "compile_time_s" in m:
            parts.append(f"compile {m['compile_time_s']:.1f} s")
        if "speedup_vs_eager" in m:
            parts.append(f"{m['speedup_vs_eager']:.2f}x vs eager")
        if "peak_mem_reserved_gib" in m:
            parts.append(
                f"peak {m['peak_mem_reserved_gib']:.2f} GiB reserved ({m['peak_mem_allocated_gib']:.2f} allocated)"
            )
        if m.get("graph_breaks"):
            parts.append(
                graph_break_note(int(m["graph_breaks"]), result.diagnostics.get("graph_breaks") or [])
            )
        if result.info.get("measurement_note"):
            parts.append(result.info["measurement_note"])
        return f"{name}: FINISHED: " + ", ".join(parts)
    assert result.error is not None
    return f"{name}: {result.status}: {result.error.type}: {result.error.message}"


def graph_break_note(count: int, breaks: list[dict[str, Any]]) -> str:
    """`3 graph breaks (first at models/x.py:31: Unsupported Tensor.item() call ...); compile.fullgraph=false let them through`."""
    note = f"{count} graph break{'s' if count != 1 else ''}"
    if breaks:
        where = breaks[0]["location"]
        if where.startswith(str(PROJECT_ROOT) + "/"):
            where = where[len(str(PROJECT_ROOT)) + 1 :]
        note += f" (e.g. {where}: {breaks[0]['reason'][:80]}; all in diagnostics.json)"
    return note + ", compile.fullgraph=false let them through"


def _record_bad_job(cfg: DictConfig, sweep: SweepContext, err: ConfigError) -> None:
    """A job of a sweep with bad values is still listed in the sweep, as FAILED with the error."""
    from pipeline.tracking import Tracker

    try:
        tracker = Tracker(sweep.tracking_uri, sweep.experiment)
        overrides = " ".join(HydraConfig.get().overrides.task)
        tags = {
            "sweep_id": sweep.sweep_id,
            "error_type": "ConfigError",
            "error_message": str(err),
            "overrides": overrides,
        }
        run_id = tracker.start_run(
            f"bad input: {err.key}={err.value}"[:250], tags, parent_run_id=sweep.parent_run_id
        )
        tracker.end_run(run_id, FAILED)
    except Exception as exc:
        print(f"mlflow error: could not record the bad job ({exc})", file=sys.stderr, flush=True)


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> str | float:
    outcome = run_job(cfg)
    OUTCOMES.append(outcome)
    if cfg.sweep.objective:  # a search (sweep=compile_search) minimizes this metric
        return objective_value(outcome, cfg.sweep.objective)
    return outcome


def objective_value(outcome: str, metric: str) -> float | str:
    """The job's value of `metric`. A job that did not finish returns its outcome (`FAILED`, ...):
    hydra's Optuna sweeper cannot turn that into a number, so it records the trial as failed and the
    search goes on (hydra.sweeper.max_failure_rate allows it). NaN would crash optuna's `tell`."""
    path = Path(HydraConfig.get().runtime.output_dir) / "result.json"
    if outcome != FINISHED or not path.exists():
        return outcome
    value = json.loads(path.read_text())["metrics"].get(metric)
    return float(value) if value is not None else f"{metric} was not measured"


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def exit_code() -> int:
    from pipeline.callbacks import SWEEP_FAILURES

    if BAD_INPUT in OUTCOMES and all(o in (BAD_INPUT,) for o in OUTCOMES):
        return 2
    if any(o not in (FINISHED, SKIPPED) for o in OUTCOMES) or SWEEP_FAILURES:
        return 1
    return 0


def main() -> None:
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from pipeline.callbacks import close_interrupted_sweep
    from pipeline.schema import describe_compose_error
    from pipeline.tracking import TrackingUnavailable

    register_configs()
    signal.signal(signal.SIGTERM, _raise_interrupt)
    user_wants_traceback = os.environ.get("HYDRA_FULL_ERROR") == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let composition errors reach us, to print them in one line
    try:
        _hydra_main()
    except KeyboardInterrupt as interrupt:
        reason = f"interrupted by {interrupt.args[0] if interrupt.args else 'SIGINT'}"
        close_interrupted_sweep(reason)
        print(reason, file=sys.stderr, flush=True)
        sys.exit(130)
    except TrackingUnavailable as err:  # the sweep callback could not reach the store: nothing started
        print(f"mlflow error: {err}", file=sys.stderr, flush=True)
        sys.exit(1)
    except (HydraException, OmegaConfBaseException) as err:
        if user_wants_traceback:
            close_interrupted_sweep(f"sweep failed: {err}")
            raise
        message = describe_compose_error(err)
        close_interrupted_sweep(f"config error: {message}")
        print(f"config error: {message}", file=sys.stderr, flush=True)
        sys.exit(2)
    except Exception as err:  # a bug or a launcher failure: never leave the sweep's runs RUNNING
        close_interrupted_sweep(f"sweep failed: {type(err).__name__}: {err}")
        raise
    sys.exit(exit_code())


if __name__ == "__main__":
    main()
