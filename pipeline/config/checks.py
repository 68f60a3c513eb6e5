"""`check(cfg)`: what a config can answer on its own, torch-free: unknown keys, each field's declared
constraints (from its metadata), finite numbers and no control characters, then each section's `check`.
Checks needing a library or the host are the job's preflight (:mod:`pipeline.job.preflight`).
"""

from __future__ import annotations

import dataclasses
import math
import unicodedata
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig
from omegaconf.errors import MissingMandatoryValue

from pipeline.config.errors import ConfigError, not_one_of
from pipeline.config.schema import Config, to_config, unknown_keys

# A scenario's own text (a generation prompt) may hold line breaks; its config class checks it.
FREE_TEXT = ("scenario",)


def check(cfg: Config | DictConfig) -> Config:
    """Check keys, values and combinations; return the typed config, or raise the first
    :class:`ConfigError` (every error found is in its `.errors`)."""
    if isinstance(cfg, DictConfig):
        raise_first(unknown_keys(cfg))
        try:
            config = to_config(cfg)
        except MissingMandatoryValue as err:  # `~model`: a group's choice removed
            key = str(err.full_key or "?")
            raise ConfigError(key, None, f"a required value: pick one (e.g. {key}=<option>)") from err
    else:
        config = cfg
    raise_first(list(field_errors(config, "")))
    return config


def raise_first(errors: list[ConfigError]) -> None:
    """Raise the first error, carrying all of them (`.errors`); nothing when there is none."""
    if errors:
        first = errors[0]
        first.errors = errors
        raise first


def field_errors(node: Any, at: str) -> Iterator[ConfigError]:
    """The declared constraints of every field under `node`, then the node's own `check`."""
    for f in dataclasses.fields(node):
        key, value = f"{at}.{f.name}" if at else f.name, getattr(node, f.name)
        if dataclasses.is_dataclass(value):
            yield from field_errors(value, key)
        elif value is not None:
            yield from _value_errors(key, value)
            yield from _constraint_errors(key, value, f.metadata)
    check = getattr(node, "check", None)
    if check is not None:
        yield from check(at)


def _value_errors(key: str, value: Any) -> Iterator[ConfigError]:
    """A number that is not finite (`inf` seconds never time out), a text with control characters
    (a newline or an ANSI escape in a run name, a tag, the terminal), also inside mappings and lists."""
    if key.split(".")[0] in FREE_TEXT:
        return
    if isinstance(value, float) and not math.isfinite(value):
        yield ConfigError(key, value, "must be a finite number")
    elif isinstance(value, str) and any(unicodedata.category(c) in ("Cc", "Cf") for c in value):
        yield ConfigError(key, value, "a value without control characters (line breaks, escapes)")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _value_errors(f"{key}.{k}", v)
    elif isinstance(value, list):
        for v in value:
            yield from _value_errors(key, v)


def _constraint_errors(key: str, value: Any, meta: Any) -> Iterator[ConfigError]:
    if "choices" in meta and value not in meta["choices"]:
        yield not_one_of(key, value, meta["choices"])
    if "gt" in meta and not value > meta["gt"]:
        yield ConfigError(key, value, f"must be > {meta['gt']:g}")
    if "ge" in meta and not value >= meta["ge"]:
        yield ConfigError(key, value, f"must be >= {meta['ge']:g}")
    if "within" in meta and not meta["within"][0] <= value <= meta["within"][1]:
        low, high = meta["within"]
        yield ConfigError(key, value, f"must be in [{low:g}, {high:g}]")
