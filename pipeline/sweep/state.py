"""What the sweep knows of itself from Hydra: its axes (`swept`), how many jobs it launches
(`count_jobs`), and `SweepStopped`, the one-line refusal with its exit code. What the jobs know of their
sweep is :mod:`pipeline.sweep_context` (sweep.json)."""

from __future__ import annotations

from typing import Any

from pipeline.measure.objective import Objective, Work, choose
from pipeline.status import EXIT_FAILED


class SweepStopped(SystemExit):
    """A sweep (or a single run) refused or stopped, said in one line with its exit code. A SystemExit:
    Hydra turns any other exception in a callback into a warning and goes on (a sweep without its
    parent run), and `pipeline.run` prints the line."""

    def __init__(self, line: str, code: int = EXIT_FAILED):
        super().__init__(code)
        self.line = line


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
    jobs = planned_jobs(hydra_cfg)
    return len(jobs) if jobs is not None else None


def planned_jobs(hydra_cfg: Any) -> list[list[str]] | None:
    """Each job's overrides, as the basic sweeper will launch them; None for sweepers that decide as
    they go (Optuna)."""
    try:
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
        from hydra.core.override_parser.overrides_parser import OverridesParser

        if "BasicSweeper" not in str(hydra_cfg.sweeper.get("_target_", "")):
            return None
        args = [f"{k}={v}" for k, v in (hydra_cfg.sweeper.get("params") or {}).items()]
        args += list(hydra_cfg.overrides.task)
        overrides = OverridesParser.create().parse_overrides(args)
        return [list(job) for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]
    except Exception:
        return None


def planned_objective(config: Any) -> Objective:
    """The objective the summary will rank by, from the work each planned job will state (its config,
    composed as the sweeper will compose it): what the sweep's view is sorted by before any job ran."""
    configured = config.sweep.get("objective")
    if configured:
        return choose([], configured)
    return choose(planned_work(config))


def planned_work(config: Any) -> list[Work | None]:
    """Each planned job's work per unit (None for a job whose config does not compose or check)."""
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import open_dict

    from pipeline.config.schema import to_config

    jobs = planned_jobs(config.hydra) or []
    if not jobs or not GlobalHydra.instance().is_initialized():
        return []
    loader = GlobalHydra.instance().config_loader()
    works: list[Work | None] = []
    for overrides in jobs:
        try:
            composed = loader.load_sweep_config(config, overrides)
            with open_dict(composed):
                del composed["hydra"]
            job = to_config(composed)
            works.append(job.scenario.work(job))
        except Exception:
            works.append(None)
    return works
