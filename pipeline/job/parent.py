"""Stage 2: the parent of one job; it never trains and never initializes CUDA. It checks the store,
starts the worker (:mod:`pipeline.job.supervisor`), opens the job's MLflow run while the worker imports,
and logs whatever comes back, keeping the result on disk first so a store lost mid-job loses nothing."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from pipeline.config.compose import config_error_lines
from pipeline.config.errors import ConfigError
from pipeline.config.schema import Config, to_dict
from pipeline.display import wrapped
from pipeline.identity import config_hash, job_tags, run_name
from pipeline.job.gpu_pool import gpu_slot, pool_lock_dir
from pipeline.job.outcome import noise, one_line, run_payload
from pipeline.job.progress import JobProgress, sweep_status
from pipeline.job.result import JobResult, refuse_overwrite, unsynced_results, write_skipped
from pipeline.job.signals import SchedulerSignals, in_submitit_job, signals_held
from pipeline.job.supervisor import WorkerLaunch, run_worker
from pipeline.job.worker_start import plan
from pipeline.jobdir import JobDir, SweepDir
from pipeline.measure.gate import resume_all
from pipeline.provenance import command_line, sync_command
from pipeline.redaction import looks_secret, redacted, scrub, secret_values
from pipeline.status import FAILED, KILLED, NOT_SYNCED, RESULT_NOT_LOGGED, SKIPPED
from pipeline.sweep_context import SweepContext
from pipeline.tracking import Tracker, TrackingUnavailable, check_reachable, retry_bound
from pipeline.tracking.http import one_attempt
from pipeline.tracking.store import describe_store_error


@dataclass(frozen=True, kw_only=True)
class JobPlace:
    """Where a job runs: its folder, its number in a sweep, and the sweep (None for a single job)."""

    job_dir: Path
    sweep: SweepContext | None = None
    job_num: int | None = None


class JobParent:
    """One job, start to finish: `run()` returns its outcome; only an interrupt outside submitit raises."""

    def __init__(self, config: Config, place: JobPlace, signals: SchedulerSignals):
        self.config, self.place, self.signals = config, place, signals
        self.job_dir = place.job_dir
        self.folder = JobDir(place.job_dir)
        self.varied = place.sweep.axes if place.sweep else []
        self.secrets = secret_values(to_dict(config))  # masked in every line this job prints
        self.name = distinct_name(config, self.varied, place.job_num)
        self.config_hash = config_hash(config)
        self.display = JobProgress(self.name, verbose=bool(getattr(config, "verbose", False)))
        self.tracker: Tracker | None = None  # made once the store is known to answer, if not before
        self.run_id: str | None = None  # set by open_run()
        self.started = 0.0  # when the worker was asked for (job_wall_s counts from there)
        self.gpu_wait_s = 0.0  # waiting for a free GPU of gpu_pool (not the job's own time)

    def run(self) -> str:
        kept = unsynced_results(self.job_dir) if self.folder.result.exists() else []
        if kept:  # the folder of a job whose result MLflow never got: never overwritten
            self.say(f"job error: {refuse_overwrite('job folder', self.job_dir, kept)}", err=True)
            return FAILED
        try:
            self.job_dir.mkdir(parents=True, exist_ok=True)
            self.folder.run_id.unlink(missing_ok=True)
            self.folder.config_yaml.write_text(OmegaConf.to_yaml(redacted(to_dict(self.config))))
        except OSError as err:  # a full disk, a folder made read-only mid-sweep
            return self.unwritable(err)
        try:
            done = self.check_store()
        except TrackingUnavailable as err:
            self.say(f"mlflow error: {err}", err=True)
            return FAILED
        if done is not None:
            self.skipped(done)
            return SKIPPED
        self.started = time.monotonic()
        try:
            with self.signals.interruptible():
                result = self.supervise()
        except TrackingUnavailable as err:  # the store went away after the check; the worker was stopped
            self.display.close()
            self.say(f"mlflow error: {err}", err=True)
            return FAILED
        except OSError as err:  # the job's folder could not be written; the worker was stopped
            self.display.close()
            return self.unwritable(err)
        except BaseException as interrupt:  # Ctrl-C, SIGTERM, a scheduler's signal: the job is KILLED
            return self.interrupted(interrupt)
        self.display.close()
        with signals_held():  # a Ctrl-C while the result is logged lands once it is: no run left RUNNING
            outcome = self.finish(result)
        self.last_line(result)
        self.sweep_line()
        return outcome

    # ----------------------------------------------------------------------------- phases
    def check_store(self) -> str | None:
        """Stop the job if the store cannot be used; resuming, the id of the store's FINISHED run of
        this configuration in the sweep, if any (the job is skipped)."""
        sweep = self.place.sweep
        if sweep is None or not sweep.resume:
            check_reachable(self.config.mlflow.tracking_uri)
            return None
        self.tracker = Tracker.from_config(self.config.mlflow)
        done = self.tracker.finished_run_for(sweep.sweep_id, self.config_hash)
        return done.run_id if done is not None else None

    def skipped(self, run_id: str) -> None:
        """A resumed job that already finished: its result names that run, and the sweep counts it done."""
        assert self.place.sweep is not None
        print(
            f"{self.name}: already FINISHED in sweep {self.place.sweep.sweep_id} (run {run_id}), skipped",
            flush=True,
        )
        write_skipped(self.folder.result, run_id, self.place.job_num)
        self.sweep_line()

    def sweep_line(self) -> None:
        if self.place.sweep is not None:
            print(sweep_status(Path(self.place.sweep.sweep_dir), self.place.sweep.total_jobs), flush=True)

    def tags(self) -> dict[str, str]:
        tags = job_tags(self.config, self.varied, self.job_dir)
        if self.place.sweep is not None:
            tags.update({"sweep_id": self.place.sweep.sweep_id, "job_num": str(self.place.job_num)})
        slurm = ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID")
        return tags | {key.lower(): os.environ[key] for key in slurm if key in os.environ}

    def open_run(self) -> str:
        """The job's run id, opening the run (and the tracker) the first time, as late as possible."""
        if self.run_id is None:
            try:
                if self.tracker is None:
                    self.tracker = Tracker.from_config(self.config.mlflow)
                parent = self.place.sweep.parent_run_id if self.place.sweep else None
                self.run_id = self.tracker.start_run(self.name, self.tags(), parent_run_id=parent)
                with contextlib.suppress(OSError):  # a full disk: result.json names the run too
                    # --sync logs a late result to this run, nowhere else
                    self.folder.run_id.write_text(self.run_id + "\n")
            except TrackingUnavailable:
                raise
            except Exception as exc:  # the store answered, but not with a run
                why = f"could not open the job's run: {type(exc).__name__}: {exc}"
                raise TrackingUnavailable(why) from exc
        return self.run_id

    def on_worker_started(self) -> None:
        """While the worker imports its libraries: a Ctrl-C or scancel now lands once the run exists."""
        with signals_held():
            run_id = self.open_run()
        label = f"job {self.place.job_num}" if self.place.sweep is not None else "job"
        print(f"{label} {self.name}: run {run_id}, output {self.job_dir}", flush=True)

    def supervise(self) -> JobResult:
        """The worker's run, on a GPU of the pool when there is one."""
        launch = WorkerLaunch(
            config=self.config,
            job_dir=self.job_dir,
            cache_dir=inductor_cache_dir(self.config, self.job_dir, self.place.sweep),
            on_progress=self.display.update,
            on_line=lambda text: self.display.worker_line(scrub(text, self.secrets)),
            on_started=self.on_worker_started,
            extra_env={"PIPELINE_COMMAND": command_line()},
            start=plan(
                self.config.benchmark.worker_start,
                Path(self.place.sweep.sweep_dir) if self.place.sweep else None,
                distributed=self.config.parallel.distributed,
            ),
        )
        pool = self.config.gpu_pool or os.environ.get("PIPELINE_GPU_POOL")  # set by hydra/launcher=local_gpus
        if not pool:
            return run_worker(launch)
        nproc = self.config.parallel.nproc  # a distributed job's ranks, one GPU each
        # benchmark.overlap: one job measures, the others compile
        per_gpu = self.config.benchmark.overlap_jobs if self.config.benchmark.overlap else 1
        asked = time.monotonic()
        sweep = self.place.sweep
        turn = f"{sweep.started_at:017.6f}-{self.place.job_num or 0:06d}" if sweep is not None else None
        with gpu_slot(
            pool, pool_lock_dir(), on_wait=self.display.line, count=nproc, per_gpu=per_gpu, turn=turn
        ) as env:
            self.gpu_wait_s = time.monotonic() - asked
            shared = ""
            if per_gpu > 1:
                shared = f" (slot {env['PIPELINE_GPU_SLOT']} of {per_gpu}, CPU cores {env['PIPELINE_CPUS']}: benchmark.overlap)"
            self.display.line(f"using GPU {env['PIPELINE_GPU_INDEX']} of gpu_pool={pool}{shared}")
            launch.extra_env.update(env)
            try:
                result = run_worker(launch)
            finally:
                if per_gpu > 1:  # a worker that died holding the device cannot let the GPU's other one go on
                    resume_all(Path(env["PIPELINE_MEASURE_LOCK"]))
        indices = [int(i) for i in env["PIPELINE_GPU_INDEX"].split(",")]
        result.info["gpu_pool_index"] = indices[0] if nproc == 1 else indices
        return result

    def interrupted(self, interrupt: BaseException) -> str:
        self.display.close()
        result = JobResult()
        result.fail(KILLED, "Interrupted", f"interrupted ({type(interrupt).__name__}: {interrupt})")
        try:
            self.open_run()  # stopped before its run was opened: the run records that too
        except Exception as exc:
            self.say(f"mlflow error: could not record the interrupted job ({exc})", err=True)
        else:
            self.finish(result)
        if in_submitit_job():  # only this job was stopped: the sweep collects its outcome and goes on
            self.last_line(result)
            return KILLED
        raise interrupt

    def finish(self, result: JobResult) -> str:
        """Keep the result on disk first, then log it; where the disk cannot keep it, MLflow still gets it."""
        run_id = self.open_run()
        result.mlflow_run_id = run_id
        result.metrics["job/wall_s"] = time.monotonic() - self.started - self.gpu_wait_s
        if self.gpu_wait_s:
            result.metrics["job/gpu_wait_s"] = self.gpu_wait_s
        result.info["parent_pid"] = os.getpid()
        if self.place.sweep is not None:  # --sync tags a run it makes for the job with it
            result.info["job_num"] = self.place.job_num
        not_kept = ""
        try:
            write_job_files(result, self.folder, self.config)
            result.write(self.folder.result)
        except OSError as err:
            not_kept = f"{type(err).__name__}: {err}"
        logging_started = time.monotonic()
        assert self.tracker is not None
        try:  # a hung server (SIGSTOPped, overloaded) costs seconds, not every request's retries
            if self.config.mlflow.tracking_uri.startswith(("http://", "https://")):
                check_reachable(self.config.mlflow.tracking_uri)
        except TrackingUnavailable as err:
            return self.not_logged(run_id, str(err), not_kept, answering=False)
        try:
            self.tracker.log_payload(run_id, run_payload(self.config, result, self.job_dir))
        except Exception as exc:
            error = f"{type(exc).__name__}: {describe_store_error(exc, self.config.mlflow.tracking_uri)}"
            return self.not_logged(run_id, error, not_kept)
        result.mlflow_synced = True
        result.info["mlflow_log_s"] = time.monotonic() - logging_started  # local copy only: MLflow has it
        try:
            result.write(self.folder.result)
        except OSError as err:
            not_kept = not_kept or f"{type(err).__name__}: {err}"
        if not_kept:  # MLflow has the result; the disk does not: the user has something to fix
            self.say(
                f"job error: the result could not be kept in {self.folder.result} ({not_kept}); MLflow has it "
                f"(run {run_id}, {result.status})",
                err=True,
            )
            return FAILED
        return result.status

    def unwritable(self, err: OSError) -> str:
        """The job's folder cannot be written: one line, and its run (made now if need be) closed
        FAILED with the reason, so the sweep accounts for the job."""
        reason = f"cannot write the job's folder {self.job_dir} ({type(err).__name__}: {err.strerror or err})"
        self.say(f"job error: {reason}; the job did not run", err=True)
        try:
            run_id = self.open_run()
            assert self.tracker is not None
            self.tracker.close_run(run_id, FAILED, error_type="JobFolderNotWritable", message=reason)
        except Exception as exc:
            self.say(f"mlflow error: could not record the job ({type(exc).__name__}: {exc})", err=True)
        return FAILED

    def not_logged(self, run_id: str, error: str, not_kept: str, *, answering: bool = True) -> str:
        """The store took the run but not the whole result: close the run FAILED with the reason in one
        attempt (the store already failed a request) where it still answers (`answering`), else it stays
        RUNNING until `--sync` completes it or closes it KILLED; and say so. `not_kept`: why the disk could
        not keep it either (then the result is lost, and the job FAILED); else the job is NOT_SYNCED."""
        sync = sync_command([self.job_dir])
        error_type = "ResultLost" if not_kept else RESULT_NOT_LOGGED
        reason = (
            f"the result is lost: MLflow could not take it ({error}) nor the disk keep it ({not_kept})"
            if not_kept
            else f"could not log the result ({error}); it is kept in {self.folder.result}: `{sync}` uploads it"
        )
        closed = "left RUNNING"
        if answering:
            assert self.tracker is not None
            with contextlib.suppress(Exception), one_attempt():  # the store may be gone altogether
                self.tracker.close_run(run_id, FAILED, error_type=error_type, message=reason)
                closed = "closed FAILED"
        if not_kept:
            self.say(f"mlflow error: run {run_id}: {reason}; run {closed}", err=True)
            return FAILED
        bound = retry_bound(self.config.mlflow.tracking_uri)
        self.say(
            f"mlflow error: could not log run {run_id} ({error}{'; ' + bound if bound else ''}); run {closed}; "
            f"the result is kept in {self.folder.result}; upload it later with `{sync}`",
            err=True,
        )
        return NOT_SYNCED

    def last_line(self, result: JobResult) -> None:
        """The job's result in a line, after a single job's note on why its figures are noisy."""
        in_sweep = self.place.sweep is not None
        kind, why = noise(result)  # a single job's note on why its figures are noisy or contended
        note = f"note: {kind}: {why}" if kind and not in_sweep else ""
        for line in [note, one_line(self.name, result, in_sweep=in_sweep)]:
            if line:
                self.say("\n".join(wrapped(line)))

    def say(self, line: str, *, err: bool = False) -> None:
        """One line to the terminal, the config's secrets masked (an error may quote a token)."""
        print(scrub(line, self.secrets), file=sys.stderr if err else sys.stdout, flush=True)


def distinct_name(config: Config, varied: list[str], job_num: int | None) -> str:
    """The run's name; where a swept key is a secret its values are masked alike, so the job's number
    tells its runs apart (`...·db_password=***·job 1`)."""
    name = run_name(config, varied)
    if job_num is not None and any(looks_secret(key) for key in varied):
        name += f"·job {job_num}"
    return name


def inductor_cache_dir(config: Config, job_dir: Path, sweep: SweepContext | None) -> Path:
    """Shared by a sweep's jobs by default; per job with `diagnose.cold_cache=true`; or as configured."""
    if config.diagnose.cold_cache:
        return JobDir(job_dir).inductor_cache
    if config.diagnose.cache_dir:
        return Path(config.diagnose.cache_dir).resolve()
    return SweepDir(Path(sweep.sweep_dir)).inductor_cache if sweep else JobDir(job_dir).inductor_cache


def write_job_files(result: JobResult, folder: JobDir, config: Config) -> None:
    """Beside the result: per-unit times as CSV (the job's own variant, then its paired eager copy's),
    run_info.json, diagnostics.json and the error with its traceback."""
    own = "compiled" if config.compile.compiled else "eager"
    with open(folder.step_times, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["variant", "step", "step_time_ms"])
        for variant, key in ((own, "curve/step_ms"), ("paired_eager", "curve/eager_step_ms")):
            for i, ms in enumerate(result.series.get(key, [])):
                writer.writerow([variant, config.trainer.warmup_steps + i, f"{ms:.6f}"])
    run_info = {"environment": result.environment, "info": result.info}
    folder.run_info.write_text(json.dumps(run_info, indent=1, default=str))
    if result.diagnostics:
        folder.diagnostics.write_text(json.dumps(result.diagnostics, indent=1, default=str))
    if result.error:
        folder.error.write_text(f"{result.error.type}: {result.error.message}\n\n{result.error.traceback}")


def record_bad_job(sweep: SweepContext, err: ConfigError, overrides: list[str], place: JobPlace) -> None:
    """List a sweep's job with bad values in the sweep, FAILED with the error, so it is accounted for."""
    try:
        tracker = Tracker(sweep.tracking_uri, sweep.experiment)
        tags = {
            "sweep_id": sweep.sweep_id,
            "job_num": str(place.job_num),
            "job_dir": str(place.job_dir),
            "error_type": "ConfigError",
            "error_message": str(err),
            "overrides": " ".join(overrides),
        }
        name = f"bad input: {err.key}={err.shown}"[:250]
        run_id = tracker.start_run(name, tags, parent_run_id=sweep.parent_run_id)
        tracker.end_run(run_id, FAILED)
    except Exception as exc:
        print(f"mlflow error: could not record the bad job ({exc})", file=sys.stderr, flush=True)


def report_config_error(err: ConfigError) -> None:
    print(config_error_lines(err.errors), file=sys.stderr, flush=True)
