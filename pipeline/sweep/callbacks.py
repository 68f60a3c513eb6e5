"""Hydra callbacks: the sweep's parent run at multirun start, its summary at multirun end.

Hydra pickles callbacks for some launchers, so this object holds no client or connection: everything
it needs is rebuilt from the config, and jobs learn the sweep from `sweep.json` in the sweep dir.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from pipeline.config.schema import MlflowConfig
from pipeline.provenance import command_line
from pipeline.sweep.finish import close_interrupted, finish_sweep
from pipeline.sweep.state import SweepContext, count_jobs, new_sweep_id, swept, swept_keys
from pipeline.sweep.view import objective_for, publish_sweep_view
from pipeline.tracking import RunRecord, Tracker, TrackingUnavailable

# The sweep this process started (so an interrupted sweep can close its parent run).
ACTIVE_SWEEP: SweepContext | None = None
SWEEP_FAILURES: list[str] = []


def _mlflow_settings(config: DictConfig) -> MlflowConfig:
    return MlflowConfig(**OmegaConf.to_container(config.mlflow, resolve=True))  # type: ignore[arg-type]


class SweepCallback(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Create the experiment (and sqlite schema) once and the parent run, before any job starts."""
        global ACTIVE_SWEEP
        mlflow = _mlflow_settings(config)
        try:
            tracker = Tracker.from_config(mlflow)
        except TrackingUnavailable as err:  # Hydra turns callback exceptions into warnings: exit instead
            raise SystemExit(f"mlflow error: {err}") from err
        sweep_cfg = config.sweep
        sweep_id = sweep_cfg.id or new_sweep_id()
        parent = tracker.sweep_parent(sweep_id) if sweep_cfg.id else None
        if sweep_cfg.resume and parent is None:
            raise SystemExit(
                f"sweep.resume=true: no sweep with sweep.id={sweep_cfg.id!r} in experiment {mlflow.experiment!r}; set sweep.id to the id of an earlier sweep"
            )
        if parent is not None and not sweep_cfg.resume:
            raise SystemExit(
                f"sweep.id={sweep_id!r} already exists in experiment {mlflow.experiment!r}: add sweep.resume=true to continue it, or pick a new id"
            )
        sweep_dir = str(Path(config.hydra.sweep.dir).resolve())
        if "SlurmLauncher" in str(
            config.hydra.launcher.get("_target_", "")
        ) and mlflow.tracking_uri.startswith("sqlite:"):
            print(
                f"warning: SLURM jobs log to {mlflow.tracking_uri}: a sqlite file only works when every job runs on this machine; "
                "on a cluster start `make mlflow-server` and set mlflow.tracking_uri=http://<host>:<port>",
                flush=True,
            )
        if parent is None:
            axes = swept(config.hydra)
            tags = {
                "sweep_id": sweep_id,
                "sweep_parent": "true",
                "sweep_dir": sweep_dir,
                "sweep_axes": " ".join(axes),
                "command": command_line(),
                "min_effect_pct": sweep_cfg.min_effect_pct,
                "max_interval_pct": sweep_cfg.max_interval_pct,
            }
            if sweep_cfg.name:
                tags["sweep_name"] = sweep_cfg.name
            label = (
                sweep_cfg.name
                or " ".join(a.split("=", 1)[0].rsplit(".", 1)[-1] + "=" + a.split("=", 1)[1] for a in axes)
                or sweep_id
            )
            parent_name = f"sweep {label}"
            parent_id = tracker.start_run(parent_name, tags)
        else:
            parent_id, parent_name = parent.run_id, parent.name
            tracker.reopen(parent_id)
            tracker.set_tags(parent_id, {"resumed_in": sweep_dir})
        ACTIVE_SWEEP = SweepContext(
            sweep_id=sweep_id,
            parent_run_id=parent_id,
            sweep_dir=sweep_dir,
            tracking_uri=mlflow.tracking_uri,
            experiment=mlflow.experiment,
            total_jobs=count_jobs(config.hydra),
            resume=bool(sweep_cfg.resume),
            name=sweep_cfg.name,
            axes=swept_keys(config.hydra),
            min_effect_pct=sweep_cfg.min_effect_pct,
            max_interval_pct=sweep_cfg.max_interval_pct,
        )
        ACTIVE_SWEEP.save()
        print(
            f"sweep {sweep_id}: {ACTIVE_SWEEP.total_jobs or '?'} jobs, parent run {parent_id}, output {sweep_dir}",
            flush=True,
        )
        print(f"browse: {browse_url(tracker, ACTIVE_SWEEP, parent_name, config)}", flush=True)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Summarize the sweep from MLflow, attach the summary to the parent run, close it; fit the
        sweep's view to the columns its runs have."""
        if ACTIVE_SWEEP is None:
            return
        failures = finish_sweep(ACTIVE_SWEEP)
        SWEEP_FAILURES.extend(failures)
        tracker = Tracker(ACTIVE_SWEEP.tracking_uri, ACTIVE_SWEEP.experiment)
        parent = tracker.get_run(ACTIVE_SWEEP.parent_run_id)
        runs = tracker.sweep_children(ACTIVE_SWEEP.sweep_id)
        label = parent.name if parent else f"sweep {ACTIVE_SWEEP.sweep_id}"
        print(f"browse: {browse_url(tracker, ACTIVE_SWEEP, label, config, runs)}", flush=True)


def browse_url(
    tracker: Tracker, sweep: SweepContext, label: str, config: DictConfig, runs: list[RunRecord] | None = None
) -> str:
    """The URL of the sweep's saved view, ranked by its objective; the plain runs table when MLflow
    would not take the view (the sweep goes on either way)."""
    objective = objective_for(axes=swept(config.hydra), configured=config.sweep.objective)
    try:
        return publish_sweep_view(
            tracker, sweep_id=sweep.sweep_id, label=label, objective=objective, runs=runs
        )
    except Exception as exc:
        print(f"mlflow warning: could not save the sweep's view ({type(exc).__name__}: {exc})", flush=True)
        return tracker.runs_url()


def close_interrupted_sweep(reason: str) -> None:
    """Mark the parent run, and any child still RUNNING, as KILLED (Ctrl-C or SIGTERM of the sweep)."""
    if ACTIVE_SWEEP is None:
        return
    close_interrupted(ACTIVE_SWEEP, reason)
