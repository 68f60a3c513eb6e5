"""Stage 4: what a job runs and measures. The registry of scenarios (torch-free), the only place that turns
a scenario's name or config into its code: `conf/scenario/<name>.yaml` names a config class (a
:class:`~pipeline.scenarios.base.ScenarioConfig`) with `_target_`, and that class names its implementation
(`runner`). The built-in ones are `train/`, `inference/`, `generate/`: each a `config.py`, a `scenario.py`."""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping
from importlib import import_module
from typing import Any

from pipeline.config.errors import ConfigError
from pipeline.config.fields import type_words
from pipeline.provenance import PROJECT_ROOT
from pipeline.scenarios.base import ScenarioConfig

CONF = PROJECT_ROOT / "conf"


def config_class(target: Any) -> type[ScenarioConfig]:
    """The class a scenario's `_target_` names; a ConfigError when it names none."""
    module, _, name = str(target).rpartition(".")
    try:
        cls = getattr(import_module(module), name) if module else None
    except Exception as exc:
        raise ConfigError(
            "scenario._target_",
            target,
            f"a dotted path to a scenario's config class ({type(exc).__name__}: {exc})",
        ) from exc
    if not (isinstance(cls, type) and issubclass(cls, ScenarioConfig)):
        raise ConfigError("scenario._target_", target, "a subclass of pipeline.scenarios.base.ScenarioConfig")
    return cls


def scenario_config(data: Mapping[str, Any]) -> ScenarioConfig:
    """The typed config of a scenario from its node (as composed, or as the worker reads it back): keys
    and value types checked against its class, each problem one ConfigError naming `scenario.<key>`."""
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError, ValidationError

    cls = config_class(data.get("_target_"))
    try:
        merged = OmegaConf.merge(OmegaConf.structured(cls), dict(data))
    except ConfigKeyError as err:
        key = str(getattr(err, "full_key", None) or getattr(err, "key", None) or "?")
        keys = ", ".join(f.name for f in dataclasses.fields(cls) if not f.name.startswith("_"))
        raise ConfigError(
            f"scenario.{key}", data.get(key), f"not a key of scenario={cls.name}: it has {keys or 'no keys'}"
        ) from err
    except ValidationError as err:
        key = str(getattr(err, "full_key", "") or "?")
        field_type = typing.get_type_hints(cls).get(key)
        why = (
            f"expected {type_words(field_type)}" if field_type else " ".join(str(err).splitlines()[0].split())
        )
        raise ConfigError(f"scenario.{key}", data.get(key), why) from err
    return OmegaConf.to_object(merged)  # type: ignore[return-value]


def runner_class(config: ScenarioConfig) -> type:
    """The scenario's implementation (imports torch: the worker only)."""
    module, _, name = config.runner.partition(":")
    return getattr(import_module(module), name)


def runner_modules() -> list[str]:
    """The modules of every scenario's implementation (what a sweep's template imports once)."""
    return [cls.runner.partition(":")[0] for cls in available().values()]


@functools.cache
def available() -> dict[str, type[ScenarioConfig]]:
    """Every scenario of conf/scenario/, by its file's name."""
    import yaml

    found = {}
    for path in sorted((CONF / "scenario").glob("*.yaml")):
        node = yaml.safe_load(path.read_text()) or {}
        # `_global_` files nest it under `scenario`
        target = node.get("_target_") or (node.get("scenario") or {}).get("_target_")
        if target:
            found[path.stem] = config_class(target)
    return found


@functools.cache
def default_name() -> str:
    """The scenario conf/config.yaml picks when none is given (its run names omit it)."""
    import yaml

    for entry in yaml.safe_load((CONF / "config.yaml").read_text()).get("defaults", []):
        if isinstance(entry, dict) and "scenario" in entry:
            return str(entry["scenario"])
    return ""
