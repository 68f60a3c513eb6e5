"""What a job's run gets, as plain data (:class:`RunPayload`), built by :mod:`pipeline.job.outcome` and
written by `Tracker.log_payload`; params flattened and redacted, text artifacts as redacted copies."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.config.schema import dotted
from pipeline.redaction import redacted, scrub

PARAM_LIMIT = 6000  # MLflow's max param value length
TAG_LIMIT = 5000
# Artifacts uploaded as redacted copies (names, values of secret-looking keys, URI passwords masked).
TEXT_SUFFIXES = (".yaml", ".json", ".csv", ".log", ".txt", ".md")


@dataclass(frozen=True, kw_only=True)
class RunPayload:
    """Everything a finished (or failed) job logs into its run, then the status it closes with."""

    params: dict[str, str]
    metrics: dict[str, float]
    series: dict[str, list[tuple[int, float]]]  # curves: name -> (step, value)
    tags: dict[str, str]
    status: str
    failed: bool  # the job has an error (an earlier attempt's error tags are kept)
    files: list[Path] = field(default_factory=list)  # those that exist are uploaded
    folders: list[Path] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)  # values masked wherever they appear in a text file


def flatten(data: dict[str, Any]) -> dict[str, str]:
    """Dotted keys -> string values, redacted."""
    return {
        path: (json.dumps(value) if isinstance(value, (list, dict)) else str(value))[:PARAM_LIMIT]
        for path, value in dotted(redacted(data)).items()
    }


def redacted_copy(path: Path, scratch: Path, secrets: list[str]) -> Path:
    """A text file as it may leave the machine (same name, under `scratch`); other files as they are."""
    if path.suffix not in TEXT_SUFFIXES:
        return path
    copy = scratch / path.name
    copy.write_text(scrub(path.read_text(errors="replace"), secrets))
    return copy
