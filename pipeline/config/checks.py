"""`check(cfg)`: the checks a config can answer on its own, torch-free, before anything starts:

1. each field's declared constraints (`choices`, `gt`, `ge`, `within`, declared with the field by
   :func:`pipeline.config.fields.doc`), read from the field metadata, so allowed values are declared once;
2. each section's own `check` method (combinations of its fields, next to them), and the scenario's
   `fits` (what the rest of the config must be for it).

The checks that need a library or the host (a model name, a backend, GPUs) are the job's preflight
(:mod:`pipeline.job.preflight`), which runs these first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig

from pipeline.config.errors import ConfigError
from pipeline.config.schema import Config, to_config


def check(cfg: Config | DictConfig) -> Config:
    """Check values and combinations; return the typed config, or raise the first
    :class:`ConfigError` (every error found is in its `.errors`)."""
    config = to_config(cfg) if isinstance(cfg, DictConfig) else cfg
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
            yield from _constraint_errors(key, value, f.metadata)
    check = getattr(node, "check", None)
    if check is not None:
        yield from check(at)


def _constraint_errors(key: str, value: Any, meta: Any) -> Iterator[ConfigError]:
    if "choices" in meta and value not in meta["choices"]:
        yield ConfigError(key, value, "allowed values are " + ", ".join(meta["choices"]))
    if "gt" in meta and not value > meta["gt"]:
        yield ConfigError(key, value, f"must be > {meta['gt']:g}")
    if "ge" in meta and not value >= meta["ge"]:
        yield ConfigError(key, value, f"must be >= {meta['ge']:g}")
    if "within" in meta and not meta["within"][0] <= value <= meta["within"][1]:
        low, high = meta["within"]
        yield ConfigError(key, value, f"must be in [{low:g}, {high:g}]")
