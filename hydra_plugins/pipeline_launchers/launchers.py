"""Hydra's submitit launchers, made to survive a job that dies without a result.

Hydra's own `launch()` ends with `[j.results()[0] for j in jobs]`: one job killed outright (SIGKILL,
node failure, host OOM killer) raises `UncompletedJobError` there, the whole sweep stops waiting for the
others, and the summary never runs. Here such a job becomes an outcome (`KILLED`, with the reason
submitit gives) and the sweep goes on; its MLflow run, left RUNNING by the dead job, is closed KILLED
when the sweep ends (pipeline.sweep.finish.finish_sweep). Ctrl-C while waiting cancels the sweep's jobs
instead of leaving them running after the sweep's runs were closed; on this machine
(hydra/launcher=local_gpus) submitit's controllers run apart from the terminal and are stopped with
SIGTERM, so that no KeyboardInterrupt traceback follows the sweep's one-line hint.

On SLURM the request is fitted to the cluster first (no GPUs asked of a cluster that declares none, no
more CPUs per task than its largest node has, each change said in one line), an sbatch refusal stops
the sweep in one line (its parent run closed FAILED), and the job array's id is noted in the sweep dir
so that resuming the sweep can see its tasks still queued (pipeline.sweep.lease).

The rest is Hydra's launcher as it is (hydra_plugins.hydra_submitit_launcher, 1.2.0).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher import submitit_launcher as hydra_submitit
from omegaconf import OmegaConf, open_dict

from pipeline.config.schema import CPU_RANKS
from pipeline.identity import config_hash
from pipeline.job.preflight import checked
from pipeline.job.result import write_skipped
from pipeline.jobdir import JobDir
from pipeline.redaction import redact_text
from pipeline.status import KILLED, SKIPPED
from pipeline.sweep import lease, slurm
from pipeline.sweep.state import SweepStopped, composed_job, task_config
from pipeline.sweep_context import SweepContext
from pipeline.tracking import Tracker


def collect(jobs: list[Any], job_overrides: Sequence[Sequence[str]], sweep_dir: Path) -> list[JobReturn]:
    """Each job's JobReturn; a job that died without one becomes a completed KILLED outcome. Until every
    job has ended, the sweep's line (jobs done / total, failures, ETA) is printed whenever it changes; it
    is read from the jobs' result files, which the jobs write into the sweep dir. A short poll keeps the
    sweep's end close to its last job's (submitit throttles its own sacct calls)."""
    import submitit

    from pipeline.job.progress import sweep_status

    returns, last = [], None
    try:
        while not all(job.done() for job in jobs):
            status = sweep_status(sweep_dir, len(jobs))
            if status != last:
                print(status, flush=True)
                last = status
            time.sleep(1.0)
        for job, overrides in zip(jobs, job_overrides, strict=True):
            try:
                returns.append(job.results()[0])
            except (submitit.core.utils.UncompletedJobError, submitit.core.utils.FailedJobError) as err:
                print(
                    f"job {job.job_id} ended without a result ({type(err).__name__}): {str(err).splitlines()[0]}",
                    flush=True,
                )
                returns.append(_completed(overrides, KILLED))
    except KeyboardInterrupt:
        for job in jobs:
            if not job.done():
                stop(job)
        raise
    return returns


def stop(job: Any) -> None:
    """End a job of an interrupted sweep: a SLURM task cancelled; a local job's controller sent SIGTERM,
    which it passes on to the job (the job closes its run KILLED, in one line). submitit's own cancel
    sends the controller SIGINT, whose KeyboardInterrupt traceback landed under the sweep's one-line hint."""
    import signal

    process = getattr(job, "_process", None)
    if process is None:
        job.cancel(check=False)
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)


@contextlib.contextmanager
def controllers_apart(log: Path):
    """submitit's local controllers (a process per job, between the sweep and the job) started in a
    session of their own, their stderr into `log`: a terminal's Ctrl-C reaches the sweep alone, which
    stops them (`stop`), instead of raising KeyboardInterrupt in each and printing its traceback."""
    import subprocess

    import submitit.local.local as local

    class Apart:
        def __getattr__(self, name: str) -> Any:
            return getattr(subprocess, name)

        @staticmethod
        def Popen(*args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("start_new_session", True)
            kwargs.setdefault("stderr", errors)
            return subprocess.Popen(*args, **kwargs)

    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as errors:
        local.subprocess = Apart()  # type: ignore[assignment]
        try:
            yield
        finally:
            local.subprocess = subprocess


class _Tolerant(hydra_submitit.BaseSubmititLauncher):
    def fit(self, params: dict[str, Any], job_overrides: Sequence[Sequence[str]]) -> None:
        """Adjust the request to the jobs and to where they run (in place)."""

    def submitted(self, sweep_dir: Path, jobs: list[Any]) -> None:
        """Note what was submitted."""

    def submitting(self, sweep_dir: Path) -> contextlib.AbstractContextManager[Any]:
        """Around the submission."""
        return contextlib.nullcontext()

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import submitit

        assert self.config is not None
        params = dict(self.params)
        self.fit(params, job_overrides)
        init_params = {"folder": params["submitit_folder"]}
        if "max_num_timeout" in params:
            init_params[f"{self._EXECUTOR}_max_num_timeout"] = params["max_num_timeout"]
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init_params)
        base = set(OmegaConf.structured(hydra_submitit.BaseQueueConf).keys())
        executor.update_parameters(
            **{
                k if k in base else f"{self._EXECUTOR}_{k}": v
                for k, v in params.items()
                if k not in ("max_num_timeout", "submitit_folder")
            }
        )
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        done = self.already_finished(sweep_dir, job_overrides, initial_job_idx)
        job_params, to_run = [], []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            said = redact_text(" ".join(filter_overrides(overrides)))
            print(f"\t#{idx} : {said}" + (f": {done[idx]}" if idx in done else ""), flush=True)
            if idx in done:
                continue
            to_run.append(overrides)
            job_params.append(
                (list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state())
            )
        if not job_params:
            print(
                f"every job of this resumed sweep already FINISHED: nothing submitted ({self._EXECUTOR})",
                flush=True,
            )
            return [_completed(overrides, SKIPPED) for overrides in job_overrides]
        said = io.StringIO()  # submitit prints a refusal's stderr itself; the sweep says it in one line
        try:
            with contextlib.redirect_stderr(said), self.submitting(sweep_dir):
                jobs = executor.map_array(self, *zip(*job_params, strict=True))
        except submitit.core.utils.FailedJobError as err:  # sbatch refused the array
            raise SweepStopped(f"{self._EXECUTOR} error: the job array was refused: {_reason(err)}") from err
        sys.stderr.write(said.getvalue())
        self.submitted(sweep_dir, jobs)
        print(
            f"submitted {len(jobs)} jobs ({self._EXECUTOR}); each job's output: {params['submitit_folder'].replace('%j', '<job id>')}/<job id>_0_log.out",
            flush=True,
        )
        ran = iter(collect(jobs, to_run, sweep_dir))
        return [
            _completed(overrides, SKIPPED) if idx in done else next(ran)
            for idx, overrides in enumerate(job_overrides, start=initial_job_idx)
        ]

    def already_finished(
        self, sweep_dir: Path, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> dict[int, str]:
        """A resumed sweep's jobs whose configuration already FINISHED in the sweep, by job number, with
        what to say: they are not submitted (a killed driver's resumption once resubmitted its whole
        array), and each gets the SKIPPED result its job would have written (the sweep counts it). A
        job whose config does not compose or check here is submitted: it reports its own error."""
        sweep = SweepContext.load(sweep_dir)
        if sweep is None or not sweep.resume:
            return {}
        assert self.hydra_context is not None and self.config is not None
        tracker = Tracker(sweep.tracking_uri, sweep.experiment)
        done = {}
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            try:
                composed = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
                with open_dict(composed.hydra.job):
                    composed.hydra.job.num = idx
                job_dir = Path(str(composed.hydra.sweep.dir)) / str(composed.hydra.sweep.subdir)
                run = tracker.finished_run_for(sweep.sweep_id, config_hash(checked(task_config(composed))))
            except Exception:
                continue
            if run is None:
                continue
            write_skipped(JobDir(job_dir).result, run.run_id, idx)
            done[idx] = f"already FINISHED in sweep {sweep.sweep_id} (run {run.run_id}), not submitted"
        return done


def _completed(overrides: Sequence[str], outcome: str) -> JobReturn:
    """A job's JobReturn the sweep counts as ended with `outcome` (KILLED, SKIPPED)."""
    ret = JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED)
    ret.return_value = outcome
    return ret


def _reason(err: Exception) -> str:
    """The line of a submission error that says why (`sbatch: error: ...`), without the traceback."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    said = [line for line in lines if "error:" in line]
    return (said or lines or [type(err).__name__])[-1]


class SlurmLauncher(_Tolerant, hydra_submitit.SlurmLauncher):
    _EXECUTOR = "slurm"

    def fit(self, params: dict[str, Any], job_overrides: Sequence[Sequence[str]]) -> None:
        notes = slurm.request_for_ranks(params, self.largest_nproc(job_overrides))
        found = slurm.cluster(params.get("partition")) or slurm.cluster()  # a partition sbatch will refuse
        for note in [*notes, *slurm.fit_request(params, found)]:
            print(f"slurm: {note}", flush=True)

    def largest_nproc(self, job_overrides: Sequence[Sequence[str]]) -> int:
        """The most ranks a job of the sweep runs (`parallel.nproc`, from each job's composed config; null,
        one per GPU the job gets, asks for CPU_RANKS); where a job's config does not compose here, the
        sweep's own `parallel.nproc`, said in one line (the job itself then fails its config check in one
        line too)."""
        assert self.config is not None
        found = []
        for overrides in job_overrides:
            try:
                job = composed_job(self.config, list(overrides))
            except Exception as err:  # the request falls back; the job reports its own error
                print(
                    f"slurm: parallel.nproc of a job not read ({type(err).__name__}); using the sweep's",
                    flush=True,
                )
                job = self.config
            nproc = OmegaConf.select(job, "parallel.nproc", default=1)
            if nproc is None:  # one rank per GPU the job gets: ask for CPU_RANKS, as parallel=ddp did before
                distributed = OmegaConf.select(job, "parallel.strategy", default="none") != "none"
                nproc = CPU_RANKS if distributed else 1
            found.append(nproc)
        return max([int(n) for n in found], default=1)

    def submitted(self, sweep_dir: Path, jobs: list[Any]) -> None:
        if jobs:
            lease.record_array(sweep_dir, str(jobs[0].job_id).split("_")[0])


class LocalLauncher(_Tolerant, hydra_submitit.LocalLauncher):
    """hydra/launcher=local_gpus: the jobs start at once on this machine and share its GPUs through the
    pipeline's GPU pool, one GPU per job: every GPU, unless the config's `gpu_pool` names some."""

    _EXECUTOR = "local"

    def fit(self, params: dict[str, Any], job_overrides: Sequence[Sequence[str]]) -> None:
        os.environ.setdefault("PIPELINE_GPU_POOL", "all")  # inherited by the jobs submitit starts

    def submitting(self, sweep_dir: Path) -> contextlib.AbstractContextManager[Any]:
        return controllers_apart(sweep_dir / ".submitit" / "controllers.log")
