"""What identifies a configuration, defined once: run names, identity tags, the summary's columns and
the hashes resume and the verdict match on. The fixed keys name every run; the other keys a sweep varies
join the name and the tags, so two runs of one sweep never share a name. Torch-free.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from pipeline.config.schema import Config, to_dict
from pipeline.redaction import MASK, looks_secret
from pipeline.scenarios import CONF, config_class, default_name

COMPILE_KEYS = ("mode", "backend", "fullgraph", "dynamic", "scope")  # compile.<key>
IDENTITY_KEYS = ("model", "loss", "precision", *COMPILE_KEYS, "parallel", "world_size", "scenario", "teacher")
TABLE_KEYS = IDENTITY_KEYS[:-1]  # the summary shows the teacher in the loss column
# Swept keys the fixed identity already covers (group choices and the compile settings).
COVERED = {
    **{key: key for key in ("model", "loss", "precision", "scenario", "parallel")},
    **{f"{group}.id": group for group in ("model", "loss", "precision")},
    **{f"compile.{key}": key for key in COMPILE_KEYS},
    "model@loss.teacher": "teacher",
    "parallel.strategy": "parallel",
    "parallel.nproc": "world_size",
}
# Config sections that say where or how a job is recorded, not what it measures: not in the hashes.
NOT_IDENTITY = ("sweep", "mlflow")
REPEAT_KEY = "benchmark.repeat"  # repeats of one configuration share its pool hash


def identity(cfg: Config, varied: list[str] | tuple[str, ...] = ()) -> dict[str, str]:
    """The tags that identify a configuration (also the summary table's columns): the fixed keys, then
    each varied key the fixed ones do not cover, by its dotted name."""
    c = cfg.compile
    tags = {
        "model": cfg.model.id,
        "loss": cfg.loss.id if cfg.scenario.trains else "-",  # inference and generation have none
        "precision": cfg.precision.id,
        "mode": c.mode,
        "backend": c.backend if c.compiled else "-",
        "fullgraph": str(c.fullgraph).lower(),
        "dynamic": str(c.dynamic).lower(),
        "scope": c.scope if c.compiled else "-",
        "parallel": cfg.parallel.strategy,
        "world_size": str(cfg.parallel.nproc),
        "scenario": cfg.scenario.name,
        "teacher": cfg.loss.teacher.id if cfg.loss.teacher is not None else "-",
    }
    data = to_dict(cfg)
    for key in extra_keys(varied):
        tags[key] = MASK if looks_secret(key) else _text(lookup(data, key))
    return tags


def identity_tags(cfg: Config, varied: list[str] | tuple[str, ...] = ()) -> dict[str, str]:
    """The identity as a run's tags: `teacher` and `loss` only where there is one."""
    return {k: v for k, v in identity(cfg, varied).items() if not (k in ("teacher", "loss") and v == "-")}


def job_tags(cfg: Config, varied: list[str] | tuple[str, ...], job_dir: Any) -> dict[str, str]:
    """A job's run tags: its identity, the hashes that resume and the verdict match on, its folder."""
    return {
        **identity_tags(cfg, varied),
        "config_hash": config_hash(cfg),
        "pool_hash": pool_hash(cfg),
        "job_dir": str(job_dir),
    }


def extra_keys(varied: list[str] | tuple[str, ...]) -> list[str]:
    """The swept keys the fixed identity lacks, normalized (`+model.kwargs.depth` -> `model.kwargs.depth`)."""
    keys = (key.lstrip("+~") for key in varied)
    return list(dict.fromkeys(k for k in keys if k not in COVERED and not k.startswith("hydra.")))


def run_name(cfg: Config, varied: list[str] | tuple[str, ...] = ()) -> str:
    """`vit_b16·amp·max-autotune·inductor` (`·ddp×2` distributed), plus what differs from the defaults
    and every varied key (`·seed=1`)."""
    ident = identity(cfg, varied)
    parts = [ident["model"], ident["precision"], ident["mode"]]
    if cfg.compile.compiled:
        parts.append(ident["backend"])
        if ident["scope"] != "model":
            parts.append(ident["scope"])
        if ident["fullgraph"] == "true":
            parts.append("fullgraph")
        if ident["dynamic"] != "none":
            parts.append(f"dynamic={ident['dynamic']}")
    if cfg.parallel.distributed:
        parts.append(f"{ident['parallel']}×{ident['world_size']}")
    if ident["scenario"] != default_name():
        parts.append(ident["scenario"])
    if ident["loss"] not in ("ce", "-"):
        teacher = ident["teacher"]
        parts.insert(1, f"{ident['loss']}({teacher})" if teacher != "-" else ident["loss"])
    keys = extra_keys(varied)
    labels = short_labels(keys)
    parts.extend(_name_part(key, labels[key], ident[key]) for key in keys)
    return "·".join(parts)


def _name_part(key: str, label: str, value: str) -> str:
    """`seed=1`; swept inductor options by the conf/inductor preset that sets them
    (`inductor=coordinate_descent`, `inductor=none`), not as their JSON."""
    if key == "compile.options":
        try:
            options = json.loads(value)
        except ValueError:
            options = None  # no preset's: each is a mapping
        for name, preset in _inductor_presets():
            if preset == options:
                return f"inductor={name}"
    return f"{label}={value}"


@functools.cache
def _inductor_presets() -> tuple[tuple[str, Any], ...]:
    """conf/inductor's presets, (name, options), read once a process."""
    import yaml

    return tuple(
        (path.stem, yaml.safe_load(path.read_text()) or {})
        for path in sorted((CONF / "inductor").glob("*.yaml"))
    )


def sweep_label(config: Any, axes: list[str] | tuple[str, ...], sweep_id: str) -> str:
    """A sweep's name for its parent run and its view: `train vit_tiny: mode=eager,default`, a named
    sweep as `compile_search: train resnet50`, the id when nothing else says it. `config` is its composed
    config (DictConfig or mapping), `axes` its varied keys as `key=v1,v2`."""
    keys = [axis.split("=", 1)[0].lstrip("+~") for axis in axes]
    what = []
    if "scenario" not in keys:
        what.append(_scenario_name(_get(config, "scenario")))
    if "model" not in keys and _get(_get(config, "model"), "id"):
        what.append(str(_get(_get(config, "model"), "id")))
    head = " ".join(w for w in what if w)
    name = _get(_get(config, "sweep"), "name")
    if name:
        return f"{name}: {head}" if head else str(name)
    labels = short_labels(keys)
    varied = " ".join(
        f"{labels[key]}={axis.split('=', 1)[1]}" for key, axis in zip(keys, axes, strict=True) if "=" in axis
    )
    if varied:
        return f"{head}: {varied}" if head else varied
    return f"{head} {sweep_id}" if head else sweep_id


def _get(node: Any, key: str) -> Any:
    """`node[key]` of a DictConfig, a mapping or an object; None where it has none."""
    try:
        return node.get(key) if hasattr(node, "get") else getattr(node, key, None)
    except Exception:
        return None


def _scenario_name(node: Any) -> str:
    """The scenario's name (its config class's), from its node or typed config."""
    if hasattr(node, "name") and isinstance(getattr(type(node), "name", None), str):
        return str(node.name)
    try:
        return config_class(_get(node, "_target_")).name
    except Exception:
        return default_name()


def short_labels(keys: list[str]) -> dict[str, str]:
    """`trainer.seed` -> `seed`, unless two keys end alike (then the full key)."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (short if last.count(short) == 1 else k) for k, short in zip(keys, last, strict=True)}


def config_hash(cfg: Config) -> str:
    """Identifies one job's configuration across re-runs of a sweep (for `sweep.resume`)."""
    return _hash({k: v for k, v in to_dict(cfg).items() if k not in NOT_IDENTITY})


def pool_hash(cfg: Config) -> str:
    """Identifies a configuration whatever its repeat index: repeats of it share this hash, and the
    verdict pools them."""
    data = {k: v for k, v in to_dict(cfg).items() if k not in NOT_IDENTITY}
    data["benchmark"] = {k: v for k, v in data["benchmark"].items() if k != "repeat"}
    return _hash(data)


def _hash(data: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def lookup(data: Any, key: str, missing: Any = None) -> Any:
    """The value at dotted `key` in nested dicts, `missing` where there is none."""
    for part in key.split("."):
        if not isinstance(data, dict) or part not in data:
            return missing
        data = data[part]
    return data


def _text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)
