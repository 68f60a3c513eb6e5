"""Hydra's composition errors (an unknown key, a wrong type, a missing group option, an override that
does not parse) in one line naming the key, the bad value and what is allowed, read from the schema."""

from __future__ import annotations

import typing
from dataclasses import fields, is_dataclass
from typing import Any

from pipeline.config.schema import schema_node


def _type_name(tp: Any) -> str:
    args = typing.get_args(tp)
    if args:
        return " or ".join("null" if a is type(None) else _type_name(a) for a in args)
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def describe_compose_error(err: BaseException) -> str:
    """One line for a Hydra composition error: the key, the bad value, what is allowed."""
    from hydra.errors import MissingConfigException, OverrideParseException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

    cause = err.__cause__ or err
    if isinstance(err, MissingConfigException) and err.options is not None:
        missing = str(err.missing_cfg_file or "")
        group, _, option = missing.rpartition("/")
        return f"{group}={option} is not an option of the `{group}` group: allowed values are {', '.join(err.options)}"
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)) and getattr(cause, "full_key", None):
        path = cause.full_key.split(".")
        parent = schema_node(path[:-1])
        allowed = (
            [f.name for f in fields(parent)] if isinstance(parent, type) and is_dataclass(parent) else []
        )
        where = ".".join(path[:-1]) or "the top level"
        return f"{cause.full_key} is not a config key: {where} has " + (
            ", ".join(allowed) if allowed else "no such key"
        )
    if isinstance(cause, ValidationError) and getattr(cause, "full_key", None):
        value = getattr(cause, "value", None)
        tp = schema_node(cause.full_key.split("."))
        expected = _type_name(tp) if tp is not None else "another type"
        return f"{cause.full_key}={value!r} is not allowed: expected {expected}"
    if isinstance(err, OverrideParseException):
        return f"cannot parse the override: {str(err).splitlines()[0]}"
    return " ".join(str(err).split())
