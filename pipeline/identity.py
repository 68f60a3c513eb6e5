"""What identifies a configuration, defined once: it drives run names, the identity tags a user filters
on, the summary's columns and the config hash that resume matches on. Torch-free."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pipeline.config.schema import Config, to_dict

# tag name -> how it reads off a config; the summary table shows all but `teacher` (in the loss column).
IDENTITY_KEYS = ("model", "loss", "precision", "mode", "backend", "fullgraph", "dynamic", "scope", "teacher")
TABLE_KEYS = IDENTITY_KEYS[:-1]
# Config sections that say where or how a job is recorded, not what it measures: not in the hash.
NOT_IDENTITY = ("sweep", "mlflow")


def identity(cfg: Config) -> dict[str, str]:
    """The tags that identify a configuration (also the summary table's columns)."""
    c = cfg.compile
    return {
        "model": cfg.model.id,
        "loss": cfg.loss.id,
        "precision": cfg.precision.id,
        "mode": c.mode,
        "backend": c.backend if c.compiled else "-",
        "fullgraph": str(c.fullgraph).lower(),
        "dynamic": str(c.dynamic).lower(),
        "scope": c.scope if c.compiled else "-",
        "teacher": cfg.loss.teacher.id if cfg.loss.teacher is not None else "-",
    }


def identity_tags(cfg: Config) -> dict[str, str]:
    """The identity as a run's tags: `teacher` only where there is one."""
    return {k: v for k, v in identity(cfg).items() if not (k == "teacher" and v == "-")}


def run_name(cfg: Config) -> str:
    """Readable: `vit_b16·amp·max-autotune·inductor`, plus whatever differs from the defaults."""
    ident = identity(cfg)
    parts = [ident["model"], ident["precision"], ident["mode"]]
    if cfg.compile.compiled:
        parts.append(ident["backend"])
        if ident["scope"] != "model":
            parts.append(ident["scope"])
        if ident["fullgraph"] == "true":
            parts.append("fullgraph")
        if ident["dynamic"] != "none":
            parts.append(f"dynamic={ident['dynamic']}")
    if ident["loss"] != "ce":
        teacher = ident["teacher"]
        parts.insert(1, f"{ident['loss']}({teacher})" if teacher != "-" else ident["loss"])
    return "·".join(parts)


def config_hash(cfg: Config) -> str:
    """Identifies a job's configuration across re-runs of a sweep (for `sweep.resume`)."""
    data: dict[str, Any] = {k: v for k, v in to_dict(cfg).items() if k not in NOT_IDENTITY}
    return hashlib.sha1(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]
