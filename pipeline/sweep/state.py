"""Sweep state shared by the multirun callback (which writes it) and the jobs (which read it).

Launchers pickle callbacks and may run jobs on other machines, so jobs get the sweep's identity from a
small file in the sweep directory (`sweep.json`: sweep id, parent run id, job count), never from a
live object.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from pipeline.status import EXIT_FAILED

SWEEP_FILE = "sweep.json"


class SweepStopped(SystemExit):
    """A sweep (or a single run) refused or stopped, said in one line with its exit code. A SystemExit:
    Hydra turns any other exception in a callback into a warning and goes on (a sweep without its
    parent run), and `pipeline.run` prints the line."""

    def __init__(self, line: str, code: int = EXIT_FAILED):
        super().__init__(code)
        self.line = line


@dataclass(kw_only=True)
class SweepContext:
    sweep_id: str
    parent_run_id: str
    sweep_dir: str
    tracking_uri: str
    experiment: str
    total_jobs: int | None = None
    resume: bool = False
    name: str | None = None
    axes: list[str] = field(default_factory=list)  # the swept keys, e.g. ["compile.mode", "trainer.seed"]
    min_effect_pct: float = 1.0  # the verdict's settings (sweep.min_effect_pct, sweep.max_interval_pct)
    max_interval_pct: float = 2.5
    started_at: float = 0.0  # when this driver started the sweep (epoch seconds)
    prior_wall_s: float = 0.0  # wall time of the sweep's earlier sessions (resumed: not the gap between)
    finished: bool = False  # the summary is published and the parent run closed

    def wall_s(self) -> float:
        """The sweep's wall time so far: its earlier sessions' plus this one's."""
        return self.prior_wall_s + time.time() - self.started_at

    def save(self) -> None:
        path = Path(self.sweep_dir) / SWEEP_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(path)

    @classmethod
    def load(cls, sweep_dir: str | Path) -> SweepContext | None:
        path = Path(sweep_dir) / SWEEP_FILE
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def new_sweep_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def swept_keys(hydra_cfg: Any) -> list[str]:
    """The keys the sweep varies (`compile.mode`, `trainer.seed`, `+model.kwargs.depth` as `model.kwargs.depth`)."""
    return [axis.split("=", 1)[0].lstrip("+~") for axis in swept(hydra_cfg)]


def swept(hydra_cfg: Any) -> list[str]:
    """The sweep's axes as `key=v1,v2` (task overrides with several values, and hydra.sweeper.params)."""
    axes = {str(k): str(v) for k, v in (hydra_cfg.sweeper.get("params") or {}).items()}
    for override in hydra_cfg.overrides.task:
        key, _, value = str(override).partition("=")
        if "," in value and not value.startswith(("[", "{")):
            axes[key] = value
    return [f"{k}={v}" for k, v in axes.items()]


def count_jobs(hydra_cfg: Any) -> int | None:
    """How many jobs the basic sweeper will launch (task overrides and `hydra.sweeper.params`); None
    for sweepers that decide as they go (Optuna)."""
    try:
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
        from hydra.core.override_parser.overrides_parser import OverridesParser

        if "BasicSweeper" not in str(hydra_cfg.sweeper.get("_target_", "")):
            return None
        args = [f"{k}={v}" for k, v in (hydra_cfg.sweeper.get("params") or {}).items()]
        args += list(hydra_cfg.overrides.task)
        overrides = OverridesParser.create().parse_overrides(args)
        return sum(len(batch) for batch in BasicSweeper.split_arguments(overrides, None))
    except Exception:
        return None
