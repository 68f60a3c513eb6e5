"""The job folder (`JobDir`) and the sweep folder (`SweepDir`): the contract between a job's processes
(its parent, its worker, a distributed job's ranks, `report --sync` later), every file in them named
once. A sweep folder holds its jobs' folders by number (0/, 1/, ...) beside its own files. Torch-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RESULT = "result.json"
RANK_RESULT_GLOB = "result.rank*.json"
RUN_ID = "mlflow_run_id"
JOB_CONFIG = "job_config.json"
RUN_INFO = "run_info.json"  # also the name of its copy in the job's MLflow run
LEASE = ".lease"  # in a job's folder and in the sweep's
SWEEP_FILE = "sweep.json"
SUMMARY_FILES = ("summary.md", "summary.csv")


class _File:
    """A folder's file: `folder.<attribute>` is the path of `name` in it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, folder: JobDir | SweepDir, owner: type | None = None) -> Path:
        return folder.path / self.name


@dataclass(frozen=True)
class JobDir:
    path: Path

    config_yaml = _File("config.yaml")  # redacted: MLflow gets it
    job_config = _File(JOB_CONFIG)  # unredacted: stays local
    job_ready = _File("job_ready")  # made once the job's run is open: the worker measures nothing before it
    worker_pid = _File("worker.pid")
    worker_log = _File("worker.log")
    run_id = _File(RUN_ID)  # as soon as the run exists (`--sync` logs a late result there only)
    result = _File(RESULT)  # the worker's result (rank 0's), then the parent's record of it
    step_times = _File("step_times.csv")
    run_info = _File(RUN_INFO)
    diagnostics = _File("diagnostics.json")
    error = _File("error.txt")
    explain = _File("explain.txt")
    profile = _File("profile")
    comm = _File("comm")  # a distributed job's communication diagnosis (pipeline.diagnose.comm, comm_probe)
    tlparse = _File("tlparse")
    torch_trace = _File("torch_trace")
    rank_failures = _File("ranks_failed.json")  # rank exits as torch's launcher saw them (pipeline.job.ranks)
    inductor_cache = _File("inductor_cache")  # with diagnose.cold_cache=true (else the sweep's, shared)

    def rank_result(self, rank: int) -> Path:
        """Where a rank writes its result: rank 0 the job's result file, rank r `result.rank<r>.json`."""
        return self.result if rank == 0 else self.path / f"result.rank{rank}.json"

    def artifacts(self) -> list[Path]:
        """What MLflow gets of the job (job_config.json stays local: it holds unredacted values)."""
        return [
            self.config_yaml,
            self.result,
            self.run_info,
            self.step_times,
            self.worker_log,
            self.error,
            self.diagnostics,
            self.explain,
        ]

    def artifact_folders(self) -> list[Path]:
        return [self.profile, self.tlparse, self.comm]


# MLflow keeps a copy of a job's files as its run's artifacts: `<run id>/artifacts/` under an artifact
# store (`outputs/mlartifacts/` of `make mlflow-server`), beside the job folders a search may walk.
_RUN_ARTIFACTS = re.compile(r"[0-9a-f]{32}")


def job_files(root: Path, name: str) -> list[Path]:
    """The files called `name` in the job folders under `root`, in order; never MLflow's copies of them
    (a run's artifacts: `<run id>/artifacts/<name>`), which are no job's folder."""
    return [
        path
        for path in sorted(root.rglob(name))
        if not any(
            _RUN_ARTIFACTS.fullmatch(run) and folder == "artifacts"
            for run, folder in zip(path.parts, path.parts[1:], strict=False)
        )
    ]


@dataclass(frozen=True)
class SweepDir:
    """The sweep folder (`hydra.sweep.dir`)."""

    path: Path

    sweep_file = _File(SWEEP_FILE)  # what a job knows of its sweep (pipeline/sweep_context.py)
    plots = _File("plots")
    from_results = _File("summary_from_results")  # `report --results`'s summary, never over the sweep's own
    inductor_cache = _File("inductor_cache")  # its jobs' shared cache (diagnose.cache_dir unset)
    template = _File(".template")  # the template process: <host>.json (where it listens), <host>.log
    lease = _File(LEASE)  # held by the sweep's driver
    slurm_arrays = _File(".slurm_arrays")  # the SLURM arrays it submitted

    @property
    def summary_files(self) -> list[Path]:
        """summary.md, summary.csv: what `write_summary` writes here besides its plots."""
        return [self.path / name for name in SUMMARY_FILES]
