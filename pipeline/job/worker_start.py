"""How a job's worker starts: forked from its sweep's template process (:mod:`pipeline.job.template`,
imports done; found through `<sweep dir>/.template/<host>.json`, asked over a Unix socket), or spawned
(`python -m pipeline.job.worker`) where there is none or forking is unsafe, saying why. Torch-free."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pipeline.jobdir import SweepDir
from pipeline.redaction import write_atomic

SPAWN, TEMPLATE = "spawn", "template"  # benchmark.worker_start (its allowed values: the schema)
CONNECT_TIMEOUT_S = 10.0
# A running template's socket on this machine: single runs fork from it where they can (the test suite's).
TEMPLATE_ENV = "PIPELINE_TEMPLATE_SOCKET"
# Beside it, JSON: the variables torch reads at import, as that template imported them.
TEMPLATE_IMPORT_ENV = "PIPELINE_TEMPLATE_IMPORT_ENV"
SOCKET_FOLDER_PREFIX = "cs-template-"  # the template's socket's private folder in the temp dir
READY_TIMEOUT_S = 300.0  # the first job waits while the template imports (seconds; minutes on a slow disk)
MAX_MESSAGE = 1 << 20
STOP_GRACE_S = 10.0


# ----------------------------------------------------------------------------- the template's file
@dataclass(frozen=True, kw_only=True)
class TemplateInfo:
    """Where a sweep's template listens on one machine, or why the sweep has none there."""

    host: str
    socket: str = ""
    pid: int = 0
    owner_pid: int = 0
    unavailable: str = ""  # non-empty: no template; the reason, said by every job that spawns

    def save(self, sweep_dir: Path) -> None:
        write_atomic(template_file(sweep_dir, self.host), json.dumps(asdict(self)))

    @classmethod
    def load(cls, sweep_dir: Path, host: str) -> TemplateInfo | None:
        try:
            return cls(**json.loads(template_file(sweep_dir, host).read_text()))
        except (OSError, ValueError, TypeError):
            return None


def template_file(sweep_dir: Path, host: str) -> Path:
    return SweepDir(Path(sweep_dir)).template / f"{host}.json"


def fork_supported() -> str:
    """Why this platform cannot fork workers from a template ('' when it can)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return f"{sys.platform} does not fork a template safely (only Linux does)"
    return ""


# ----------------------------------------------------------------------------- the driver's side
class TemplateProcess:
    """The template a sweep's driver started: its process and its socket folder."""

    def __init__(self, proc: subprocess.Popen, folder: Path, info: TemplateInfo, sweep_dir: Path):
        self.proc, self.folder, self.info, self.sweep_dir = proc, folder, info, sweep_dir

    @classmethod
    def start(
        cls, *, sweep_dir: Path, env: dict[str, str], cwd: Path, imports: tuple[str, ...] = ()
    ) -> TemplateProcess:
        """Listen first (jobs may connect while the template imports), then start it on that socket."""
        host = socket.gethostname()
        # 0700: only this user reaches the socket
        folder = Path(tempfile.mkdtemp(prefix=SOCKET_FOLDER_PREFIX))
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(folder / "sock"))
            listener.listen(128)
            log = template_file(sweep_dir, host).with_suffix(".log")
            log.parent.mkdir(parents=True, exist_ok=True)
            cmd = [sys.executable, "-m", "pipeline.job.template", "--listen-fd", str(listener.fileno())]
            cmd += ["--owner", str(os.getpid()), *(["--imports", ",".join(imports)] if imports else [])]
            with open(log, "w") as out:
                proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    pass_fds=(listener.fileno(),),
                    start_new_session=True,  # a Ctrl-C to the sweep reaches the jobs, which stop their workers
                    env=env,
                    cwd=cwd,
                )
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        finally:
            listener.close()  # the template holds it now
        info = TemplateInfo(host=host, socket=str(folder / "sock"), pid=proc.pid, owner_pid=os.getpid())
        info.save(sweep_dir)
        return cls(proc, folder, info, sweep_dir)

    def stop(self) -> None:
        """End the template (it kills any worker it still holds), its socket and its file."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
        with contextlib.suppress(OSError):  # a sweep folder gone read-only or full: the file is stale only
            template_file(self.sweep_dir, self.info.host).unlink(missing_ok=True)


def shared_template(env: dict[str, str]) -> TemplateInfo | None:
    """The running template TEMPLATE_ENV names, where jobs started with `env` can fork from it (None: no
    such template, or `env` differs from its own in a variable torch reads at import)."""
    from pipeline.job.template import env_mismatch  # it imports this module

    shared = os.environ.get(TEMPLATE_ENV, "")
    try:
        imported = json.loads(os.environ.get(TEMPLATE_IMPORT_ENV, ""))
    except ValueError:
        return None
    if not shared or not isinstance(imported, dict) or env_mismatch(imported, env):
        return None
    return TemplateInfo(host=socket.gethostname(), socket=shared)


def no_template(sweep_dir: Path, reason: str) -> None:
    """Tell the sweep's jobs on this machine why they spawn their workers."""
    TemplateInfo(host=socket.gethostname(), unavailable=reason).save(sweep_dir)


# ----------------------------------------------------------------------------- the job's side
@dataclass(frozen=True, kw_only=True)
class StartPlan:
    """How one job means to start its worker: forked from `template`, or spawned (`note`: why). `quiet`:
    TEMPLATE_ENV's template, which a single run may use but need not, so a refusal spawns silently."""

    template: TemplateInfo | None = None
    note: str = ""
    quiet: bool = False


def plan(worker_start: str, sweep_dir: Path | None, *, distributed: bool = False) -> StartPlan:
    """`spawn` and a distributed job (torchrun's agent spawns its ranks) spawn without a word; a single
    run too, unless TEMPLATE_ENV names a template to fork from; a sweep's job forks from its machine's
    template, or says why it cannot."""
    if worker_start == SPAWN or distributed:
        return StartPlan()
    host = socket.gethostname()
    if sweep_dir is None:
        shared = os.environ.get(TEMPLATE_ENV, "")
        template = TemplateInfo(host=host, socket=shared) if shared else None
        return StartPlan(template=template, quiet=bool(shared))
    info = TemplateInfo.load(sweep_dir, host)
    if info is None or info.unavailable:
        return StartPlan(note=info.unavailable if info else f"no template of this sweep runs on {host}")
    return StartPlan(template=info)


@dataclass(kw_only=True, eq=False)
class ForkedWorker:
    """A worker forked by the template, handled like a `subprocess.Popen`. Its exit status comes from the
    template over `conn`; the lifeline pipe's write end stays here until it has exited."""

    pid: int
    conn: socket.socket
    stdout: TextIO
    lifeline: int
    pending: bytes  # read from `conn` past the fork reply, not yet parsed
    template_pid: int = 0
    returncode: int | None = field(default=None, init=False)
    lost: str = field(default="", init=False)  # why the worker is gone when the template ended it

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            if b"\n" in self.pending:  # the template's message: the worker's exit status
                message, _, self.pending = self.pending.partition(b"\n")
                self._exited(int(json.loads(message)["exit"]))
                break
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            if select.select([self.conn], [], [], left)[0]:
                chunk = self.conn.recv(65536)
                if not chunk:  # the template ended: its PR_SET_PDEATHSIG killed the worker
                    self.lost = (
                        f"the sweep's template process (pid {self.template_pid}) ended, and its "
                        f"PR_SET_PDEATHSIG killed the worker (pid {self.pid})"
                    )
                    self._exited(-signal.SIGKILL)
                self.pending += chunk
        assert self.returncode is not None
        return self.returncode

    def _exited(self, code: int) -> None:
        self.returncode = code
        self.conn.close()
        os.close(self.lifeline)


def fork_worker(
    info: TemplateInfo, *, argv: list[str], env: dict[str, str], cwd: Path, wait_s: float
) -> ForkedWorker | str:
    """Ask the template for a worker running `pipeline.job.worker` with `argv`; where it could not fork
    one, why (the job spawns instead)."""
    out_r, out_w = os.pipe()
    life_r, life_w = os.pipe()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(CONNECT_TIMEOUT_S)
        conn.connect(info.socket)
        request = {"op": "fork", "argv": argv, "env": env, "cwd": str(cwd)}
        send_message(conn, request, fds=[out_w, life_r])
        conn.settimeout(wait_s)  # the first job of a sweep waits while the template imports
        reply, pending = recv_message(conn)
    except (OSError, ValueError) as err:
        reply = {"refused": f"the sweep's template did not answer ({type(err).__name__}: {err})"}
    finally:
        os.close(out_w)
        os.close(life_r)
    if "pid" not in reply:
        conn.close()
        os.close(out_r)
        os.close(life_w)
        return str(reply.get("refused", reply))
    conn.settimeout(None)
    return ForkedWorker(
        pid=int(reply["pid"]),
        conn=conn,
        stdout=open(out_r, buffering=1, errors="replace"),  # the worker's output, read to its end
        lifeline=life_w,
        pending=pending,
        template_pid=info.pid,
    )


def start_worker(
    cmd: list[str], *, env: dict[str, str], cwd: Path, start: StartPlan, wait_s: float
) -> tuple[subprocess.Popen | ForkedWorker, str]:
    """The worker process, forked from the template when the plan says so and it can, else spawned; and
    the line that says why it was spawned ('' where it forked, or nothing is to be said)."""
    note = start.note or (fork_supported() if start.template is not None else "")
    if start.template is not None and not note:
        argv = cmd[cmd.index("pipeline.job.worker") + 1 :]
        forked = fork_worker(start.template, argv=argv, env=env, cwd=cwd, wait_s=wait_s)
        if isinstance(forked, ForkedWorker):
            return forked, ""
        note = forked
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        bufsize=1,
        start_new_session=True,
        env=env,
        cwd=cwd,
    )
    said = note and not start.quiet
    return proc, f"worker spawned, not forked from the sweep's template: {note}" if said else ""


# ----------------------------------------------------------------------------- the wire
def send_message(conn: socket.socket, message: dict[str, Any], *, fds: list[int] | None = None) -> None:
    """One JSON line; file descriptors ride along with its first bytes."""
    data = json.dumps(message).encode() + b"\n"
    sent = socket.send_fds(conn, [data], fds) if fds else conn.send(data)
    conn.sendall(data[sent:])


def recv_message(conn: socket.socket, *, max_fds: int = 0) -> tuple[dict[str, Any], bytes]:
    """One JSON line (with the file descriptors sent with it under `fds`), and any bytes read past it."""
    buffer, fds = b"", []
    while b"\n" not in buffer:
        if max_fds and not fds:
            chunk, fds, _, _ = socket.recv_fds(conn, 65536, max_fds)
        else:
            chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a whole message")
        buffer += chunk
        if len(buffer) > MAX_MESSAGE:
            raise ValueError("message too long")
    line, _, rest = buffer.partition(b"\n")
    message = json.loads(line)
    if fds:
        message["fds"] = fds
    return message, rest
