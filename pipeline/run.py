"""Entry point: `python -m pipeline.run [-m] [overrides]`. Hydra composes the config (conf/); each job
goes to its parent (:mod:`pipeline.job.parent`), which spawns a worker; no CUDA here. Exit code: 0 every
job finished, 1 any failed (or could not be recorded), 2 bad input, 130 interrupted.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from pipeline.config.compose import describe_compose_error, yaml_error
from pipeline.config.errors import ConfigError
from pipeline.config.schema import register_configs
from pipeline.display import first_few
from pipeline.job.parent import JobParent, JobPlace, record_bad_job, report_config_error
from pipeline.job.preflight import validate
from pipeline.job.result import one_line
from pipeline.job.signals import SchedulerSignals, exiting_after_interrupt, stop_once
from pipeline.jobdir import JobDir
from pipeline.redaction import redact_log_records, redact_text
from pipeline.scenarios import CONF
from pipeline.status import (
    BAD_INPUT,
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    FAILED,
    FINISHED,
    SKIPPED,
)
from pipeline.sweep import lease
from pipeline.sweep.callbacks import SWEEP_FAILURES, after_interrupt, close_interrupted_sweep, resume_later
from pipeline.sweep.state import SweepStopped
from pipeline.sweep_context import SweepContext

OUTCOMES: list[str] = []  # one per job run by this process


def run_job(cfg: DictConfig) -> str:
    """One job, start to finish. Returns its outcome; never raises for a failed job."""
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    sweep = SweepContext.load(hc.sweep.dir) if multirun else None
    place = JobPlace(
        job_dir=Path(hc.runtime.output_dir), sweep=sweep, job_num=hc.job.num if multirun else None
    )
    signals = SchedulerSignals()
    with signals.installed():
        try:
            config = validate(cfg)
        except ConfigError as err:
            report_config_error(err)
            if sweep is not None:
                record_bad_job(sweep, err, list(hc.overrides.task), place)
            return BAD_INPUT
        try:
            with lease.hold(place.job_dir):  # a resumed sweep checks that no job of it still runs
                return JobParent(config, place, signals).run()
        except lease.Busy as busy:
            print(f"job error: {busy}", file=sys.stderr, flush=True)
            return FAILED


@hydra.main(config_path=str(CONF), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> str | float:
    outcome = run_job(cfg)
    OUTCOMES.append(outcome)
    if cfg.sweep.objective:  # a search (sweep=compile_search) minimizes this metric
        return objective_value(outcome, cfg.sweep.objective)
    return outcome


def objective_value(outcome: str, metric: str) -> float | str:
    """The job's value of `metric`; a job that did not finish returns its outcome (`FAILED`, ...), which
    the Optuna sweeper records as a failed trial (NaN would crash optuna's `tell`)."""
    path = JobDir(Path(HydraConfig.get().runtime.output_dir)).result
    if outcome != FINISHED or not path.exists():
        return outcome
    value = json.loads(path.read_text())["metrics"].get(metric)
    return float(value) if value is not None else f"{metric} was not measured"


def exit_code() -> int:
    if OUTCOMES and all(o == BAD_INPUT for o in OUTCOMES):
        return EXIT_BAD_INPUT
    if any(o not in (FINISHED, SKIPPED) for o in OUTCOMES) or SWEEP_FAILURES:
        return EXIT_FAILED
    return EXIT_OK


def main() -> None:
    redact_log_records()  # Hydra's launch lines (`#0 : <overrides>`) name the jobs' values
    register_configs()
    stop_once()  # Ctrl-C and SIGTERM: the first stops, later ones wait for the stopping to complete
    user_wants_traceback = os.environ.get("HYDRA_FULL_ERROR") == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let composition errors reach us, to print them in one line
    try:
        _hydra_main()
    except SweepStopped as stop:  # refused before anything started, or the launcher could not go on
        close_interrupted_sweep(stop.line, status=FAILED)
        print(stop.line, file=sys.stderr, flush=True)
        sys.exit(stop.code)
    except KeyboardInterrupt as interrupt:
        reason = f"interrupted by {interrupt.args[0] if interrupt.args else 'SIGINT'}"
        close_interrupted_sweep(reason)
        print(f"{reason}{after_interrupt()}", file=sys.stderr, flush=True)
        exiting_after_interrupt()
        sys.exit(EXIT_INTERRUPTED)
    except Exception as err:
        composing = isinstance(err, (HydraException, OmegaConfBaseException)) or yaml_error(err) is not None
        if isinstance(err, OSError) and not composing:  # Hydra could not write a job's folder
            line = f"sweep error: the sweep cannot go on: {type(err).__name__}: {err}{resume_later()}"
            close_interrupted_sweep(line, status=FAILED)
            print(redact_text(line), file=sys.stderr, flush=True)
            if user_wants_traceback:
                raise
            sys.exit(EXIT_FAILED)
        if not composing or user_wants_traceback:  # a bug, a launcher failure: no run left RUNNING
            close_interrupted_sweep(
                f"sweep failed: {type(err).__name__}: {one_line(str(err))}", status=FAILED
            )
            raise
        message = f"config error: {redact_text(describe_compose_error(err))}"
        close_interrupted_sweep(message, status=FAILED)
        print(message, file=sys.stderr, flush=True)
        sys.exit(EXIT_BAD_INPUT)
    code = exit_code()
    if line := exit_line(code):
        print(line, flush=True)
    sys.exit(code)


def exit_line(code: int) -> str:
    """After a sweep that exits 1 because jobs failed: which, in one line."""
    failed = [f for f in SWEEP_FAILURES if not f.startswith("sweep error")]
    if code != EXIT_FAILED or not failed:
        return ""
    return f"exit 1: {len(failed)} job(s) of the sweep did not finish ({first_few(failed)}); the summary above says why"


if __name__ == "__main__":
    main()
