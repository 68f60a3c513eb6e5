"""Hydra callbacks: the sweep's parent run at multirun start, its summary at multirun end, and a single
run's checks before Hydra makes its folder. Launchers pickle callbacks, so nothing here holds a client;
Hydra turns other exceptions in a callback into warnings, so every refusal is a :class:`SweepStopped`."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import shlex
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ValueType
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from pipeline.config.checks import raise_first
from pipeline.config.compose import config_error_lines, describe_compose_error, printable
from pipeline.config.errors import ConfigError
from pipeline.config.schema import Config, MlflowConfig
from pipeline.display import unit_word
from pipeline.identity import sweep_label
from pipeline.job.gpu_pool import pool_indices
from pipeline.job.preflight import checked, float8_errors, host_errors, store_errors, validate, visible_gpus
from pipeline.job.result import refuse_overwrite, unsynced_results
from pipeline.job.supervisor import PROJECT_ROOT, worker_env
from pipeline.job.worker_start import (
    TEMPLATE,
    TemplateProcess,
    fork_supported,
    no_template,
    shared_template,
    template_file,
)
from pipeline.measure.objective import choose
from pipeline.provenance import command_args, command_line, sync_command
from pipeline.redaction import make_private, private_files, redact_text
from pipeline.status import EXIT_BAD_INPUT, FAILED, KILLED, RUNNING
from pipeline.sweep import lease
from pipeline.sweep.finish import abandon, close_interrupted, finish_sweep, resume_hint
from pipeline.sweep.render import print_answer
from pipeline.sweep.state import (
    SweepStopped,
    axes_from_tag,
    axes_tag,
    axis_keys,
    changed_work,
    checked_job,
    composed_job,
    hydra_value,
    planned_jobs,
    planned_work,
    resume_command,
    sweeps,
    swept,
    swept_keys,
    task_config,
    the_work,
)
from pipeline.sweep.view import publish_sweep_view
from pipeline.sweep_context import SweepContext, new_sweep_id
from pipeline.tracking import RunRecord, Tracker, TrackingUnavailable
from pipeline.tracking.queries import filter_equals

# The sweep this process started (so an interrupted sweep can close its parent run).
ACTIVE_SWEEP: SweepContext | None = None
SWEEP_FAILURES: list[str] = []
_DRIVER_LEASE: list[IO[str]] = []  # held open while this process drives its sweep
_TEMPLATES: list[TemplateProcess] = []  # the sweep's template process on this machine, while it runs
_SHARED: list[Path] = []  # the sweep folder whose jobs fork from a running template the environment names


class SweepCallback(Callback):
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """A single run (no -m): sweep-only keys, a named sweep, bad input and a run dir that cannot be
        written are refused in one line before Hydra makes the folder; a GPU-sized job on the CPU is said."""
        quiet_framework_logs(verbose=is_verbose(config))
        for key in ("id", "resume"):
            if config.sweep.get(key):
                raise _bad_input(
                    f"sweep.{key}={config.sweep[key]!r} is not allowed: it only means something in a sweep (add -m)",
                )
        axes = swept(config.hydra)
        if config.sweep.get("name") or axes:
            named = f"sweep={config.sweep.name}" if config.sweep.get("name") else "hydra.sweeper.params"
            raise _bad_input(
                f"{named} is a sweep ({', '.join(axis_keys(axes)) or 'its jobs'} vary): "
                f"add -m to run it (`{multirun_command()}`)",
            )
        try:  # bad input makes no run folder
            job = validate(task_config(config))
        except ConfigError as err:
            raise SweepStopped(config_error_lines(err.errors), EXIT_BAD_INPUT) from err
        if note := cpu_note(job):
            print(note, flush=True)
        _refuse_unsynced("hydra.run.dir", Path(str(config.hydra.run.dir)).resolve())
        writable_dir("hydra.run.dir", config.hydra.run.dir)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Create the experiment (and sqlite schema) once and the parent run, before any job starts."""
        global ACTIVE_SWEEP
        search = "optuna" in str(config.hydra.sweeper.get("_target_", "")).lower()
        quiet_framework_logs(verbose=is_verbose(config), optuna=search)
        try:
            refuse_what_the_launcher_cannot_do(config)
            leave_out_what_cannot_run_here(config)
            ACTIVE_SWEEP = start_sweep(config)
            if note := sweep_cpu_note(config):
                print(note, flush=True)
            start_template(config, Path(ACTIVE_SWEEP.sweep_dir))
        except TrackingUnavailable as err:
            raise SweepStopped(f"mlflow error: {err}") from err
        except Exception as err:  # a store that answers with errors, a bug: never a sweep without parent
            raise SweepStopped(
                f"sweep error: could not start the sweep: {type(err).__name__}: {err}"
            ) from err

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """The configs Hydra saved unredacted (`.hydra/`, the sweep's `multirun.yaml`): this user's only."""
        output = Path(str(config.hydra.runtime.output_dir))
        files = list((output / str(config.hydra.output_subdir or ".hydra")).glob("*.yaml"))
        if config.hydra.mode == RunMode.MULTIRUN:
            files.append(Path(str(config.hydra.sweep.dir)) / "multirun.yaml")
        make_private(files)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Summarize the sweep from MLflow onto its parent run and close it; a failure (the summary
        cannot be written, the store is gone) is one line and exit code 1."""
        stop_template()
        sweep = ACTIVE_SWEEP
        if sweep is None:
            return
        try:
            end = finish_sweep(sweep)
        except Exception as err:
            _sweep_failed(abandon(sweep, err))
            return
        summary = end.summary
        SWEEP_FAILURES.extend(r.name for r in summary.not_finished)
        said = f"sweep error: sweep {sweep.sweep_id} is"
        closed = f"parent run {sweep.parent_run_id} closed FAILED"
        if end.incomplete:
            _sweep_failed(f"{said} incomplete: {end.incomplete}; {closed}; {resume_hint(sweep)}")
        elif end.pending:
            _sweep_failed(f"{said} not finished: {end.pending}; {closed} until then")
        tracker = Tracker(sweep.tracking_uri, sweep.experiment)
        parent = tracker.get_run(sweep.parent_run_id)
        url = browse_url(
            tracker,
            sweep.sweep_id,
            label=parent.name if parent else f"sweep {sweep.sweep_id}",
            objective=summary.objective,
            runs=tracker.sweep_children(sweep.sweep_id),
            summary=summary,
        )
        print(f"browse: {url}", flush=True)
        print_answer(summary)  # the terminal ends with the answer


def _sweep_failed(line: str) -> None:
    """Say on stderr why the sweep failed; the exit code counts it."""
    print(line, file=sys.stderr, flush=True)
    SWEEP_FAILURES.append(line)


def multirun_command() -> str:
    """This process's command with -m, shell-quoted (a sweep started without it)."""
    words = command_args()
    entry = 3 if words[:3] == ["python", "-m", "pipeline.run"] else 1
    return shlex.join([*words[:entry], "-m", *words[entry:]])


def _bad_input(line: str) -> SweepStopped:
    """Bad input, refused in one line before anything starts (exit code 2)."""
    return SweepStopped(f"config error: {line}", EXIT_BAD_INPUT)


def check_planned_jobs(config: DictConfig) -> list[str]:
    """Every planned job composed as its launcher will compose it and checked (with this host's limits
    where it runs here): one that does not compose, or a sweep with no valid job, stops the sweep (exit
    2); some bad jobs run as FAILED beside the others. Returns each job's compile mode (for the ETA)."""
    jobs = planned_jobs(config.hydra)
    if not jobs or not GlobalHydra.instance().is_initialized():
        return []
    here = not uses_slurm(config)
    errors: list[ConfigError] = []
    runnable = False
    modes = []
    for overrides in jobs:
        try:
            composed = composed_job(config, overrides)
        except Exception as err:  # the job's config does not compose
            raise _bad_input(describe_compose_error(err)) from err
        modes.append(str(OmegaConf.select(composed, "compile.mode", default="")))
        if runnable:
            continue  # a job that can run: the sweep starts, its bad jobs fail alone
        try:
            job = checked(task_config(composed))
            if here:
                raise_first(host_errors(job))
            runnable = True
        except ConfigError as err:
            errors += [e for e in err.errors if str(e) not in {str(seen) for seen in errors}]
    if runnable:
        return modes
    raise SweepStopped(config_error_lines(errors), EXIT_BAD_INPUT)


def start_template(config: DictConfig, sweep_dir: Path) -> None:
    """The sweep's template process on this machine (benchmark.worker_start=template), which jobs fork
    their workers from; where it cannot run, the reason every job gives when it spawns instead."""
    if config.benchmark.get("worker_start") != TEMPLATE:
        return
    if uses_slurm(config):
        no_template(sweep_dir, "SLURM tasks run on other machines than the sweep's template")
        return
    if unsupported := fork_supported():
        no_template(sweep_dir, unsupported)
        return
    env = worker_env(None)
    shared = shared_template(env)
    if shared is not None:  # a running template the environment names (the test suite's): none of its own
        shared.save(sweep_dir)
        _SHARED.append(sweep_dir)
        return
    try:
        _TEMPLATES.append(TemplateProcess.start(sweep_dir=sweep_dir, env=env, cwd=PROJECT_ROOT))
    except OSError as err:  # no template is no reason to stop the sweep: its jobs spawn, saying why
        no_template(sweep_dir, f"the sweep's template could not start ({type(err).__name__}: {err})")


def stop_template() -> None:
    """End the sweep's template (and any worker it still holds) at the sweep's end or interruption; a
    failure is one line: the sweep's runs are closed all the same."""
    while _SHARED:  # not this sweep's to stop: only its pointer goes
        with contextlib.suppress(OSError):
            template_file(_SHARED.pop(), socket.gethostname()).unlink(missing_ok=True)
    while _TEMPLATES:
        template = _TEMPLATES.pop()
        try:
            template.stop()
        except Exception as err:
            print(
                f"sweep warning: could not stop the sweep's template (pid {template.proc.pid}): {err}",
                flush=True,
            )


def browse_url(tracker: Tracker, sweep_id: str, **view: Any) -> str:
    """The URL of the sweep's saved view (publish_sweep_view's keywords: ranked by the planned jobs'
    objective at the start, the summary's at the end); the plain runs table where MLflow would not
    take the view (the sweep goes on either way)."""
    try:
        return publish_sweep_view(tracker, sweep_id=sweep_id, **view)
    except Exception as exc:
        print(f"mlflow warning: could not save the sweep's view ({type(exc).__name__}: {exc})", flush=True)
        return tracker.runs_url()


def _sweep_id_errors(sweep_id: str | None) -> list[ConfigError]:
    """sweep.id, refused where MLflow's search cannot match it: the view, `report --sweep` and a resume
    find the sweep by it."""
    if sweep_id is None or filter_equals("tags.sweep_id", sweep_id) is not None:
        return []
    return [ConfigError("sweep.id", sweep_id, "an id without a backslash, and not with both ' and \"")]


def start_sweep(config: DictConfig) -> SweepContext:
    """Check that the sweep can start, take the driver's lease, open (or reopen) the parent run and
    write sweep.json for the jobs."""
    job_modes = check_planned_jobs(config)
    mlflow = MlflowConfig(**OmegaConf.to_container(config.mlflow, resolve=True))  # type: ignore[arg-type]
    try:  # a search plans no jobs: its store is checked here, before the parent run (as each job's is)
        raise_first([*mlflow.check("mlflow"), *store_errors(mlflow), *_sweep_id_errors(config.sweep.id)])
    except ConfigError as err:
        raise SweepStopped(config_error_lines(err.errors), EXIT_BAD_INPUT) from err
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
    dirs = [str(sweep_dir)]
    if parent is not None:
        _refuse_resuming_another_sweep(config, parent, sweep_id)
        dirs = _sweep_dirs(parent, sweep_dir)
        _refuse_while_running(sweep_id, dirs)
        _refuse_other_work(config, parent, sweep_id)
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
        label = f"sweep {sweep_label(config, swept(config.hydra), sweep_id)}"
        parent_id, prior_wall_s = tracker.start_run(label, _parent_tags(config, sweep_id, dirs)), 0.0
    else:
        label = parent.name
        parent_id, prior_wall_s = parent.run_id, _wall_so_far(tracker, parent)
        tracker.reopen(parent_id)
        resumed = {"resumed_in": str(sweep_dir), "sweep_dirs": json.dumps(dirs), "command": command_line()}
        tracker.set_tags(parent_id, resumed)  # the command that runs it now (the same work: checked)
    sweep = SweepContext(
        sweep_id=sweep_id,
        parent_run_id=parent_id,
        sweep_dir=str(sweep_dir),
        command=command_line(),
        tracking_uri=mlflow.tracking_uri,
        experiment=mlflow.experiment,
        total_jobs=len(jobs) if (jobs := planned_jobs(config.hydra)) is not None else None,
        resume=bool(sweep_cfg.resume),
        name=sweep_cfg.name,
        started_at=started_at,
        prior_wall_s=prior_wall_s,
        axes=swept_keys(config.hydra),
        objective=sweep_cfg.objective,
        min_effect_pct=sweep_cfg.min_effect_pct,
        kind=str(sweep_cfg.kind),
        job_modes=job_modes,
    )
    try:
        with private_files():  # the tracking URI, with its password if it has one
            sweep.save()
    except OSError as err:
        tracker.close_run(
            parent_id, FAILED, error_type="SweepFailed", message=f"could not write sweep.json: {err}"
        )
        raise _bad_input(f"hydra.sweep.dir={str(sweep_dir)!r}: {err}") from err
    print(
        f"sweep {sweep_id}: {sweep.total_jobs or '?'} jobs, parent run {parent_id}, output {sweep_dir}",
        flush=True,
    )
    works = [w for w in planned_work(config) if w is not None]
    unit = unit_word(works[0].unit) if works and len({w.unit for w in works}) == 1 else None
    url = browse_url(
        tracker, sweep_id, label=label, objective=choose(works, config.sweep.get("objective")), unit=unit
    )
    print(f"browse: {url}", flush=True)
    return sweep


def writable_dir(key: str, path: Any) -> Path:
    """The folder at `path`, made if needed and shown writable; else a one-line refusal naming the key."""
    folder = Path(str(path)).resolve()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
    except OSError as err:
        raise _bad_input(
            f"{key}={str(path)!r} is not writable ({err.strerror or err}): pick a folder this user can write",
        ) from err
    return folder


def _sweep_dirs(parent: RunRecord, sweep_dir: Path) -> list[str]:
    """Every folder the sweep has run in (its first and each resumption's), this one last."""
    tags = parent.tags
    dirs = json.loads(tags["sweep_dirs"]) if "sweep_dirs" in tags else []
    dirs = dirs or [d for d in (tags.get("sweep_dir"), tags.get("resumed_in")) if d]
    return [d for d in dirs if d != str(sweep_dir)] + [str(sweep_dir)]


def _refuse_resuming_another_sweep(config: DictConfig, parent: RunRecord, sweep_id: str) -> None:
    """A resumption that leaves out keys the sweep varied (or its named sweep) would add jobs of the
    defaults instead of finishing it: refused, giving the sweep's own command. Values may change."""
    before = axis_keys(axes_from_tag(parent.tags.get("sweep_axes", "")))
    name = parent.tags.get("sweep_name")
    missing = [k for k in before if k not in swept_keys(config.hydra)]
    if not missing and (not name or config.sweep.get("name") == name):
        return
    command = resume_command(parent.tags.get("command", ""), sweep_id)
    varied = f"sweep={name}" if name and not missing else ", ".join(missing)
    raise _bad_input(
        f"sweep.resume=true runs the jobs this command plans, and sweep {sweep_id} varied {varied}, "
        "which this command does not: resume it with its own command"
        + (f": `{command}`" if command else ", adding sweep.id and sweep.resume=true"),
    )


def task_overrides(config: DictConfig) -> list[str]:
    """The sweep's command-line overrides, secret values masked (as its parent's tags hold them)."""
    return [redact_text(str(o)) for o in config.hydra.overrides.task]


def _refuse_other_work(config: DictConfig, parent: RunRecord, sweep_id: str) -> None:
    """A resumption whose overrides change the jobs' work (another trainer.steps, other modes) would pool
    different work into one verdict: refused, naming each differing key with both values. A parent
    without `sweep_overrides` is not checked."""
    try:
        before = the_work(json.loads(parent.tags["sweep_overrides"]))
    except (KeyError, ValueError, TypeError):
        return
    changed = changed_work(before, the_work(task_overrides(config)))
    if not changed:
        return
    command = resume_command(parent.tags.get("command", ""), sweep_id)
    own = f"resume it with its own command (`{command}`)" if command else "resume it with its own command"
    raise _bad_input(
        f"sweep.resume=true runs the jobs sweep {sweep_id} planned, as planned, and this command "
        f"changes their work: {'; '.join(changed)}: {own}, or run this command as a new sweep (leave out "
        "sweep.resume=true and give another sweep.id, or none)",
    )


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
    """A sweep folder whose results are not in MLflow yet, or whose earlier sweep never ended, takes
    only a resumption of that same sweep, once its results are in MLflow."""
    _refuse_unsynced("hydra.sweep.dir", sweep_dir)
    try:
        earlier = SweepContext.load(sweep_dir)
    except (OSError, ValueError, TypeError):
        earlier = None
    if earlier is not None and earlier.sweep_id != sweep_id and _still_open(earlier):
        again = resume_command(earlier.command, earlier.sweep_id)
        resume = f"`{again}`" if again else f"sweep.id={hydra_value(earlier.sweep_id)} sweep.resume=true"
        raise _bad_input(
            f"hydra.sweep.dir={str(sweep_dir)!r} holds sweep {earlier.sweep_id}, whose parent run is still RUNNING: "
            f"finish it first (`{sync_command([sweep_dir])}`), resume it ({resume}), or pick another folder",
        )


def _refuse_unsynced(key: str, folder: Path) -> None:
    """A reused folder that keeps job results MLflow lacks is refused (they would be overwritten)."""
    if kept := unsynced_results(folder):
        raise _bad_input(refuse_overwrite(key, folder, kept))


def _still_open(sweep: SweepContext) -> bool:
    """Whether a sweep's parent run is still RUNNING in its store (or the store cannot say)."""
    if sweep.finished:
        return False
    try:
        parent = Tracker(sweep.tracking_uri, sweep.experiment).get_run(sweep.parent_run_id)
    except Exception:
        return True
    return parent is not None and parent.status == RUNNING


def _wall_so_far(tracker: Tracker, parent: RunRecord) -> float:
    """The wall time of a sweep's earlier sessions, not the gaps between; for a killed driver's session
    (nothing logged), up to its last job's end."""
    if "sweep/wall_s" in parent.metrics:
        return parent.metrics["sweep/wall_s"]
    if parent.end_time_ms:
        return (parent.end_time_ms - parent.start_time_ms) / 1000
    ends = [r.end_time_ms for r in tracker.sweep_children(str(parent.tags.get("sweep_id"))) if r.end_time_ms]
    return max(0.0, (max(ends) - parent.start_time_ms) / 1000) if ends else 0.0


def _parent_tags(config: DictConfig, sweep_id: str, dirs: list[str]) -> dict[str, str]:
    named = {"sweep_objective": config.sweep.objective, "sweep_name": config.sweep.name}  # where set
    return {
        "sweep_id": sweep_id,
        "sweep_parent": "true",
        "sweep_dir": dirs[-1],
        "sweep_dirs": json.dumps(dirs),
        "sweep_axes": axes_tag(config.hydra),
        "command": command_line(),
        "sweep_overrides": json.dumps(task_overrides(config)),
        "min_effect_pct": str(config.sweep.min_effect_pct),
        "sweep_kind": str(config.sweep.kind),
        **{tag: str(value) for tag, value in named.items() if value},
    }


def _warn_sqlite_on_slurm(config: DictConfig, mlflow: MlflowConfig) -> None:
    if uses_slurm(config) and mlflow.tracking_uri.startswith("sqlite:"):
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
    """Close the parent run (KILLED on Ctrl-C or SIGTERM, FAILED when the sweep could not go on) and
    any child still RUNNING."""
    stop_template()
    if ACTIVE_SWEEP is not None:
        close_interrupted(ACTIVE_SWEEP, reason, status=status)


def after_interrupt() -> str:
    """`; ...` for an interrupted sweep (which writes no summary): how the ended jobs get theirs, and how
    the rest run ('' outside a sweep)."""
    if ACTIVE_SWEEP is None:
        return ""
    return (
        f"; `{sync_command([ACTIVE_SWEEP.sweep_dir])}` writes the summary of the jobs "
        f"that ended; {resume_hint(ACTIVE_SWEEP)}"
    )


# ----------------------------------------------------------------------------- before anything runs
def is_verbose(config: DictConfig) -> bool:
    """`verbose=true`: the libraries' and Hydra's own lines on the terminal too (absent: false)."""
    return bool(OmegaConf.select(config, "verbose", default=False))


# Loggers whose INFO lines repeat the project's own (`Launching 4 jobs locally`, the search's set-up);
# the search's best trial stays.
_REPEATING_LOGGERS = (
    "hydra._internal.core_plugins.basic_launcher",
    "hydra_plugins.hydra_submitit_launcher.submitit_launcher",
    "hydra_plugins.hydra_optuna_sweeper._impl",
)
_KEPT = ("Best parameters", "Best value", "Number of Pareto solutions", "    Values:")
_NOT_A_NUMBER = re.compile(r"Failed experiment: Return value must be float-castable\. Got '(.*)'\.?$")


class _FrameworkLines(logging.Filter):
    """Hydra's lines that repeat the project's own, quiet unless `verbose`; a search's failed trial
    said as the project says it."""

    verbose = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        failed = _NOT_A_NUMBER.match(message)
        if failed:
            record.msg, record.args = (
                f"search: a trial ended {failed.group(1)}, with no objective value: recorded as a failed trial, "
                "the search goes on",
                None,
            )
            return True
        return self.verbose or record.levelno >= logging.WARNING or message.startswith(_KEPT)


_FRAMEWORK_LINES = _FrameworkLines()


def quiet_framework_logs(*, verbose: bool, optuna: bool = False) -> None:
    """Hydra's and Optuna's lines that repeat the project's own stay off the terminal unless `verbose`;
    Optuna's go through Hydra's handlers (no colour codes in a log file)."""
    _FRAMEWORK_LINES.verbose = verbose
    for name in _REPEATING_LOGGERS:
        logger = logging.getLogger(name)
        if _FRAMEWORK_LINES not in logger.filters:
            logger.addFilter(_FRAMEWORK_LINES)
    # alembic (imported with Optuna's storages) names each of its plugins at INFO on import
    logging.getLogger("alembic").setLevel(logging.NOTSET if verbose else logging.WARNING)
    if optuna:  # before Hydra's Optuna sweeper makes its study
        import optuna as library

        library.logging.disable_default_handler()
        library.logging.enable_propagation()
        library.logging.set_verbosity(library.logging.INFO if verbose else library.logging.WARNING)


# Input values per step from which a job on a CPU shows nothing for minutes: images (batch x C x H x W),
# token models (batch x sequence length; the tiny variants hold 256).
CPU_HEAVY_IMAGE_VALUES = 1_000_000
CPU_HEAVY_TOKENS = 2048


def cpu_note(job: Config) -> str:
    """One line before a GPU-sized job runs on the CPU: what it is, that it takes minutes, and the CPU
    preset; '' otherwise."""
    if job.device == "cuda" or (job.device == "auto" and visible_gpus()):
        return ""
    spec = job.model.input
    batch = round(job.scenario.resolved(job).samples_per_unit(job))  # the scenario's batch, not the trainer's
    if spec.kind == "image":
        heavy = batch * spec.channels * spec.height * spec.width >= CPU_HEAVY_IMAGE_VALUES
        what = f"batch {batch} of {spec.channels}x{spec.height}x{spec.width} images"
    else:
        heavy = batch * spec.seq_len >= CPU_HEAVY_TOKENS
        what = f"batch {batch} of {spec.seq_len} tokens"
    if not heavy:
        return ""
    where = "device=cpu" if job.device == "cpu" else "no CUDA GPU here"
    compiled = ", compiled" if job.compile.compiled else ""
    subject = f"model={job.model.id} ({what}, {job.trainer.steps} steps{compiled})"
    return (
        f"note: {where}, so {subject} runs on the CPU: minutes before a first step shows; "
        "experiment=cpu_smoke is the CPU-sized job (a 2-block ViT)"
    )


def sweep_cpu_note(config: DictConfig) -> str:
    """cpu_note of the sweep's first job (or a search's base config), where its jobs run here."""
    if uses_slurm(config):
        return ""
    jobs = planned_jobs(config.hydra)
    try:
        if jobs and GlobalHydra.instance().is_initialized():
            job = checked_job(config, jobs[0])
        else:  # a search's base config
            job = checked(task_config(config))
    except Exception:  # a bad first job: the sweep's own checks say why
        return ""
    note = cpu_note(job)
    if jobs and len(jobs) > 1:
        return note.replace("runs on the CPU", "and the sweep's other jobs run on the CPU")
    return note


def uses_local_gpus(config: DictConfig) -> bool:
    """Whether the sweep's launcher is hydra/launcher=local_gpus (jobs at once, sharing the GPU pool)."""
    return "LocalLauncher" in str(config.hydra.launcher.get("_target_", ""))


def uses_slurm(config: DictConfig) -> bool:
    return "Slurm" in str(config.hydra.launcher.get("_target_", ""))


def refuse_what_the_launcher_cannot_do(config: DictConfig) -> None:
    """Refused before the parent run opens (not the launcher's traceback): hydra/launcher=slurm where
    there is no sbatch; hydra/launcher=local_gpus where NVML finds no GPU for gpu_pool=all; and
    benchmark.overlap with a launcher that runs jobs one at a time (it would do nothing)."""
    if uses_slurm(config) and shutil.which("sbatch") is None:
        raise _bad_input(
            "hydra/launcher=slurm submits the jobs to SLURM, and there is no SLURM here (no sbatch "
            "on PATH): leave hydra/launcher out to run them on this machine, one at a time, or start a test "
            "cluster with `make slurm-up`",
        )
    # a pool that names its GPUs (pretend ones too, as the tests do) is taken as given
    if uses_local_gpus(config) and OmegaConf.select(config, "gpu_pool", default=None) in (None, "all"):
        try:
            found, why = len(pool_indices("all")), "no GPU"
        except Exception as err:
            found, why = 0, type(err).__name__
        if not found:
            raise _bad_input(
                f"hydra/launcher=local_gpus gives each job one of this machine's GPUs, and NVML finds none "
                f"here ({why}): leave it out to run the jobs one at a time, or name GPUs with gpu_pool=[0,1]",
            )
    if OmegaConf.select(config, "benchmark.overlap", default=False) is True and not uses_local_gpus(config):
        raise _bad_input(
            "benchmark.overlap=true compiles the next job while one measures, which needs jobs that "
            "run at once: add hydra/launcher=local_gpus (each GPU then takes benchmark.overlap_jobs jobs), or leave benchmark.overlap=false",
        )


def leave_out_what_cannot_run_here(config: DictConfig) -> None:
    """A search (Optuna) leaves out of its space the choices this host refuses (precision=fp8 on a CPU),
    one line each; a key none of whose choices can run here is refused. Bad values everywhere stay:
    their trials fail and are recorded."""
    search = "optuna" in str(config.hydra.sweeper.get("_target_", "")).lower()
    if not search or not GlobalHydra.instance().is_initialized():
        return
    parser = OverridesParser.create()
    task = [str(o) for o in config.hydra.overrides.task]
    fixed = [o for o in task if not sweeps(o, guess=False)]
    fixed_keys = {o.partition("=")[0] for o in fixed}  # the command line's one value replaces the space's
    params = config.hydra.sweeper.get("params") or {}
    space = {str(k): str(v) for k, v in params.items() if str(k) not in fixed_keys}
    space.update({o.partition("=")[0]: o.partition("=")[2] for o in task if sweeps(o, guess=False)})
    for key, value in space.items():
        (override,) = parser.parse_overrides([f"{key}={value}"])
        if override.value_type not in (ValueType.CHOICE_SWEEP, ValueType.SIMPLE_CHOICE_SWEEP):
            continue
        choices = [str(v) for v in override.sweep_string_iterator()]
        refused = {c: why for c in choices if (why := _refused_here(config, fixed, key, c))}
        if not refused:
            continue
        kept = [c for c in choices if c not in refused]
        if not kept:
            raise _bad_input(next(iter(refused.values())))
        for choice, why in refused.items():
            print(f"search: {key}={choice} left out of the search space: {why}", flush=True)
        _set_space(config, key, f"choice({', '.join(kept)})")


def _refused_here(config: DictConfig, fixed: list[str], key: str, choice: str) -> str:
    """Why `key=choice` cannot run on this host ('' where it can, or where it is bad everywhere)."""
    try:
        job = checked_job(config, [*fixed, f"{key}={choice}"])
    except Exception:  # bad everywhere (or not composable): the trial fails and is recorded
        return ""
    errors = host_errors(job) + (float8_errors(job) if job.precision.float8 else [])
    mine = [e for e in errors if e.key == key.lstrip("+~")]
    return printable(str(mine[0])) if mine else ""


def _set_space(config: DictConfig, key: str, value: str) -> None:
    """The search's space for `key` where the sweeper, made after multirun start, reads it."""
    with read_write(config.hydra), open_dict(config.hydra):
        task = list(config.hydra.overrides.task)
        for i, override in enumerate(task):
            if str(override).partition("=")[0] == key:
                task[i] = f"{key}={value}"
                config.hydra.overrides.task = task
                return
        config.hydra.sweeper.params[key] = value
