"""What a sweep asks SLURM, through its command-line tools: what the cluster offers (sinfo), what is
still queued or running (squeue), how a job ended (sacct). Every answer degrades to "unknown" where
the tool is missing or fails.

    python -m pipeline.sweep.slurm gpus     # `yes`, `none` or `unknown`: does the cluster declare GPUs? (make sweep)
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """What the nodes of a partition offer (the partition's largest node for CPUs)."""

    gpus: bool  # a node declares GPU gres
    max_cpus: int


def _run(*cmd: str, timeout: float = 30) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def cluster(partition: str | None = None) -> Cluster | None:
    """The partition's (default: every partition's) nodes as sinfo lists them; None when unknown."""
    done = _run("sinfo", "-h", "-o", "%G|%c", *(["-p", partition] if partition else []))
    if done is None or done.returncode != 0:
        return None
    rows = [line.split("|") for line in done.stdout.splitlines() if "|" in line]
    if not rows:
        return None
    gpus = any("gpu" in gres.lower() for gres, _ in rows)
    return Cluster(gpus=gpus, max_cpus=max(int(cpus.rstrip("+")) for _, cpus in rows))


def fit_request(params: dict[str, Any], found: Cluster | None) -> list[str]:
    """Make a job array's request one the cluster can take, in place: no GPUs of a cluster that declares
    none (sbatch refuses any gres), no more CPUs than its largest node has. Returns a line per change."""
    if found is None:
        return []
    notes = []
    if not found.gpus:
        for key in ("gpus_per_node", "gpus_per_task"):
            if params.get(key):
                notes.append(
                    f"the cluster declares no GPUs (sinfo lists no gpu gres): asking for none instead of hydra.launcher.{key}={params[key]}"
                )
                params[key] = None
    cpus = params.get("cpus_per_task")
    if cpus and cpus > found.max_cpus:
        notes.append(
            f"the cluster's largest node has {found.max_cpus} CPUs: asking for {found.max_cpus} instead of hydra.launcher.cpus_per_task={cpus}"
        )
        params["cpus_per_task"] = found.max_cpus
    return notes


def request_for_ranks(params: dict[str, Any], nproc: int) -> list[str]:
    """A distributed sweep's request, in place: one task per job, whose torchrun starts `nproc` ranks (the
    sweep's largest), asks for `nproc` GPUs of its node and `nproc` times the CPUs. Returns a line per
    change."""
    if nproc <= 1:
        return []
    notes = []
    gpus = params.get("gpus_per_node")
    if gpus and gpus < nproc:
        params["gpus_per_node"] = nproc
        notes.append(
            f"parallel.nproc={nproc}: asking for gpus_per_node={nproc} (torchrun runs the ranks in the one task)"
        )
    cpus = params.get("cpus_per_task")
    if cpus:
        params["cpus_per_task"] = cpus * nproc
        notes.append(f"parallel.nproc={nproc}: asking for cpus_per_task={cpus * nproc} ({cpus} per rank)")
    return notes


def task_name(tags: Mapping[str, str]) -> str | None:
    """How sacct and squeue name the job a run was made by: `<array id>_<task id>` for an array task
    (its own SLURM_JOB_ID would name the whole array when it equals the array's id), else its id."""
    if tags.get("slurm_array_job_id") and tags.get("slurm_array_task_id"):
        return f"{tags['slurm_array_job_id']}_{tags['slurm_array_task_id']}"
    return tags.get("slurm_job_id")


def state(job: str) -> str:
    """sacct's `State|ExitCode|Reason` of one job or array task, or why it is not known."""
    done = _run("sacct", "-n", "-X", "-P", "-o", "JobID,State,ExitCode,Reason", "-j", job)
    if done is None:
        return "state unknown (no sacct)"
    for line in done.stdout.splitlines():
        job_id, _, rest = line.partition("|")
        if job_id == job:
            return rest
    return "state unknown"


def queued(array_ids: Iterable[str]) -> list[str]:
    """`<job> <STATE>` for each job of these arrays that squeue still lists (pending or running)."""
    ids = sorted(set(array_ids))
    if not ids:
        return []
    done = _run("squeue", "-h", "-j", ",".join(ids), "-o", "%i %T")
    if done is None or done.returncode != 0:  # "Invalid job id": the arrays are long gone
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def main(argv: list[str]) -> int:
    if argv != ["gpus"]:
        print(__doc__, file=sys.stderr)
        return 2
    found = cluster()
    print("unknown" if found is None else "yes" if found.gpus else "none")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
