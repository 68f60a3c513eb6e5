"""Who is still working on a sweep, so that resuming it never runs beside its earlier jobs. The driver
and every job hold a lease (an exclusive `flock` the kernel drops however the process dies) on their
folder's `.lease`; jobs still queued in SLURM are found through the arrays noted in `.slurm_arrays`."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shlex
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from pipeline.jobdir import LEASE, SweepDir
from pipeline.sweep import slurm


class Busy(RuntimeError):
    """Someone holds the lease already (the message says who)."""


def hold(folder: Path) -> IO[str]:
    """Take the folder's lease for as long as the returned file stays open (keep a reference, or `with
    hold(folder):`; closing it, or the process ending, releases it). Raises Busy when another holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    handle = open(folder / LEASE, "a+")  # noqa: SIM115 - open for as long as the lease is held
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read(handle)
        handle.close()
        raise Busy(f"{folder} is in use by {holder}") from None
    except OSError:  # a filesystem without locks: no lease, as before leases existed
        return handle
    handle.truncate(0)
    handle.write(f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    handle.flush()
    return handle


def holders(sweep_dirs: Iterable[Path]) -> list[str]:
    """`<folder>: pid N on host since T` for every lease held in these sweep folders or their jobs'."""
    leases = [lease for d in sweep_dirs for lease in [SweepDir(d).lease, *sorted(d.glob(f"*/{LEASE}"))]]
    return [f"{lease.parent}: {holder}" for lease in leases if (holder := _holder(lease)) is not None]


def record_array(sweep_dir: Path, array_id: str) -> None:
    """Note a job array submitted for this sweep (squeue knows its queued tasks, which hold no lease)."""
    with open(SweepDir(sweep_dir).slurm_arrays, "a") as f:
        f.write(array_id + "\n")


def still_working(sweep_dirs: list[Path]) -> tuple[list[str], str]:
    """What still works on a sweep run from these folders (leases held, SLURM jobs queued), and the
    command that stops it: `scancel <arrays>`, else `kill <pids>` of the holders on this host."""
    held = holders(sweep_dirs)
    arrays: list[str] = []  # noted by `record_array`
    for sweep_dir in sweep_dirs:
        with contextlib.suppress(OSError):
            arrays += SweepDir(sweep_dir).slurm_arrays.read_text().split()
    queued = slurm.queued(arrays)
    if queued:
        stop = shlex.join(["scancel", *sorted({job.split()[0].split("_")[0] for job in queued})])
    else:
        here = socket.gethostname()
        stop = shlex.join(
            ["kill", *(m[1] for h in held if (m := re.search(rf"pid (\d+) on {re.escape(here)} ", h)))]
        )
    return held + [f"SLURM job {job}" for job in queued], stop


def _holder(lease: Path) -> str | None:
    # OSError: no lease file (no one ever held it), or no locks on this filesystem
    with contextlib.suppress(OSError), open(lease) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(handle)
    return None


def _read(handle: IO[str]) -> str:
    handle.seek(0)
    return handle.read().strip() or "another process"
