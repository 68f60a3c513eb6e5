"""Config checks that passed (`compile.backend`, `model.name`), remembered by library versions so later
jobs skip the seconds of torch and model-library imports. Only passes are kept: anything else is checked
for real. The file is in `$PIPELINE_CACHE_DIR` (default `$XDG_CACHE_HOME/compile-sweeps`); it may be deleted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from pipeline.redaction import write_atomic

LIBRARIES = ("torch", "timm", "transformers")


def cache_root() -> Path:
    """The machine's cache: `$PIPELINE_CACHE_DIR`, else `$XDG_CACHE_HOME/compile-sweeps` or
    `~/.cache/compile-sweeps`."""
    return Path(
        os.environ.get("PIPELINE_CACHE_DIR")
        or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "compile-sweeps")
    )


def cache_file() -> Path:
    return cache_root() / "known_good_checks.json"


def library_versions() -> dict[str, str | None]:
    """Installed versions, read from package metadata (nothing is imported)."""
    versions: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _load(path: Path) -> set[str]:
    try:
        return set(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return set()


def passes(check: str, value: Any, run_check: Callable[[], bool]) -> bool:
    """`run_check()` (which may import torch or a model library), unless `check` already passed for
    this `value` with the installed library versions."""
    path = cache_file()
    payload = json.dumps([library_versions(), check, value], sort_keys=True, default=str)
    key = hashlib.sha256(payload.encode()).hexdigest()
    if key in _load(path):
        return True
    ok = run_check()
    # Only a pass is kept. Concurrent jobs may race: a lost key only costs one more real check; a
    # read-only home only means the check runs every time.
    if ok:
        with contextlib.suppress(OSError):
            write_atomic(path, json.dumps(sorted(_load(path) | {key})))
    return ok
