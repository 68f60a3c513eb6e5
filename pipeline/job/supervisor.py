"""Start one worker, stream its output, enforce the timeout, and always come back with a result. The
worker runs in a session of its own, so a timeout or Ctrl-C kills its DataLoader and compile workers
too; one that dies before writing its result gets one made here from its exit status and log's tail."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.config.schema import Config, to_dict
from pipeline.job.lifeline import PARENT_ENV, START_GATE_ENV
from pipeline.job.result import JobResult
from pipeline.job.worker_start import READY_TIMEOUT_S, SPAWN, TEMPLATE, ForkedWorker, StartPlan, start_worker
from pipeline.jobdir import RANK_RESULT_GLOB, JobDir
from pipeline.progress import parse_progress
from pipeline.provenance import PROJECT_ROOT
from pipeline.redaction import write_private
from pipeline.status import FAILED, FINISHED, KILLED

KILL_GRACE_S = 5.0
# What a rank dies of when a peer's failure breaks its collective, or the launcher stops it.
CONSEQUENTIAL_SIGNALS = frozenset({signal.SIGABRT, signal.SIGTERM, signal.SIGINT})
# NVLink multicast (NVLS) off in every process a job starts: on shared multi-GPU hosts it can take the
# GPUs out of service. Harmless where there is no NVLink, and on the CPU.
NVLINK_MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


@dataclass(kw_only=True)
class WorkerLaunch:
    """Everything one worker run needs."""

    config: Config
    job_dir: Path
    cache_dir: Path | None  # the inductor/Triton cache the worker uses
    on_progress: Callable[[dict[str, Any]], None]  # the worker's progress events
    on_line: Callable[[str], None]  # every other line the worker prints
    on_started: Callable[[], None] | None = None  # runs while the worker imports its libraries
    extra_env: dict[str, str] = field(default_factory=dict)
    start: StartPlan = field(default_factory=StartPlan)  # forked from the sweep's template, or spawned


def worker_env(
    cache_dir: Path | None, trace_dir: Path | None = None, extra: dict[str, str] | None = None
) -> dict[str, str]:
    env = {**os.environ, **(extra or {})}
    if trace_dir is not None:
        env["TORCH_TRACE"] = str(trace_dir)  # the compiler's structured trace, for tlparse
    env["PYTHONUNBUFFERED"] = "1"
    env.update(NVLINK_MULTICAST_OFF)
    env[PARENT_ENV] = str(os.getpid())  # the worker ends when this process does (pipeline.job.lifeline)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    if cache_dir is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir)
        env["TRITON_CACHE_DIR"] = str(cache_dir / "triton")
    return env


def signal_description(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def stop_worker(proc: subprocess.Popen | ForkedWorker) -> None:
    """SIGTERM the worker's process group, then SIGKILL whatever is left after a grace period. A worker
    forked a moment ago may not lead its group yet: then the signal goes to the worker itself."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            try:
                os.kill(proc.pid, sig)
            except ProcessLookupError:
                return
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KILL_GRACE_S)
            return


def _log_tail(log_path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def run_worker(launch: WorkerLaunch) -> JobResult:
    """Run one worker to its end. `on_started` runs while the worker imports its libraries; if it raises,
    the worker is killed and the error goes on. The timeout counts from the start."""
    job_dir, timeout_s = launch.job_dir, launch.config.trainer.timeout_s
    job_dir.mkdir(parents=True, exist_ok=True)
    folder = JobDir(job_dir)
    config_path, result_path, log_path = folder.job_config, folder.result, folder.worker_log
    write_private(config_path, json.dumps(to_dict(launch.config), indent=1))  # unredacted: this user's only
    gate = folder.job_ready  # made once the job's run is open: the worker waits for it
    for stale in [result_path, *job_dir.glob(RANK_RESULT_GLOB), folder.rank_failures, gate]:
        stale.unlink(missing_ok=True)
    trace_dir = folder.torch_trace if launch.config.diagnose.trace else None
    cmd = worker_command(launch.config, config_path, result_path)
    env = {**worker_env(launch.cache_dir, trace_dir, launch.extra_env), START_GATE_ENV: str(gate)}
    started, started_at = time.monotonic(), time.time()
    # Unbuffered: a full disk fails a write, never the file's closing (nothing left to flush).
    with open(log_path, "wb", buffering=0) as log:
        pump = Pump(log, launch.on_progress, launch.on_line)
        wait_s = min(READY_TIMEOUT_S, timeout_s)  # the first job of a sweep waits while the template imports
        proc, note = start_worker(cmd, env=env, cwd=PROJECT_ROOT, start=launch.start, wait_s=wait_s)
        if note:
            pump.write(note + "\n")
            launch.on_line(note)
        with contextlib.suppress(OSError):  # a later look's convenience; the job knows its worker
            folder.worker_pid.write_text(str(proc.pid))
        reader = threading.Thread(target=pump.run, args=(proc,), daemon=True)
        reader.start()
        timed_out = False
        try:
            if launch.on_started is not None:
                launch.on_started()
            gate.touch()  # an OSError (a full disk): the worker is stopped, the job fails saying why
            proc.wait(timeout=max(0.0, timeout_s - (time.monotonic() - started)))
        except BaseException as stopped:
            # what a killed worker prints as it dies (torch's launcher's SIGTERM traceback): worker.log only
            pump.quiet = True
            stop_worker(proc)
            timed_out = isinstance(stopped, subprocess.TimeoutExpired)
            if not timed_out:  # a stopped job
                reader.join(timeout=5)
                raise
        reader.join(timeout=10)
    stop_worker(proc)  # leftovers of the worker (DataLoader or compile workers), if any
    wall_s = time.monotonic() - started

    tail = _log_tail(log_path) or "\n".join(pump.last)
    if timed_out:
        result = _read_or_new(result_path)
        result.fail(KILLED, "Timeout", f"worker killed after trainer.timeout_s={timeout_s:g} s", tail)
    elif launch.config.parallel.distributed:
        result = ranks_result(job_dir, result_path, proc.returncode, tail)
    elif result_path.exists():
        result = JobResult.read(result_path)
    else:
        how = getattr(proc, "lost", "") or f"worker {signal_description(proc.returncode)}"
        result = JobResult()
        result.fail(FAILED, "WorkerCrashed", f"{how} before writing its result{last_error(tail)}", tail)
    if pump.log_error:
        result.info["worker_log_error"] = pump.log_error
    if trace_dir is not None:
        result.info["tlparse"] = run_tlparse(trace_dir, folder.tlparse)
    result.metrics["job/worker_wall_s"] = wall_s
    result.info["worker_start"] = TEMPLATE if isinstance(proc, ForkedWorker) else SPAWN
    if note:
        result.info["worker_start_note"] = note
    result.info["worker_started_at"], result.info["worker_ended_at"] = started_at, time.time()
    result.info["worker_exit"] = "killed" if proc.returncode is None else signal_description(proc.returncode)
    try:
        result.write(result_path)
    except OSError as err:  # a full disk: the job's parent still has it, and logs it to MLflow
        result.info["result_not_kept"] = f"{type(err).__name__}: {err}"
    return result


def last_error(tail: str) -> str:
    """` (<the last exception line of the worker's output>)`, or '' when it printed none."""
    for line in reversed(tail.splitlines()):
        name = line.split(":", 1)[0].strip()
        if ":" in line and name.isidentifier() and name.endswith(("Error", "Exception", "Interrupt")):
            return f" ({line.strip()[:300]})"
    return ""


def worker_command(config: Config, config_path: Path, result_path: Path) -> list[str]:
    """The worker, or for a distributed job torch's launcher (pipeline.job.ranks) with one per rank."""
    worker_args = ["--config", str(config_path), "--result", str(result_path)]
    if not config.parallel.distributed:
        return [sys.executable, "-m", "pipeline.job.worker", *worker_args]
    ranks = [
        f"--nproc={config.parallel.nproc}",
        f"--failures={JobDir(result_path.parent).rank_failures}",
        f"--timeout-s={config.trainer.timeout_s:g}",
        f"--result={result_path}",
    ]
    return [sys.executable, "-m", "pipeline.job.ranks", *ranks, "--", *worker_args]


def ranks_result(job_dir: Path, result_path: Path, returncode: int | None, log_tail: str) -> JobResult:
    """A distributed job's result: rank 0's when every rank finished; otherwise the root failure. The
    cause, in order: a rank killed outright (no result of its own); a rank's own error (the earliest); a
    rank aborted or stopped (CONSEQUENTIAL_SIGNALS); a broken collective (`peer_failure`)."""
    rank0 = _read_or_new(result_path) if result_path.exists() else None
    if rank0 is not None and rank0.status == FINISHED and returncode == 0:
        return rank0
    results = [r for r in (rank0, *map(_read_or_new, job_dir.glob(RANK_RESULT_GLOB))) if r and r.error]
    try:
        exits = json.loads(JobDir(job_dir).rank_failures.read_text())
    except (OSError, ValueError):
        exits = []
    reported = {r.info.get("rank", 0) for r in results}
    killed = [e for e in exits if e["exitcode"] < 0 and e["rank"] not in reported]
    killed_outright = [e for e in killed if -e["exitcode"] not in CONSEQUENTIAL_SIGNALS]
    own = [r for r in results if not r.info.get("peer_failure")]
    if not killed_outright and (own or (results and not killed)):
        # the failure that came first: among the ranks torch's launcher saw fail (when any), the earliest
        failed, listed = own or results, {e["rank"] for e in exits}
        seen = [r for r in failed if r.info.get("rank", 0) in listed] or failed
        result = min(seen, key=lambda r: r.info.get("failed_at", float("inf")))
    else:
        result = rank0 or JobResult()
        first = (killed_outright or killed or exits or [None])[0]
        how = (
            f"rank {first['rank']} {first['exit']}"
            if first
            else f"the ranks' launcher {signal_description(returncode or 0)}"
        )
        result.fail(FAILED, "WorkerCrashed", f"{how} before writing its result", log_tail)
        result.info["failed_rank"] = first["rank"] if first else None
    result.info["rank_exits"] = exits
    return result


def run_tlparse(trace_dir: Path, out_dir: Path) -> str:
    """tlparse's HTML report of the structured trace, when tlparse is installed."""
    exe = shutil.which("tlparse") or shutil.which("tlparse", path=str(Path(sys.executable).parent))
    if exe is None:
        return f"not installed (pip install tlparse); raw trace kept in {trace_dir}"
    logs = sorted(trace_dir.glob("*.log"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return f"no trace was written in {trace_dir}"
    done = subprocess.run(
        [exe, str(logs[-1]), "-o", str(out_dir), "--overwrite", "--no-browser"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    ok = done.returncode == 0 and (out_dir / "index.html").exists()
    return "ok" if ok else f"failed: {(done.stderr or done.stdout)[-300:]}"


def _read_or_new(path: Path) -> JobResult:
    try:
        return JobResult.read(path)
    except (OSError, ValueError):
        return JobResult()


class Pump:
    """Reads the worker's output to its end: progress events to the display, other lines to worker.log
    (a log that cannot be written costs the log only) and, unless `quiet`, the terminal."""

    def __init__(
        self, log: Any, on_progress: Callable[[dict[str, Any]], None], on_line: Callable[[str], None]
    ):
        self.log, self.on_progress, self.on_line = log, on_progress, on_line
        self.last: collections.deque[str] = collections.deque(maxlen=30)
        self.log_error = ""
        self.quiet = False
        self.in_traceback = False

    def run(self, proc: subprocess.Popen | ForkedWorker) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            event = parse_progress(line)
            if event is not None:
                self.on_progress(event)
                continue
            self.last.append(line.rstrip("\n"))
            self.write(line)
            if not self.quiet and not self.traceback_line(line):
                self.on_line(line.rstrip("\n"))

    def traceback_line(self, line: str) -> bool:
        """Whether the line belongs to a traceback the worker printed (worker.log keeps it; its error line
        ends the job's own line)."""
        if line.startswith(("Traceback (most recent call last):", "During handling of the above")):
            self.in_traceback = True
        elif self.in_traceback and line.strip() and not line[0].isspace():
            self.in_traceback = False  # the error's line closes it
            return True
        return self.in_traceback

    def write(self, line: str) -> None:
        if self.log_error:
            return
        try:
            self.log.write(line.encode(errors="replace"))
        except OSError as err:
            self.log_error = f"worker.log not written from here on ({err.strerror or err})"
            self.on_line(f"job: {self.log_error}")
