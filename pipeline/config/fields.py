"""`doc(default, help, choices=..., gt=..., ge=..., within=...)`: a config field with its help text and
its allowed values, declared once, read by :mod:`pipeline.config.checks` and `make docs` (torch-free)."""

from __future__ import annotations

import copy
import typing
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


TYPE_WORDS = {bool: "true/false", int: "an integer", float: "a number", str: "a string"}
PLURAL_WORDS = {int: "integers", float: "numbers", str: "strings"}


def type_words(tp: Any) -> str:
    """A field's type as a refusal says what it expects: `an integer or null`, `a list of integers`."""
    if typing.get_origin(tp) is list:
        (item,) = typing.get_args(tp) or (Any,)
        return f"a list of {PLURAL_WORDS.get(item, 'values')}"
    if args := typing.get_args(tp):
        return " or ".join("null" if a is type(None) else type_words(a) for a in args)
    return TYPE_WORDS.get(tp, getattr(tp, "__name__", str(tp)))
