"""Hydra callbacks: the sweep's parent run at multirun start, its summary at multirun end, and the
checks a single run needs before Hydra makes its folder.

Hydra pickles callbacks for some launchers, so this object holds no client or connection: everything
it needs is rebuilt from the config, and jobs learn the sweep from `sweep.json` in the sweep dir.
Hydra turns an exception raised in a callback into a warning and goes on, so every failure here is a
:class:`SweepStopped` (one line, an exit code) or, at the end, a failure the exit code counts.
"""

from __future__ import annotations

import copy
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from pipeline.config.checks import check, raise_first
from pipeline.config.compose import describe_compose_error, printable
from pipeline.config.errors import ConfigError
from pipeline.config.schema import MlflowConfig
from pipeline.job.preflight import host_errors, validate
from pipeline.job.result import refuse_overwrite, unsynced_results
from pipeline.job.supervisor import PROJECT_ROOT, worker_env
from pipeline.job.worker_start import TEMPLATE, TemplateProcess, fork_supported, no_template
from pipeline.measure.objective import Objective
from pipeline.provenance import command_line
from pipeline.redaction import make_private, private_files
from pipeline.status import EXIT_BAD_INPUT, FAILED, KILLED, RUNNING
from pipeline.sweep import lease
from pipeline.sweep.finish import abandon, close_interrupted, finish_sweep, resume_hint
from pipeline.sweep.state import (
    SweepStopped,
    count_jobs,
    planned_jobs,
    planned_objective,
    swept,
    swept_keys,
)
from pipeline.sweep.view import publish_sweep_view
from pipeline.sweep_context import SweepContext, new_sweep_id
from pipeline.tracking import RunRecord, Tracker, TrackingUnavailable

# The sweep this process started (so an interrupted sweep can close its parent run).
ACTIVE_SWEEP: SweepContext | None = None
SWEEP_FAILURES: list[str] = []
_DRIVER_LEASE: list[IO[str]] = []  # held open while this process drives its sweep
_TEMPLATES: list[TemplateProcess] = []  # the sweep's template process on this machine, while it runs


def _mlflow_settings(config: DictConfig) -> MlflowConfig:
    return MlflowConfig(**OmegaConf.to_container(config.mlflow, resolve=True))  # type: ignore[arg-type]


class SweepCallback(Callback):
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """A single run (no -m): sweep-only keys and a run dir that cannot be written are refused in
        one line, before Hydra makes the folder and anything starts."""
        for key in ("id", "resume"):
            if config.sweep.get(key):
                raise SweepStopped(
                    f"config error: sweep.{key}={config.sweep[key]!r} is not allowed: it only means something in a sweep (add -m)",
                    EXIT_BAD_INPUT,
                )
        try:  # bad input makes no run folder
            validate(task_config(config))
        except ConfigError as err:
            raise SweepStopped(config_error_lines(err), EXIT_BAD_INPUT) from err
        run_dir = Path(str(config.hydra.run.dir)).resolve()
        kept = unsynced_results(run_dir)
        if kept:  # a reused hydra.run.dir: its result is not in MLflow yet
            raise SweepStopped(
                f"config error: {refuse_overwrite('hydra.run.dir', run_dir, kept)}", EXIT_BAD_INPUT
            )
        writable_dir("hydra.run.dir", config.hydra.run.dir)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Create the experiment (and sqlite schema) once and the parent run, before any job starts."""
        global ACTIVE_SWEEP
        try:
            ACTIVE_SWEEP = start_sweep(config)
            start_template(config, Path(ACTIVE_SWEEP.sweep_dir))
        except SweepStopped:
            raise
        except TrackingUnavailable as err:
            raise SweepStopped(f"mlflow error: {err}") from err
        except Exception as err:  # a store that answers with errors, a bug: never a sweep without parent
            raise SweepStopped(
                f"sweep error: could not start the sweep: {type(err).__name__}: {err}"
            ) from err

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Hydra has saved the job's config, unredacted, beside it (`.hydra/`, and the sweep's
        `multirun.yaml`): this user's only, as `job_config.json` and `sweep.json` are."""
        output = Path(str(config.hydra.runtime.output_dir))
        files = list((output / str(config.hydra.output_subdir or ".hydra")).glob("*.yaml"))
        if config.hydra.mode == RunMode.MULTIRUN:
            files.append(Path(str(config.hydra.sweep.dir)) / "multirun.yaml")
        make_private(files)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Summarize the sweep from MLflow, attach the summary to the parent run, close it. A failure
        (the summary cannot be written, the store is gone) is one line and exit code 1."""
        stop_template()
        if ACTIVE_SWEEP is None:
            return
        try:
            end = finish_sweep(ACTIVE_SWEEP)
            summary = end.summary
            SWEEP_FAILURES.extend(r.name for r in summary.failures)
            if end.incomplete:
                line = (
                    f"sweep error: sweep {ACTIVE_SWEEP.sweep_id} is incomplete: {end.incomplete}; parent run "
                    f"{ACTIVE_SWEEP.parent_run_id} closed FAILED; {resume_hint(ACTIVE_SWEEP)}"
                )
                print(line, file=sys.stderr, flush=True)
                SWEEP_FAILURES.append(line)
        except Exception as err:
            line = abandon(ACTIVE_SWEEP, err)
            print(line, file=sys.stderr, flush=True)
            SWEEP_FAILURES.append(line)
            return
        tracker = Tracker(ACTIVE_SWEEP.tracking_uri, ACTIVE_SWEEP.experiment)
        parent = tracker.get_run(ACTIVE_SWEEP.parent_run_id)
        runs = tracker.sweep_children(ACTIVE_SWEEP.sweep_id)
        label = parent.name if parent else f"sweep {ACTIVE_SWEEP.sweep_id}"
        print(f"browse: {browse_url(tracker, ACTIVE_SWEEP, label, summary.objective, runs)}", flush=True)


def task_config(config: DictConfig) -> DictConfig:
    """The job's config as its task function gets it: without the `hydra` node."""
    task = copy.deepcopy(config)
    with open_dict(task):
        del task["hydra"]
    return task


def config_error_lines(err: ConfigError) -> str:
    return "\n".join(f"config error: {printable(str(e))}" for e in err.errors)


def check_planned_jobs(config: DictConfig) -> None:
    """Every job the sweep will launch, composed as its launcher will compose it and checked, before
    anything starts: a job that does not compose (a config file that is not YAML, a bad override)
    stops the sweep, as does a sweep none of whose jobs has a valid config (one line per error, exit
    2). A sweep with some bad jobs runs the others (each bad job is recorded FAILED). Where the jobs run
    on this host, its limits (CPU ranks, DataLoader workers) are checked too."""
    from hydra.core.global_hydra import GlobalHydra

    jobs = planned_jobs(config.hydra)
    if not jobs or not GlobalHydra.instance().is_initialized():
        return
    loader = GlobalHydra.instance().config_loader()
    here = "Slurm" not in str(config.hydra.launcher.get("_target_", ""))
    errors: list[ConfigError] = []
    runnable = False
    for overrides in jobs:
        try:
            composed = loader.load_sweep_config(config, overrides)
        except Exception as err:  # the job's config does not compose
            raise SweepStopped(f"config error: {describe_compose_error(err)}", EXIT_BAD_INPUT) from err
        if runnable:
            continue  # a job that can run: the sweep starts, its bad jobs fail alone
        try:
            job = check(task_config(composed))
            if here:
                raise_first(host_errors(job))
            runnable = True
        except ConfigError as err:
            errors += [e for e in err.errors if str(e) not in {str(seen) for seen in errors}]
    if runnable:
        return
    first = errors[0]
    first.errors = errors
    raise SweepStopped(config_error_lines(first), EXIT_BAD_INPUT)


def start_template(config: DictConfig, sweep_dir: Path) -> None:
    """The sweep's template process on this machine (benchmark.worker_start=template), which jobs fork
    their workers from; where it cannot run, the reason every job gives when it spawns instead."""
    if config.benchmark.get("worker_start") != TEMPLATE:
        return
    if "Slurm" in str(config.hydra.launcher.get("_target_", "")):
        no_template(sweep_dir, "SLURM tasks run on other machines than the sweep's template")
        return
    unsupported = fork_supported()
    if unsupported:
        no_template(sweep_dir, unsupported)
        return
    try:
        _TEMPLATES.append(TemplateProcess.start(sweep_dir=sweep_dir, env=worker_env(None), cwd=PROJECT_ROOT))
    except OSError as err:  # no template is no reason to stop the sweep: its jobs spawn, saying why
        no_template(sweep_dir, f"the sweep's template could not start ({type(err).__name__}: {err})")


def stop_template() -> None:
    """End the sweep's template (and any worker it still holds): at the sweep's end or interruption.
    A failure is one line: the sweep's runs are closed all the same."""
    while _TEMPLATES:
        template = _TEMPLATES.pop()
        try:
            template.stop()
        except Exception as err:
            print(
                f"sweep warning: could not stop the sweep's template (pid {template.proc.pid}): {err}",
                flush=True,
            )


def browse_url(
    tracker: Tracker,
    sweep: SweepContext,
    label: str,
    objective: Objective,
    runs: list[RunRecord] | None = None,
) -> str:
    """The URL of the sweep's saved view, ranked by its objective (the summary's at the end; the planned
    jobs' at the start); the plain runs table when MLflow would not take the view (the sweep goes on
    either way)."""
    try:
        return publish_sweep_view(
            tracker, sweep_id=sweep.sweep_id, label=label, objective=objective, runs=runs
        )
    except Exception as exc:
        print(f"mlflow warning: could not save the sweep's view ({type(exc).__name__}: {exc})", flush=True)
        return tracker.runs_url()


def start_sweep(config: DictConfig) -> SweepContext:
    """Check that the sweep can start (its folder, the store, a resumed sweep's earlier jobs), take
    the driver's lease, open or reopen the parent run, and write sweep.json for the jobs."""
    check_planned_jobs(config)
    mlflow = _mlflow_settings(config)
    sweep_dir = writable_dir("hydra.sweep.dir", config.hydra.sweep.dir)
    tracker = Tracker.from_config(mlflow)
    sweep_cfg = config.sweep
    sweep_id = sweep_cfg.id or new_sweep_id()
    parent = tracker.sweep_parent(sweep_id) if sweep_cfg.id else None
    if sweep_cfg.resume and parent is None:
        raise SweepStopped(
            f"sweep.resume=true: no sweep with sweep.id={sweep_cfg.id!r} in experiment {mlflow.experiment!r}; set sweep.id to the id of an earlier sweep"
        )
    if parent is not None and not sweep_cfg.resume:
        raise SweepStopped(
            f"sweep.id={sweep_id!r} already exists in experiment {mlflow.experiment!r}: add sweep.resume=true to continue it, or pick a new id"
        )
    dirs = _sweep_dirs(parent, sweep_dir)
    if parent is not None:
        _refuse_while_running(sweep_id, dirs)
    try:
        _DRIVER_LEASE.append(lease.hold(sweep_dir))
    except lease.Busy as busy:
        raise SweepStopped(
            f"sweep error: hydra.sweep.dir: {busy} (two sweeps started in the same second share the default "
            "folder); set hydra.sweep.dir to another folder, or wait"
        ) from busy
    _refuse_reused_folder(sweep_dir, sweep_id)
    _warn_sqlite_on_slurm(config, mlflow)
    started_at = time.time()
    if parent is None:
        tags = _parent_tags(config, sweep_id, dirs)
        parent_id, prior_wall_s = tracker.start_run(f"sweep {_label(config, sweep_id)}", tags), 0.0
    else:
        parent_id, prior_wall_s = parent.run_id, _wall_so_far(tracker, parent)
        tracker.reopen(parent_id)
        tracker.set_tags(parent_id, {"resumed_in": str(sweep_dir), "sweep_dirs": json.dumps(dirs)})
    sweep = SweepContext(
        sweep_id=sweep_id,
        parent_run_id=parent_id,
        sweep_dir=str(sweep_dir),
        tracking_uri=mlflow.tracking_uri,
        experiment=mlflow.experiment,
        total_jobs=count_jobs(config.hydra),
        resume=bool(sweep_cfg.resume),
        name=sweep_cfg.name,
        started_at=started_at,
        prior_wall_s=prior_wall_s,
        axes=swept_keys(config.hydra),
        objective=sweep_cfg.objective,
        min_effect_pct=sweep_cfg.min_effect_pct,
        max_interval_pct=sweep_cfg.max_interval_pct,
    )
    try:
        with private_files():  # the tracking URI, with its password if it has one
            sweep.save()
    except OSError as err:
        tracker.close_run(
            parent_id, FAILED, error_type="SweepFailed", message=f"could not write sweep.json: {err}"
        )
        raise SweepStopped(
            f"config error: hydra.sweep.dir={str(sweep_dir)!r}: {err}", EXIT_BAD_INPUT
        ) from err
    print(
        f"sweep {sweep_id}: {sweep.total_jobs or '?'} jobs, parent run {parent_id}, output {sweep_dir}",
        flush=True,
    )
    label = parent.name if parent is not None else f"sweep {_label(config, sweep_id)}"
    print(f"browse: {browse_url(tracker, sweep, label, planned_objective(config))}", flush=True)
    return sweep


def writable_dir(key: str, path: Any) -> Path:
    """The folder at `path`, made if needed, after a file was written there; else a one-line refusal
    naming the key (exit 2), before anything starts."""
    folder = Path(str(path)).resolve()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
    except OSError as err:
        raise SweepStopped(
            f"config error: {key}={str(path)!r} is not writable ({err.strerror or err}): pick a folder this user can write",
            EXIT_BAD_INPUT,
        ) from err
    return folder


def _sweep_dirs(parent: RunRecord | None, sweep_dir: Path) -> list[str]:
    """Every folder the sweep has run in (its first and each resumption's), this one last."""
    dirs: list[str] = []
    if parent is not None:
        tags = parent.tags
        dirs = json.loads(tags["sweep_dirs"]) if "sweep_dirs" in tags else []
        dirs = dirs or [d for d in (tags.get("sweep_dir"), tags.get("resumed_in")) if d]
    return [d for d in dirs if d != str(sweep_dir)] + [str(sweep_dir)]


def _refuse_while_running(sweep_id: str, dirs: list[str]) -> None:
    """Resuming while the earlier driver or its jobs still run would run configurations twice."""
    working, stop = lease.still_working([Path(d) for d in dirs])
    if working:
        more = f" (and {len(working) - 1} more)" if len(working) > 1 else ""
        raise SweepStopped(
            f"sweep error: sweep {sweep_id} is still running: {working[0]}{more}; wait for it to end, or stop "
            f"it (`{stop}`), then resume"
        )


def _refuse_reused_folder(sweep_dir: Path, sweep_id: str) -> None:
    """A sweep folder used before keeps what is not in MLflow yet: job results whose upload failed,
    an earlier sweep whose end never happened (its runs left for `--sync` to close). Only a resumption
    of that same sweep, once its results are in MLflow, may run there."""
    kept = unsynced_results(sweep_dir)
    if kept:
        raise SweepStopped(
            f"config error: {refuse_overwrite('hydra.sweep.dir', sweep_dir, kept)}", EXIT_BAD_INPUT
        )
    try:
        earlier = SweepContext.load(sweep_dir)
    except (OSError, ValueError, TypeError):
        earlier = None
    if earlier is not None and earlier.sweep_id != sweep_id and _still_open(earlier):
        raise SweepStopped(
            f"config error: hydra.sweep.dir={str(sweep_dir)!r} holds sweep {earlier.sweep_id}, whose parent run is still RUNNING: "
            f"finish it first (`python -m pipeline.report --sync {sweep_dir}`), resume it (sweep.id={earlier.sweep_id} "
            "sweep.resume=true), or pick another folder",
            EXIT_BAD_INPUT,
        )


def _still_open(sweep: SweepContext) -> bool:
    """Whether a sweep's end never happened: its parent run still RUNNING in its store (or the store
    cannot say: then it may be)."""
    if sweep.finished:
        return False
    try:
        parent = Tracker(sweep.tracking_uri, sweep.experiment).get_run(sweep.parent_run_id)
    except Exception:
        return True
    return parent is not None and parent.status == RUNNING


def _wall_so_far(tracker: Tracker, parent: RunRecord) -> float:
    """The wall time of a sweep's earlier sessions (logged when each ended), not the idle gaps; for a
    session whose driver was killed (nothing logged, the parent RUNNING) up to its last job's end."""
    if "sweep/wall_s" in parent.metrics:
        return parent.metrics["sweep/wall_s"]
    if parent.end_time_ms:
        return (parent.end_time_ms - parent.start_time_ms) / 1000
    ends = [r.end_time_ms for r in tracker.sweep_children(str(parent.tags.get("sweep_id"))) if r.end_time_ms]
    return max(0.0, (max(ends) - parent.start_time_ms) / 1000) if ends else 0.0


def _label(config: DictConfig, sweep_id: str) -> str:
    """The sweep's name, or its axes (`mode=eager,default precision=amp,fp32`), or its id."""
    axes = swept(config.hydra)
    short = " ".join(a.split("=", 1)[0].rsplit(".", 1)[-1] + "=" + a.split("=", 1)[1] for a in axes)
    return config.sweep.name or short or sweep_id


def _parent_tags(config: DictConfig, sweep_id: str, dirs: list[str]) -> dict[str, str]:
    tags = {
        "sweep_id": sweep_id,
        "sweep_parent": "true",
        "sweep_dir": dirs[-1],
        "sweep_dirs": json.dumps(dirs),
        "sweep_axes": " ".join(swept(config.hydra)),
        "command": command_line(),
        "min_effect_pct": str(config.sweep.min_effect_pct),
        "max_interval_pct": str(config.sweep.max_interval_pct),
    }
    if config.sweep.objective:
        tags["sweep_objective"] = str(config.sweep.objective)
    if config.sweep.name:
        tags["sweep_name"] = config.sweep.name
    return tags


def _warn_sqlite_on_slurm(config: DictConfig, mlflow: MlflowConfig) -> None:
    if "SlurmLauncher" in str(config.hydra.launcher.get("_target_", "")) and mlflow.tracking_uri.startswith(
        "sqlite:"
    ):
        print(
            f"warning: SLURM jobs log to {mlflow.tracking_uri}: a sqlite file only works when every job runs on this machine; "
            "on a cluster start `make mlflow-server` and set mlflow.tracking_uri=http://<host>:<port>",
            flush=True,
        )


def resume_later() -> str:
    """`; ... resume it ...` for a sweep that stopped before its jobs ran ('' outside a sweep)."""
    if ACTIVE_SWEEP is None:
        return ""
    return f"; once {ACTIVE_SWEEP.sweep_dir} takes files again, {resume_hint(ACTIVE_SWEEP)}"


def close_interrupted_sweep(reason: str, status: str = KILLED) -> None:
    """Mark the parent run, and any child still RUNNING, as KILLED (Ctrl-C or SIGTERM of the sweep),
    or the parent FAILED when the sweep could not go on (its job array refused)."""
    stop_template()
    if ACTIVE_SWEEP is None:
        return
    close_interrupted(ACTIVE_SWEEP, reason, status=status)
