"""A config field with its help text and its allowed values, declared once (torch-free).

`doc(default, help, choices=..., gt=..., ge=..., within=...)` is a dataclass field whose metadata the
checks (:mod:`pipeline.config.checks`) and the config reference (`make docs`) read, so a field's meaning
and its constraints sit next to it and nowhere else.
"""

from __future__ import annotations

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
    A dataclass type or a dict default becomes a default factory."""
    meta: dict[str, Any] = {"help": help}
    for key, value in (("choices", choices), ("gt", gt), ("ge", ge), ("within", within)):
        if value is not None:
            meta[key] = value
    if isinstance(default, type) and is_dataclass(default):
        return field(default_factory=default, metadata=meta)
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=meta)
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)
