"""`doc(default, help, choices=..., gt=..., ge=..., within=...)`: a config field with its help text and
its allowed values, declared once, read by :mod:`pipeline.config.checks` and `make docs` (torch-free)."""

from __future__ import annotations

import copy
from dataclasses import field, is_dataclass
from typing import Any


def doc(
    default: Any,
    help: str,
    *,
    choices: tuple[str, ...] | None = None,
    gt: float | None = None,
    ge: float | None = None,
    within: tuple[float, float] | None = None,
) -> Any:
    """A dataclass field with its help text and its constraints (read by the checks and `make docs`).
    A dataclass type or a dict or list default becomes a default factory."""
    limits = {"choices": choices, "gt": gt, "ge": ge, "within": within}
    meta = {"help": help} | {key: value for key, value in limits.items() if value is not None}
    if isinstance(default, type) and is_dataclass(default):
        return field(default_factory=default, metadata=meta)
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: copy.copy(default), metadata=meta)
    return field(default=default, metadata=meta)
