"""Shared helpers: compose configs like the CLI does, run the real CLI in a subprocess, read MLflow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Config checks remembered by pipeline.config.known_good go to a folder of this test session, not the user's.
os.environ.setdefault("PIPELINE_CACHE_DIR", tempfile.mkdtemp(prefix="pipeline-known-good-"))
CONF = ROOT / "conf"
# A job small enough for a CPU: ViT with 2 blocks on 32 px images, batch 2, 4 steps (1 warm-up).
TINY = ["model=vit_tiny", "trainer.steps=4", "trainer.warmup_steps=1", "trainer.batch_size=2"]


def sqlite_uri(path: Path) -> str:
    return f"sqlite:///{path.resolve()}"


@pytest.fixture
def store(tmp_path: Path) -> str:
    """A fresh sqlite MLflow store under the test's tmp dir."""
    return sqlite_uri(tmp_path / "mlflow" / "mlflow.db")


def compose(overrides: list[str] | None = None):
    """Compose the config exactly as `python -m pipeline.run` would (without Hydra's runtime node)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from pipeline.config.schema import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = hydra_compose("config", overrides=overrides or [], return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)  # so `${hydra:...}` resolves, as in a real job
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def run_cli(
    args: list[str],
    tmp_path: Path,
    store_uri: str,
    *,
    multirun: bool = False,
    timeout: float = 900,
    env: dict | None = None,
    uri_override: bool = True,
) -> subprocess.CompletedProcess:
    """Drive the real CLI in a fresh process, outputs and MLflow store under tmp_path."""
    cmd = [sys.executable, "-m", "pipeline.run"]
    if multirun:
        cmd.append("-m")
    cmd += [*args, f"hydra.run.dir={tmp_path}/run", f"hydra.sweep.dir={tmp_path}/multirun"]
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env.pop("MLFLOW_TRACKING_URI", None)
    if uri_override:
        cmd.append(f"mlflow.tracking_uri={store_uri}")
    else:  # the store comes from the environment, through the config's default
        full_env["MLFLOW_TRACKING_URI"] = store_uri
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=full_env)


def runs(store_uri: str, experiment: str = "compile-sweeps", filter_string: str = "") -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    return list(client.search_runs([exp.experiment_id], filter_string=filter_string, max_results=1000))


def run_info(run) -> dict:
    """A run's run_info.json artifact (the worker's environment and the job's internals), read back
    through MLflow (a sqlite store's artifacts are local `file://` URIs)."""
    import mlflow.artifacts

    return json.loads(mlflow.artifacts.load_text(f"{run.info.artifact_uri}/run_info.json"))


def client(store_uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=store_uri)


def output(proc: subprocess.CompletedProcess) -> str:
    return f"--- exit {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}"
