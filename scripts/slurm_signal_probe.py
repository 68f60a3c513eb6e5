"""Which signals reach a submitit job on SLURM, when, and what submitit does with them.

    .venv/bin/python scripts/slurm_signal_probe.py scancel    # scancel the running job
    .venv/bin/python scripts/slurm_signal_probe.py timeout    # let it run into its time limit (~2.5 min)
    options: --no-checkpoint (a task without a `checkpoint` method), --ignore-usr2 (the task does not
    pass SIGUSR2 on to submitit, so the job runs into the limit), --folder DIR, --signal-delay S

The job is submitted the way Hydra's submitit launcher submits a sweep (`map_array`, so a job array;
`--signal=USR2@<signal_delay_s>`; the task is a callable object with a `checkpoint` method, as the
launcher is). Inside the job, the task wraps every handler submitit installed with one that first
logs the signal (time, pid, which handler it goes to) and then calls it, so submitit behaves exactly
as it would without the probe. The task also starts a child process in a session of its own, as
pipeline/job/supervisor.py starts the worker, which logs the signals it gets and then takes their
default action. At the end the probe prints the timeline, what the submitting process saw
(`job.results()`), and sacct's record.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

WATCHED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGCONT", "SIGQUIT", "SIGALRM")


def _log(path: Path, who: str, event: str, **fields: Any) -> None:
    record = {"t": time.time(), "pid": os.getpid(), "who": who, "event": event, **fields}
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _describe(handler: Any) -> str:
    if handler == signal.SIG_DFL:
        return "SIG_DFL"
    if handler == signal.SIG_IGN:
        return "SIG_IGN"
    if handler is None:
        return "None"
    return getattr(handler, "__qualname__", repr(handler))


# --------------------------------------------------------------------------------------------- child
def child_main(log: Path) -> None:
    """A stand-in for the pipeline's worker: log each signal, then take its default action."""

    def on_signal(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        _log(log, "child", "signal", sig=name)
        if signum != signal.SIGCONT:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    for name in WATCHED:
        signal.signal(getattr(signal, name), on_signal)
    _log(log, "child", "start", sid=os.getsid(0), ppid=os.getppid())
    while True:
        time.sleep(0.2)


# --------------------------------------------------------------------------------------------- task
class ProbeTask:
    """The submitted callable; like Hydra's BaseSubmititLauncher, it has a `checkpoint` method."""

    def __init__(self, log_dir: str, ignore_usr2: bool = False) -> None:
        self.log_dir = log_dir
        self.ignore_usr2 = ignore_usr2
        self.signalled = False

    def __call__(self, index: int = 0) -> str:
        job = os.environ.get("SLURM_JOB_ID", "local")
        log = Path(self.log_dir) / f"signals-{job}.jsonl"
        slurm_env = {k: v for k, v in os.environ.items() if k.startswith(("SLURM_JOB_ID", "SLURM_ARRAY"))}
        limit = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%l"], capture_output=True, text=True, check=False
        ).stdout.strip()
        installed = {name: _describe(signal.getsignal(getattr(signal, name))) for name in WATCHED}
        _log(log, "task", "start", env=slurm_env, time_limit=limit, handlers=installed)

        for name in WATCHED:
            signum = getattr(signal, name)
            previous = signal.getsignal(signum)

            def relay(num: int, frame: Any, previous: Any = previous) -> None:
                sig = signal.Signals(num).name
                _log(log, "task", "signal", sig=sig, handler=_describe(previous))
                self.signalled = True
                if num == signal.SIGUSR2 and self.ignore_usr2:
                    return  # as a task with its own USR2 handler that lets the job run on
                if callable(previous):
                    previous(num, frame)  # submitit's handler: may raise, or sys.exit
                elif previous == signal.SIG_DFL and num != signal.SIGCONT:
                    signal.signal(num, signal.SIG_DFL)
                    os.kill(os.getpid(), num)

            signal.signal(signum, relay)

        child = subprocess.Popen(
            [sys.executable, __file__, "--child", str(log)], start_new_session=True, stdin=subprocess.DEVNULL
        )
        child_logged = False
        try:
            while True:  # runs until a signal ends it: the point is what reaches the task
                time.sleep(0.25)
                if not child_logged and child.poll() is not None:
                    _log(log, "task", "child exited", returncode=child.returncode)
                    child_logged = True
                if self.signalled:  # a heartbeat after the first signal: when did the task die?
                    _log(log, "task", "alive")
        except BaseException as exc:
            _log(log, "task", "exception", type=type(exc).__name__, message=str(exc)[:300])
            raise
        finally:
            _log(log, "task", "finally")

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        import submitit

        job = os.environ.get("SLURM_JOB_ID", "local")
        _log(Path(self.log_dir) / f"signals-{job}.jsonl", "task", "checkpoint() called")
        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)


class ProbeTaskNoCheckpoint:
    def __init__(self, log_dir: str, ignore_usr2: bool = False) -> None:
        self._inner = ProbeTask(log_dir, ignore_usr2)

    def __call__(self, index: int = 0) -> str:
        return self._inner(index)


# --------------------------------------------------------------------------------------------- driver
def _wait_for(pred: Any, timeout: float, step: float = 0.5) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(step)
    return False


def _in_squeue(job_id: str) -> bool:
    out = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True, check=False)
    return bool(out.stdout.strip())


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child_main(Path(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", choices=["scancel", "timeout"])
    parser.add_argument("--folder", default="/tmp/slurm-signal-probe")
    parser.add_argument("--no-checkpoint", action="store_true", help="the task has no checkpoint method")
    parser.add_argument(
        "--ignore-usr2",
        action="store_true",
        help="the task logs SIGUSR2 but does not pass it to submitit (to see the time limit itself)",
    )
    parser.add_argument("--signal-delay", type=int, default=30, help="submitit's signal_delay_s (USR2@N)")
    parser.add_argument("--timeout-min", type=int, default=2, help="time limit in the timeout scenario")
    parser.add_argument(
        "--max-num-timeout",
        type=int,
        default=0,
        help="submitit's requeues after a timeout (conf/hydra/launcher/slurm.yaml: 0; submitit's default: 3)",
    )
    args = parser.parse_args()

    import submitit

    folder = Path(args.folder) / f"{args.scenario}-{int(time.time())}"
    folder.mkdir(parents=True)
    executor = submitit.AutoExecutor(
        folder=folder / "%j", cluster="slurm", slurm_max_num_timeout=args.max_num_timeout
    )
    executor.update_parameters(
        timeout_min=args.timeout_min if args.scenario == "timeout" else 30,
        slurm_signal_delay_s=args.signal_delay,
        cpus_per_task=1,
        tasks_per_node=1,
        nodes=1,
        name="signal-probe",
    )
    cls = ProbeTaskNoCheckpoint if args.no_checkpoint else ProbeTask
    task = cls(str(folder), args.ignore_usr2)
    (job,) = executor.map_array(task, [0])  # a job array of one task, as Hydra's launcher submits
    print(
        f"submitted {job.job_id} ({args.scenario}, checkpoint method: {not args.no_checkpoint}, "
        f"max_num_timeout={args.max_num_timeout})"
    )
    print((folder / job.job_id.split("_")[0] / f"{job.job_id.split('_')[0]}_submission.sh").read_text())

    logs = lambda: list(folder.glob("signals-*.jsonl"))  # noqa: E731
    if not _wait_for(lambda: logs() and "child" in logs()[0].read_text(), 120):
        sys.exit(f"the job did not start: {job.state}")
    submitted_at = time.time()
    if args.scenario == "scancel":
        time.sleep(3)
        print(f"scancel {job.job_id}", flush=True)
        subprocess.run(["scancel", job.job_id], check=True)

    _wait_for(lambda: job.done(force_check=True), 600, step=2)
    try:
        outcome = f"returned {job.results()!r}"
    except Exception as exc:
        outcome = f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    # sacct may say CANCELLED/TIMEOUT while the step's processes still run (until KillWait ends):
    # wait until the job has left squeue (no longer COMPLETING), so the timeline shows their end.
    _wait_for(lambda: not _in_squeue(job.job_id), 300, step=1)
    time.sleep(1)

    events = [json.loads(line) for line in logs()[0].read_text().splitlines()]
    start = events[0]["t"]
    print(f"\ninside the job: time limit {events[0]['time_limit']}, env {events[0]['env']}")
    print(f"handlers submitit installed before the task ran: {events[0]['handlers']}")
    shown = []
    for e in events:  # a run of heartbeats shows as its first and last
        if e["event"] == "alive" and len(shown) > 1 and shown[-1]["event"] == shown[-2]["event"] == "alive":
            shown[-1] = e
            continue
        shown.append(e)
    for e in shown:
        extra = {k: v for k, v in e.items() if k not in ("t", "pid", "who", "event", "env", "handlers")}
        print(f"  t={e['t'] - start:7.2f}s  {e['who']:5} pid {e['pid']:>6}  {e['event']:16} {extra or ''}")
    print("  (the last 'alive' is the task's last sign of life)")
    print(f"\nsubmitting process: job.results() {outcome}")
    print(f"scancel sent at t={submitted_at + 3 - start:.2f}s" if args.scenario == "scancel" else "")
    sacct = subprocess.run(
        ["sacct", "-j", job.job_id, "-o", "JobID,State,ExitCode,Elapsed,Timelimit", "-P"],
        capture_output=True,
        text=True,
        check=False,
    )
    print("sacct:\n" + sacct.stdout + sacct.stderr)
    out = sorted(folder.rglob("*_log.out")) + sorted(folder.rglob("*_log.err"))
    for path in out:
        print(f"--- {path.relative_to(folder)}")
        print(path.read_text()[-3000:])


if __name__ == "__main__":
    main()
