"""Shared helpers: compose configs like the CLI does, run the real CLI in a subprocess, read MLflow."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.tracking import mlflow_client
from tests import suite_plugin

ROOT = Path(__file__).resolve().parent.parent
# Tests send Ctrl-C (SIGINT) to the CLIs they start. A shell that starts pytest in the background
# ignores SIGINT for it, and every child would inherit that (Python installs no KeyboardInterrupt
# handler then): a Python handler here is reset to the default in each child instead.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# The processes the tests start print as into a log, whatever runs pytest: pytest-xdist's workers set
# COLUMNS=80 and LINES=24, and a job's lines fit a known terminal's width (pipeline/display.py). A test of
# a terminal's width sets COLUMNS itself.
for _variable in ("COLUMNS", "LINES"):
    os.environ.pop(_variable, None)
CONF = ROOT / "conf"
# A job small enough for a CPU: ViT with 2 blocks on 32 px images, batch 2, 4 steps (1 warm-up).
TINY = ["model=vit_tiny", "trainer.steps=4", "trainer.warmup_steps=1", "trainer.batch_size=2"]
# Added to TINY: its steps sleep 0.3 s each (tests/fault_models.py: sleepy), a job whose length does not
# depend on the host's speed or on how its worker started, and that leaves the CPU to the other tests.
SLEEPY = ["model.id=sleepy", "model.name=null", "model._target_=tests.fault_models.sleepy"]
# Every job the tests start runs a few calls of the host check (pipeline/measure/host.py) instead of 0.3 s a
# job (the suites run hundreds of jobs), and measures a fixed length: trainer.steps in rounds of one unit,
# one look (benchmark.budget_s=0), instead of measuring until its speedup is decided; unless the test sets them.
TEST_DEFAULTS = {
    "benchmark.host_check_s": "0.02",
    "benchmark.budget_s": "0",
    "benchmark.rounds": "1",
    "benchmark.round_s": "1e-06",
}
# Every inductor job the tests start shares the test session's inductor cache (the second compile of a
# graph in the session takes seconds, not a minute), unless the test sets diagnose.cache_dir or
# diagnose.cold_cache: a test whose subject is a cold compile (compile time, what a compile prints) sets
# diagnose.cold_cache=true, one about the cache's own rules diagnose.cache_dir=null (per sweep).
COLD_CACHE = "diagnose.cold_cache=true"


def session_inductor_cache() -> str | None:
    folder = suite_plugin.session_dir()
    return f"diagnose.cache_dir={folder / 'inductor'}" if folder else None


def sets(args: list[str], key: str) -> bool:
    return any(a.split("=", 1)[0].lstrip("+~") == key for a in args)


def with_test_defaults(args: list[str]) -> list[str]:
    """args with TEST_DEFAULTS added where they do not set those keys: for a job a test runs in-process."""
    return [*args, *(f"{key}={value}" for key, value in TEST_DEFAULTS.items() if not sets(args, key))]


def with_host_check(args: list[str]) -> list[str]:
    """args with the tests' job defaults added: TEST_DEFAULTS where they do not set those keys, the
    session's inductor cache unless they set diagnose.cache_dir or diagnose.cold_cache. Every way a test
    starts jobs adds them, so that a resumed sweep's jobs are the same jobs as its first session's."""
    added = with_test_defaults(args)[len(args) :]
    cache = session_inductor_cache()
    if cache and not sets(args, "diagnose.cache_dir") and not sets(args, "diagnose.cold_cache"):
        added.append(cache)
    return [*args, *added]


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(suite_plugin.SuitePlugin(config), "compile-sweeps-suite")


def sqlite_uri(path: Path) -> str:
    return f"sqlite:///{path.resolve()}"


@pytest.fixture(scope="session")
def empty_store_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty sqlite MLflow store, its tables made once by MLflow itself (about 2 s a store on this
    host). Tests of a store's creation (tests/test_store.py) start from no file instead."""
    path = tmp_path_factory.mktemp("empty-store") / "mlflow.db"
    mlflow_client(sqlite_uri(path)).search_experiments()
    return path


def store_copy(empty_store_file: Path, folder: Path) -> str:
    """An empty sqlite MLflow store at `folder`/mlflow.db (a copy of `empty_store_file`): its URI."""
    folder.mkdir(parents=True, exist_ok=True)
    return sqlite_uri(Path(shutil.copyfile(empty_store_file, folder / "mlflow.db")))


@pytest.fixture
def store(tmp_path: Path, empty_store_file: Path) -> str:
    """An empty sqlite MLflow store of the test's own under its tmp dir (a copy of `empty_store_file`)."""
    return store_copy(empty_store_file, tmp_path / "mlflow")


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


def run_help() -> subprocess.CompletedProcess:
    """`python -m pipeline.run --help`, as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", "pipeline.run", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


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
    """Drive the real CLI in a fresh process, outputs and MLflow store under tmp_path. `env` adds to the
    environment; a None value removes a variable (OMP_NUM_THREADS=None: torch's own default threads, where
    the session runs torch on one: tests/suite_plugin.py)."""
    cmd = [sys.executable, "-m", "pipeline.run"]
    if multirun:
        cmd.append("-m")
    cmd += [*with_host_check(args), f"hydra.run.dir={tmp_path}/run", f"hydra.sweep.dir={tmp_path}/multirun"]
    full_env = {
        k: v for k, v in {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}.items() if v is not None
    }
    full_env.pop("MLFLOW_TRACKING_URI", None)
    if uri_override:
        cmd.append(f"mlflow.tracking_uri={store_uri}")
    else:  # the store comes from the environment, through the config's default
        full_env["MLFLOW_TRACKING_URI"] = store_uri
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=full_env)


def run_report(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m pipeline.report ...` in a fresh process, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "pipeline.report", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def cli_command(
    args: list[str], tmp_path: Path, store_uri: str, *, multirun: bool = False
) -> tuple[list[str], dict[str, str]]:
    """The command and environment run_cli uses (for tests that start the CLI in the background)."""
    cmd = [sys.executable, "-m", "pipeline.run", *(["-m"] if multirun else [])]
    cmd += [*with_host_check(args), f"hydra.run.dir={tmp_path}/run", f"hydra.sweep.dir={tmp_path}/multirun"]
    cmd.append(f"mlflow.tracking_uri={store_uri}")
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    return cmd, {**env, "PYTHONUNBUFFERED": "1"}


def popen_cli(
    args: list[str],
    tmp_path: Path,
    store_uri: str,
    *,
    multirun: bool = False,
    env: dict[str, str] | None = None,
    stderr: int = subprocess.PIPE,
) -> subprocess.Popen:
    """run_cli, in the background, in a session of its own (so a test can signal its group). `env`
    replaces the environment (MLFLOW_TRACKING_URI is always dropped)."""
    cmd, default_env = cli_command(args, tmp_path, store_uri, multirun=multirun)
    if env is not None:
        default_env = {
            **{k: v for k, v in env.items() if k != "MLFLOW_TRACKING_URI"},
            "PYTHONUNBUFFERED": "1",
        }
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        text=True,
        start_new_session=True,
        env=default_env,
        stdout=subprocess.PIPE,
        stderr=stderr,
    )


def stop_group(proc: subprocess.Popen) -> None:
    """SIGKILL what is left of a popen_cli process (a test that failed midway leaves nothing behind)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def finish(proc: subprocess.Popen, timeout: float = 900) -> subprocess.CompletedProcess:
    """Wait for a popen_cli process and return what run_cli would have."""
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def one_line_errors(proc: subprocess.CompletedProcess, prefix: str) -> list[str]:
    """The lines of stderr that start with `prefix` (e.g. `config error:`); a traceback fails the test."""
    assert "Traceback" not in proc.stderr + proc.stdout, output(proc)
    return [line for line in proc.stderr.splitlines() if line.startswith(prefix)]


def unmount(path: Path, wait_s: float = 30) -> None:
    """Every mount at path (a bind mount over a tmpfs, then the tmpfs), tried again while one is busy (the
    processes of a test that failed midway still ending): a mount left behind would keep the test's
    folder from being removed."""
    deadline = time.monotonic() + wait_s
    while os.path.ismount(path) and time.monotonic() < deadline:
        if subprocess.run(["umount", str(path)], capture_output=True, check=False).returncode != 0:
            time.sleep(0.2)


@pytest.fixture
def read_only_dir(tmp_path: Path):
    """An existing folder nothing can be written in: a read-only tmpfs mounted there where the tests
    run as root (root writes through permissions), else a folder without write permission."""
    path = tmp_path / "read-only"
    path.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(path)], check=True)
        yield path
        unmount(path)
    else:
        path.chmod(0o555)
        yield path
        path.chmod(0o755)


@pytest.fixture
def full_dir(tmp_path: Path):
    """A folder on a full filesystem: a 1 MiB tmpfs, filled up by `filler` (delete it to make room).
    Mounting needs root."""
    if os.geteuid() != 0:
        pytest.skip("a full filesystem needs a tmpfs mount: root only")
    path = tmp_path / "full"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)], check=True)
    try:
        with open(path / "filler", "wb") as filler:
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
    except OSError:
        pass
    yield path
    unmount(path)


def runs(store_uri: str, experiment: str = "compile-sweeps", filter_string: str = "") -> list:
    client = mlflow_client(store_uri)
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
    """MLflow's client, opened as the jobs open it (a new sqlite store is set up under its lock: a test
    polling a store a job is setting up must not race it)."""
    return mlflow_client(store_uri)


def output(proc: subprocess.CompletedProcess) -> str:
    return f"--- exit {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}"


def every_job_line(stdout: str) -> str:
    """The terminal summary's `every job: ...` line, joined where the terminal's width wrapped it."""
    found = re.search(r"^every job: (.*?)\n\s+sweep \S+: ", stdout, re.S | re.M)
    assert found, stdout[-3000:]
    return "every job: " + " ".join(found.group(1).split())


# A second process holding the sqlite file with `BEGIN EXCLUSIVE`, as a long query, a backup or another
# tool can: until its stdin closes (`seconds` 0), or for `seconds`.
HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
if float(sys.argv[2]) > 0:
    time.sleep(float(sys.argv[2]))
else:
    sys.stdin.read()
conn.execute("ROLLBACK")
"""


@contextlib.contextmanager
def lock_held(db: Path, seconds: float = 0):
    """A real second process holding the sqlite file locked (`BEGIN EXCLUSIVE`) while the block runs
    (`seconds` 0: until the block ends or the test closes its stdin; else for `seconds`)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(db), str(seconds)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        if holder.stdin is not None:
            holder.stdin.close()
        try:
            holder.wait(timeout=60)
        finally:
            if holder.poll() is None:
                holder.kill()


def significant_digits(text: str) -> int:
    """How many significant digits a number as written shows (`1,300` 2, `10.0` 3)."""
    whole, _, fraction = text.replace(",", "").lstrip("+-").partition(".")
    digits = whole + fraction if fraction else whole.rstrip("0")  # `1,300`: trailing zeros of a whole number
    return len(digits.lstrip("0")) or 1
