"""The sweep's template process: imports torch, the model libraries and the pipeline once, then forks
each job's worker from that state (refusing, with the reason, where a fork would be unsafe).

    python -m pipeline.job.template --listen-fd N --owner PID [--imports a,b,c]

Started by the sweep's driver (:class:`pipeline.job.worker_start.TemplateProcess`) on a Unix socket it
bound; it never initializes CUDA, and ends with its driver, killing the workers it still holds.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import selectors
import shutil
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.job import lifeline
from pipeline.job.worker_start import SOCKET_FOLDER_PREFIX, recv_message, send_message
from pipeline.scenarios import runner_modules

DEFAULT_IMPORTS = (
    "torch",
    "models.timm_models",  # timm (and torchvision, through the CPU-build shim)
    "transformers",
    "models.hf",
    "torch._dynamo",  # not torch._inductor.compile_fx: on a CUDA host importing it initializes the CUDA driver
    "pipeline.job.worker",
    "pipeline.scenarios.protocol",
    "pipeline.measure.environment",
)  # and every scenario's implementation (pipeline.scenarios.runner_modules)
# Variables the job sets that torch reads only when it uses them (never at import): a job may differ
# from the template in these. Any other variable torch or the model libraries read at import must match.
LAZY_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
IMPORT_ENV_PREFIXES = (
    "TORCH",
    "PYTORCH_",
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    "CUDA_",
    "NCCL_",
    "HF_",
    "TRANSFORMERS_",
)
OWNER_POLL_S = 1.0
# Blocked from the fork until the worker has its own session and default handlers: a job that stops its
# worker at once (its SIGTERM) neither finds the template's handler running in the child nor misses it.
HELD_AT_FORK = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


@dataclass(kw_only=True)
class TemplateState:
    """What the template knows about itself: why it cannot fork (once true, for good), its baseline
    threads, the environment it imported under, and the workers it forked (pid -> job connection)."""

    broken: str = ""
    baseline_threads: set[str] = field(default_factory=set)  # thread ids once numpy is imported
    env: dict[str, str] = field(default_factory=dict)
    workers: dict[int, socket.socket] = field(default_factory=dict)


def thread_ids() -> set[str]:
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:
        return set()


def thread_name(tid: str) -> str:
    try:
        return Path(f"/proc/self/task/{tid}/comm").read_text().strip()
    except OSError:
        return "?"


def cuda_refusal() -> str:
    """Why CUDA makes a fork unsafe here ('' when it does not): torch initialized CUDA, or a child
    forked now would be in torch's "bad fork" state (something asked the CUDA runtime for devices)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return ""
    if torch.cuda.is_initialized():
        return "the template initialized CUDA (torch.cuda.is_initialized() is True)"
    pid = os.fork()
    if pid == 0:  # the probe: only asks torch's flag, and leaves at once
        os._exit(3 if torch.cuda._is_in_bad_fork() else 0)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 3:
        return "a worker forked from the template could not use CUDA (torch queried the CUDA runtime while the template imported)"
    return ""


def fork_refusal(state: TemplateState, env: dict[str, str]) -> str:
    """Why this job's worker cannot be forked now ('' when it can)."""
    if not state.broken:
        state.broken = cuda_refusal()
    extra = sorted(thread_ids() - state.baseline_threads)  # numpy's BLAS pool may end at a fork: never new
    if not state.broken and extra:
        state.broken = (
            f"the template runs {len(extra)} thread(s) beyond numpy's BLAS pool ({', '.join(map(thread_name, extra))}): "
            "forking would lose them (a CUDA driver thread means an import initialized CUDA)"
        )
    return state.broken or env_mismatch(state.env, env)


def import_env(env: dict[str, str]) -> dict[str, str]:
    """The variables of `env` that torch or the model libraries read at import (not those read lazily)."""
    return {k: v for k, v in env.items() if k.startswith(IMPORT_ENV_PREFIXES) and k not in LAZY_ENV}


def env_mismatch(template_env: dict[str, str], job_env: dict[str, str]) -> str:
    """The first variable read at import whose value the job's environment changes ('' if none)."""
    template, job = import_env(template_env), import_env(job_env)
    for key in sorted(set(template) | set(job)):
        if template.get(key) != job.get(key):
            return f"the job sets {key}={job.get(key)!r}, which torch reads at import (template: {template.get(key)!r})"
    return ""


# ----------------------------------------------------------------------------- the forked worker
def run_forked_worker(
    *, argv: list[str], env: dict[str, str], cwd: str, out_fd: int, lifeline_fd: int, keep: set[int]
) -> None:
    """In the child: become the job's worker, run it, and never return."""
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, *HELD_AT_FORK):
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_AT_FORK)  # one sent meanwhile ends it now
        for fd in keep:  # the template's listener and its other jobs' connections
            _close_quietly(fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        for fd in (devnull, out_fd):
            os.close(fd)
        os.set_inheritable(lifeline_fd, True)
        sys.stdout.reconfigure(line_buffering=True, write_through=True)  # type: ignore[union-attr]
        sys.stderr.reconfigure(line_buffering=True, write_through=True)  # type: ignore[union-attr]
        os.environ.clear()
        os.environ.update(env)
        os.environ[lifeline.LIFELINE_FD_ENV] = str(lifeline_fd)
        os.chdir(cwd)
        from pipeline.job import worker

        # the worker's timeline starts at its fork, not the template's imports
        worker.STARTED_AT = time.time()
        sys.argv = ["pipeline.job.worker", *argv]
        code = worker.main(argv)
    except SystemExit as done:  # argparse
        code = done.code if isinstance(done.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


# ----------------------------------------------------------------------------- the template's loop
class Template:
    def __init__(self, listener: socket.socket, owner: int, state: TemplateState):
        self.listener, self.owner, self.state = listener, owner, state
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through the wakeup fd
        self.selector.register(listener, selectors.EVENT_READ, "accept")
        self.selector.register(self.wake_r, selectors.EVENT_READ, "signal")

    def serve(self) -> None:
        while os.getppid() == self.owner:
            for key, _ in self.selector.select(timeout=OWNER_POLL_S):
                if key.data == "accept":
                    self.accept()
                elif key.data == "signal":
                    os.read(self.wake_r, 4096)
                else:
                    self.dropped(key.fileobj)  # type: ignore[arg-type]
            self.reap()

    def accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        try:
            conn.settimeout(10.0)
            request, _ = recv_message(conn, max_fds=2)
            self.fork(conn, request)
        except (OSError, ValueError) as err:
            print(f"template: a request failed ({type(err).__name__}: {err})", flush=True)
            conn.close()

    def fork(self, conn: socket.socket, request: dict) -> None:
        fds = request.get("fds", [])
        try:
            if len(fds) != 2:
                refusal = "the request did not carry its output and lifeline pipes"
            else:
                env = {str(k): str(v) for k, v in request["env"].items()}
                refusal = fork_refusal(self.state, env)
            if refusal:
                send_message(conn, {"refused": refusal})
                conn.close()
                return
            sys.stdout.flush()
            sys.stderr.flush()
            keep = {self.listener.fileno(), self.wake_r, self.wake_w, conn.fileno()}
            keep |= {c.fileno() for c in self.state.workers.values()}
            held, pid = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_AT_FORK), -1
            try:
                pid = os.fork()
            finally:
                if pid != 0:
                    signal.pthread_sigmask(signal.SIG_SETMASK, held)
            if pid == 0:
                lifeline.die_with_parent()
                run_forked_worker(
                    argv=list(request["argv"]),
                    env=env,
                    cwd=str(request["cwd"]),
                    out_fd=fds[0],
                    lifeline_fd=fds[1],
                    keep=keep,
                )
        finally:
            # the template keeps none of the job's pipes: the job sees EOF when its worker ends
            for fd in fds:
                _close_quietly(fd)
        self.state.workers[pid] = conn
        conn.settimeout(None)
        send_message(conn, {"pid": pid})
        self.selector.register(conn, selectors.EVENT_READ, pid)

    def dropped(self, conn: socket.socket) -> None:
        """A job closed its connection early: its worker ends by its lifeline; stop watching it."""
        with contextlib.suppress(OSError):
            if conn.recv(1, socket.MSG_PEEK):
                return
        self.selector.unregister(conn)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.state.workers.pop(pid, None)
            if conn is None:
                continue
            with contextlib.suppress(OSError):
                send_message(conn, {"exit": os.waitstatus_to_exitcode(status)})
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(conn)
            conn.close()

    def kill_workers(self) -> None:
        for pid in list(self.state.workers):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


def import_all(modules: list[str], state: TemplateState) -> None:
    """numpy first (its BLAS pool: the baseline of threads), then the rest; a failure breaks the template."""
    started, name = time.monotonic(), "numpy"
    try:
        importlib.import_module("numpy")
        state.baseline_threads = thread_ids()
        os.environ[NVML_CHECK] = "1"  # torch.cuda.is_available() in an import asks NVML, not the CUDA runtime
        for name in modules:
            importlib.import_module(name)
    except BaseException as err:
        state.broken = f"the template could not import {name!r} ({type(err).__name__}: {err})"
    finally:
        os.environ.pop(NVML_CHECK, None)
        if state.env.get(NVML_CHECK) is not None:
            os.environ[NVML_CHECK] = state.env[NVML_CHECK]
    print(
        f"template: imports done in {time.monotonic() - started:.1f} s ({len(modules)} modules)", flush=True
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--listen-fd", type=int, required=True, help="the bound, listening Unix socket")
    parser.add_argument(
        "--owner", type=int, required=True, help="the driver's pid: the template ends with it"
    )
    parser.add_argument(
        "--imports", default=None, help="modules to import, comma-separated (default: the worker's)"
    )
    args = parser.parse_args(argv)
    lifeline.die_with_parent(signal.SIGTERM)
    listener = socket.socket(fileno=args.listen_fd)
    if os.getppid() != args.owner:
        remove_socket_folder(listener)
        return 0
    state = TemplateState(env=dict(os.environ))
    imports = args.imports.split(",") if args.imports is not None else [*DEFAULT_IMPORTS, *runner_modules()]
    import_all([m for m in imports if m], state)
    gc.collect()
    gc.freeze()  # the imports' objects: a worker's collections skip them, so their pages stay shared
    template = Template(listener, args.owner, state)
    signal.signal(signal.SIGTERM, _stop)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            template.serve()
    finally:
        template.kill_workers()
        remove_socket_folder(listener)
    return 0


def remove_socket_folder(listener: socket.socket) -> None:
    """The socket's private folder goes with the template: a driver killed outright cannot remove it."""
    with contextlib.suppress(OSError):
        folder = Path(listener.getsockname()).parent
        if folder.name.startswith(SOCKET_FOLDER_PREFIX):
            shutil.rmtree(folder)


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


if __name__ == "__main__":
    sys.exit(main())
