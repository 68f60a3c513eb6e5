"""The job folder: the contract between a job's processes (its parent, its worker, a distributed job's
ranks, `report --sync` later), every file in it named once. Torch-free.

    job_dir/
      config.yaml        the resolved config, redacted (MLflow gets it)
      job_config.json    the resolved config the worker reads (unredacted: stays local)
      job_ready          made once the job's run is open: the worker measures nothing before it
      worker.pid         the worker's pid (a watchdog, a later look)
      worker.log         the worker's stdout and stderr
      mlflow_run_id      the job's run, as soon as it exists (`--sync` logs a late result there only)
      result.json        the worker's result (rank 0's), then the parent's record of it
      result.rank<r>.json  a distributed job's other ranks
      step_times.csv, run_info.json, diagnostics.json, error.txt, explain.txt   beside the result
      ranks_failed.json  a distributed job's rank exits, as torch's launcher saw them
      profile/, tlparse/, torch_trace/  the profiler's trace, tlparse's report of the compiler's trace
      comm/              a distributed job's communication: the machine's probe (probe.json), each rank's
                         profiled steps (trace.rank<r>.json.gz)
      inductor_cache/    with diagnose.cold_cache=true (else the sweep's, shared)
      .lease             held while the job runs (pipeline/sweep/lease.py)

The sweep folder (`hydra.sweep.dir`), `SweepDir`, holds the jobs' folders by number and the sweep's own
files, each named once:

    sweep_dir/
      sweep.json         what a job knows of its sweep (pipeline/sweep_context.py)
      0/, 1/, ...        the jobs' folders
      summary.md, summary.csv, plots/   the summary the sweep's end published (also in its parent run)
      summary_from_results/   `report --results`'s summary of the job folders, never over the sweep's own
      inductor_cache/    its jobs' shared inductor cache
      .template/         the sweep's template process: <host>.json (where it listens), <host>.log
      .lease, .slurm_arrays   who still works on the sweep: its driver, the SLURM arrays it submitted
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


@dataclass(frozen=True)
class JobDir:
    path: Path

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    @property
    def config_yaml(self) -> Path:
        return self.path / "config.yaml"

    @property
    def job_config(self) -> Path:
        return self.path / JOB_CONFIG

    @property
    def job_ready(self) -> Path:
        return self.path / "job_ready"

    @property
    def worker_pid(self) -> Path:
        return self.path / "worker.pid"

    @property
    def worker_log(self) -> Path:
        return self.path / "worker.log"

    @property
    def run_id(self) -> Path:
        return self.path / RUN_ID

    @property
    def result(self) -> Path:
        return self.path / RESULT

    def rank_result(self, rank: int) -> Path:
        """Where a rank writes its result: rank 0 the job's result file, rank r `result.rank<r>.json`."""
        return self.result if rank == 0 else self.path / f"result.rank{rank}.json"

    @property
    def step_times(self) -> Path:
        return self.path / "step_times.csv"

    @property
    def run_info(self) -> Path:
        return self.path / RUN_INFO

    @property
    def diagnostics(self) -> Path:
        return self.path / "diagnostics.json"

    @property
    def error(self) -> Path:
        return self.path / "error.txt"

    @property
    def explain(self) -> Path:
        return self.path / "explain.txt"

    @property
    def profile(self) -> Path:
        return self.path / "profile"

    @property
    def comm(self) -> Path:
        """A distributed job's communication diagnosis (pipeline.diagnose.comm, comm_probe)."""
        return self.path / "comm"

    @property
    def tlparse(self) -> Path:
        return self.path / "tlparse"

    @property
    def torch_trace(self) -> Path:
        return self.path / "torch_trace"

    @property
    def rank_failures(self) -> Path:
        """A distributed job's rank exits, as torch's launcher saw them (pipeline.job.ranks)."""
        return self.path / "ranks_failed.json"

    @property
    def inductor_cache(self) -> Path:
        return self.path / "inductor_cache"

    def artifacts(self) -> list[Path]:
        """What MLflow gets of the job (job_config.json stays local: it holds unredacted values)."""
        files = [
            self.config_yaml,
            self.result,
            self.run_info,
            self.step_times,
            self.worker_log,
            self.error,
            self.diagnostics,
            self.explain,
        ]
        return files

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
    """The sweep folder (see the module's docstring): the sweep's own files, each named once."""

    path: Path

    @property
    def sweep_file(self) -> Path:
        return self.path / SWEEP_FILE

    @property
    def summary_files(self) -> list[Path]:
        """summary.md, summary.csv: what `write_summary` writes here besides its plots."""
        return [self.path / name for name in SUMMARY_FILES]

    @property
    def plots(self) -> Path:
        return self.path / "plots"

    @property
    def from_results(self) -> Path:
        return self.path / "summary_from_results"

    @property
    def inductor_cache(self) -> Path:
        """The sweep's jobs' shared inductor cache (diagnose.cache_dir unset, cold_cache false)."""
        return self.path / "inductor_cache"

    @property
    def template(self) -> Path:
        return self.path / ".template"

    @property
    def lease(self) -> Path:
        return self.path / LEASE

    @property
    def slurm_arrays(self) -> Path:
        return self.path / ".slurm_arrays"
