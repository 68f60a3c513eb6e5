"""Where a result came from (the git commit, the command line with secrets masked) and the commands the
project prints for pasting, shell-quoted. Torch-free."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from pipeline.redaction import redact_text

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def git_commit() -> str | None:
    """HEAD of the project's checkout, with `-dirty` when tracked files changed; None outside git."""
    try:
        commit = _git("rev-parse", "HEAD")
        return commit + ("-dirty" if _git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("PIPELINE_GIT_COMMIT")


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10, check=True
    ).stdout.strip()


def command_args(argv: list[str] | None = None) -> list[str]:
    """The words of the command that started this process (`python -m pipeline.run` for the entry
    point), redacted."""
    args = list(sys.argv if argv is None else argv)
    if args and args[0].endswith("pipeline/run.py"):
        args[0:1] = ["python", "-m", "pipeline.run"]
    return [redact_text(a) for a in args]


def command_line(argv: list[str] | None = None) -> str:
    """`command_args`, shell-quoted: pasted into a shell, the same words again, whatever they hold."""
    return shlex.join(command_args(argv))


def sync_command(folders: Iterable[str | Path]) -> str:
    """`python -m pipeline.report --sync <folders>`, shell-quoted, whatever the folders' names hold."""
    return shlex.join(["python", "-m", "pipeline.report", "--sync", *(str(f) for f in folders)])
