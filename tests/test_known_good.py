"""Config checks that need torch or a model library are remembered once passed, never once failed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import known_good
from pipeline.config.errors import ConfigError
from pipeline.job.preflight import validate
from tests.conftest import ROOT, compose

# In a fresh interpreter: validate a config, then say which heavy libraries the check imported.
PROBE = """
import json, sys
from tests.conftest import compose
from pipeline.job.preflight import validate
validate(compose(sys.argv[1:]))
print(json.dumps({m: m in sys.modules for m in ("torch", "timm", "transformers")}))
"""


def imported_by_validation(cache_dir: Path, *overrides: str) -> dict[str, bool]:
    env = {**os.environ, "PIPELINE_CACHE_DIR": str(cache_dir)}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *overrides],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "overrides, library",
    [
        (["model=vit_tiny", "compile.mode=default", "compile.backend=aot_eager"], "timm"),
        (["model=gpt2_tiny", "compile.mode=default", "compile.backend=aot_eager"], "transformers"),
    ],
)
def test_a_passed_check_skips_the_library_import_next_time(
    tmp_path: Path, overrides: list[str], library: str
):
    first = imported_by_validation(tmp_path, *overrides)
    assert first["torch"] and first[library]  # checked for real: backend list and model registry
    second = imported_by_validation(tmp_path, *overrides)
    assert second == {"torch": False, "timm": False, "transformers": False}


def test_a_failed_check_is_never_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PIPELINE_CACHE_DIR", str(tmp_path))
    for _ in range(2):
        with pytest.raises(ConfigError) as err:
            validate(compose(["model=vit_tiny", "compile.mode=default", "compile.backend=nope"]))
        assert err.value.key == "compile.backend" and "aot_eager" in err.value.allowed
    assert known_good.cache_file().exists()  # the valid model's check was written down
    validate(compose(["model=vit_tiny", "compile.mode=default", "compile.backend=aot_eager"]))


def test_another_library_version_checks_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PIPELINE_CACHE_DIR", str(tmp_path))
    calls = []
    assert known_good.passes("x", 1, lambda: calls.append(1) or True)
    assert known_good.passes("x", 1, lambda: calls.append(2) or True)
    assert calls == [1]
    versions = {**known_good.library_versions(), "timm": "0.0.1"}
    monkeypatch.setattr(known_good, "library_versions", lambda: versions)
    assert known_good.passes("x", 1, lambda: calls.append(3) or True)
    assert calls == [1, 3]


def test_an_unwritable_cache_only_means_checking_every_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("PIPELINE_CACHE_DIR", str(blocker / "sub"))  # a directory cannot be made here
    calls = []
    assert known_good.passes("x", 1, lambda: calls.append(1) or True)
    assert known_good.passes("x", 1, lambda: calls.append(2) or True)
    assert calls == [1, 2]
