"""Secrets never reach the terminal and stay this user's on disk (issue 28, item 11): a job's FAILED
line that quotes a token, Hydra's `#0 : <overrides>` launch lines, URIs with passwords, the files that
hold the config unredacted, and runs that differ only in a swept secret."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.conftest import output, run_cli, runs
from tests.test_faults import FAULTY


@pytest.mark.slow
def test_secrets_stay_off_the_terminal_and_in_private_files(tmp_path: Path, store: str):
    first, second, uri_password = "sk-first-1234", "sk-second-5678", "uri-pw-4321"
    args = [
        *FAULTY,
        "model._target_=tests.secret_models.auth_fails",
        f"+model.kwargs.api_token={first},{second}",
        f"+model.kwargs.endpoint=http://someone:{uri_password}@127.0.0.1:1/x",
    ]
    proc = run_cli(args, tmp_path, store, multirun=True)
    assert proc.returncode == 1, output(proc)
    shown = proc.stdout + proc.stderr
    for secret in (first, second, uri_password):
        assert secret not in shown, secret
    # Hydra's launch lines (`#0 : <overrides>`) are quiet unless verbose (issue 29); any shown is masked
    launches = [ln for ln in shown.splitlines() if "#0 :" in ln or "#1 :" in ln]
    assert all("api_token=***" in ln for ln in launches), launches
    failed = [ln for ln in shown.splitlines() if ln.startswith("faulty") and ": FAILED: " in ln]
    assert len(failed) == 2 and all(ln.endswith("auth failed for token ***") for ln in failed), shown
    names = sorted(r.info.run_name for r in runs(store) if r.data.tags.get("sweep_parent") != "true")
    assert len(set(names)) == 2 and all("api_token=***" in n for n in names), names  # told apart
    sweep = tmp_path / "multirun"
    private = [sweep / "sweep.json", sweep / "multirun.yaml"]
    for job in ("0", "1"):
        private += [sweep / job / "job_config.json", *(sweep / job / ".hydra").glob("*.yaml")]
    assert len(private) == 10
    for path in private:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert first not in path.read_text() or path.name != "config.yaml" or ".hydra" in str(path)
