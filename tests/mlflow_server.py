"""A real MLflow tracking server for the integration tests, started and stopped through the project's
own script (scripts/mlflow-server.sh), on a free loopback port, with its store, artifacts, pid file
and log under a test's tmp dir."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "mlflow-server.sh"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    port: int
    base: Path  # store, artifacts, pid file and log live here
    env: dict[str, str]

    @property
    def store_uri(self) -> str:
        return self.env["MLFLOW_BACKEND_STORE_URI"]

    @property
    def artifacts(self) -> Path:
        return Path(self.env["MLFLOW_ARTIFACTS_DESTINATION"])

    @property
    def log(self) -> Path:
        return self.base / f"mlflow-server-{self.port}.log"

    @property
    def pid_file(self) -> Path:
        return self.base / f"mlflow-server-{self.port}.pid"

    def log_tail(self, lines: int = 60) -> str:
        if not self.log.exists():
            return f"(no server log at {self.log})"
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def script(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(SCRIPT), *args, "--port", str(self.port)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def stop(self) -> None:
        """Stop through the script; kill the process group ourselves if that did not do it."""
        pid = int(self.pid_file.read_text()) if self.pid_file.exists() else None
        try:
            self.script("stop", timeout=60)
        finally:
            if pid is not None:  # the script starts the server as the leader of its own process group
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)


def start_server(base: Path, *, workers: int | None = None, timeout: float = 300) -> Server:
    """`scripts/mlflow-server.sh --background` on a free port, store and artifacts under base."""
    base.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {
        **os.environ,
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "MLFLOW_BACKEND_STORE_URI": f"sqlite:///{(base / 'mlflow-server.db').resolve()}",
        "MLFLOW_ARTIFACTS_DESTINATION": str((base / "mlartifacts").resolve()),
        "MLFLOW_SERVER_STATE_DIR": str(base.resolve()),
        "MLFLOW_SERVER_START_TIMEOUT": str(int(timeout) - 30),
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    if workers is not None:
        env["MLFLOW_SERVER_WORKERS"] = str(workers)
    else:
        env.pop("MLFLOW_SERVER_WORKERS", None)
    server = Server(f"http://127.0.0.1:{port}", port, base.resolve(), env)
    proc = subprocess.run(
        [str(SCRIPT), "--background"], env=env, capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        server.stop()
        raise RuntimeError(
            f"{SCRIPT.name} --background failed (exit {proc.returncode})\n--- stdout\n{proc.stdout}\n"
            f"--- stderr\n{proc.stderr}\n--- server log\n{server.log_tail()}"
        )
    return server
