"""The project's MLflow server script: loopback by default, a real server the pipeline logs to."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.mlflow_server import SCRIPT, free_port


def listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp writes them) listening on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if int(hex_port, 16) == port and state == "0A":  # LISTEN
                found.add(address)
    return found


@pytest.mark.integration
def test_server_binds_to_loopback_unless_told_otherwise(tmp_path: Path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("HOST", "MLFLOW_TRACKING_URI")}
    env.update(
        MLFLOW_BACKEND_STORE_URI=f"sqlite:///{tmp_path / 'm.db'}",
        MLFLOW_ARTIFACTS_DESTINATION=str(tmp_path / "art"),
        MLFLOW_SERVER_STATE_DIR=str(tmp_path),
    )
    started = subprocess.run(
        [str(SCRIPT), "--background", "--port", str(port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        addresses = listening_addresses(port)
        assert addresses == {"0100007F"}, addresses  # 127.0.0.1 only: nothing on 0.0.0.0 or ::
    finally:
        subprocess.run(
            [str(SCRIPT), "stop", "--port", str(port)], env=env, capture_output=True, text=True, timeout=120
        )
