"""What the sweep knows of itself from Hydra: its axes (`swept`), its planned jobs (`planned_jobs`), and
`SweepStopped`, the one-line refusal with its exit code. What the jobs know of it is sweep.json."""

from __future__ import annotations

import copy
import itertools
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType, Quote, QuotedString, ValueType
from hydra.types import RunMode
from omegaconf import open_dict

from pipeline.config.compose import describe_compose_error, printable
from pipeline.config.errors import ConfigError
from pipeline.config.schema import Config, register_configs, to_config
from pipeline.identity import config_hash, run_name
from pipeline.job.preflight import checked, with_ranks
from pipeline.measure.objective import Work
from pipeline.progress import format_duration
from pipeline.scenarios import CONF
from pipeline.status import EXIT_FAILED
from pipeline.tracking import Tracker


class SweepStopped(SystemExit):
    """A sweep (or a single run) refused or stopped, in one line with its exit code: a SystemExit, since
    Hydra turns any other exception in a callback into a warning; `pipeline.run` prints the line."""

    def __init__(self, line: str, code: int = EXIT_FAILED):
        super().__init__(code)
        self.line = line


_PACKAGE = re.compile(r"^#\s*@package\s+(\S+)")
_KEY = re.compile(r"^[+~]?[A-Za-z_][\w.@/-]*=")  # `key=` at the start of an axis


def swept_keys(hydra_cfg: Any) -> list[str]:
    """The keys the sweep varies, as axis_key names them (`compile.mode`, `inductor` as `compile.options`)."""
    return axis_keys(swept(hydra_cfg))


def axis_keys(axes: list[str]) -> list[str]:
    """The keys of axes written `key=values` (values may hold spaces and commas: `choice(a, b)`)."""
    return list(dict.fromkeys(axis_key(axis.split("=", 1)[0]) for axis in axes))


def axis_key(key: str) -> str:
    """A swept key as the config names what it sets: `+x` -> `x`; a config group whose options are
    packaged elsewhere (`# @package compile.options` in conf/inductor/*.yaml) -> that package."""
    key = key.lstrip("+~")
    if not key.isidentifier() or not (CONF / key).is_dir():
        return key
    for path in sorted((CONF / key).glob("*.yaml")):
        with open(path) as f:
            for line in itertools.islice(f, 5):
                found = _PACKAGE.match(line.strip())
                if found and found.group(1) not in ("_group_", "_global_", key):
                    return found.group(1)
    return key


def axes_tag(hydra_cfg: Any) -> str:
    """The sweep's axes as the parent run's `sweep_axes` tag: a JSON list of `key=values`."""
    return json.dumps(swept(hydra_cfg))


def axes_from_tag(tag: str) -> list[str]:
    """The axes in a `sweep_axes` tag: a JSON list, or (an old sweep's tag) the axes joined with spaces,
    each word that does not start an axis (`key=`) joined back to the one before."""
    tag = tag.strip()
    if tag.startswith("["):
        try:
            return [str(axis) for axis in json.loads(tag)]
        except ValueError:
            pass
    axes: list[str] = []
    for word in tag.split():
        if _KEY.match(word) or not axes:
            axes.append(word)
        else:
            axes[-1] += " " + word
    return axes


def swept(hydra_cfg: Any) -> list[str]:
    """The sweep's axes as `key=values`: hydra.sweeper.params, then the task overrides that sweep
    (several values, `choice()`, `range()`, `interval()`). A task override of a params key replaces
    it: with values of its own, or with one value, which takes the key out of the sweep."""
    axes = {str(k): str(v) for k, v in (hydra_cfg.sweeper.get("params") or {}).items()}
    for override in hydra_cfg.overrides.task:
        key, _, value = str(override).partition("=")
        if sweeps(str(override)):
            axes[key] = value
        else:
            axes.pop(key, None)
    return [f"{k}={v}" for k, v in axes.items()]


def sweeps(override: str, *, guess: bool = True) -> bool:
    """Whether a command-line override gives several values (`a,b`, `choice(a)`, `range(1,3)`); text not
    in Hydra's grammar by its commas, or (without `guess`) as one value."""
    try:
        (parsed,) = OverridesParser.create().parse_overrides([override])
        return bool(parsed.is_sweep_override())
    except Exception:  # not Hydra's grammar: Hydra refuses it before any job
        value = override.partition("=")[2]
        return guess and "," in value and not value.startswith(("[", "{"))


# Overrides that say where a sweep runs and what it logs to, not what its jobs do: a resumption may
# give other values (another folder, launcher, GPUs, or the same store spelt another way).
NOT_THE_WORK = ("sweep.id", "sweep.resume", "verbose", "gpu_pool")
NOT_THE_WORK_PREFIXES = ("hydra.", "hydra/", "mlflow.")


def the_work(overrides: list[str]) -> dict[str, str]:
    """The command-line overrides that decide the sweep's jobs, as `key: value` read as Hydra reads them:
    a sweep's values sorted (the same jobs), `+key` as `key`, `~key` as removed, the last repeat wins."""
    parser = OverridesParser.create()
    work: dict[str, str] = {}
    for text in overrides:
        key, _, value = text.partition("=")
        key = key.lstrip("+~")
        try:
            (parsed,) = parser.parse_overrides([text])
            key = parsed.key_or_group + (f"@{parsed.package}" if parsed.package else "")
            if parsed.type == OverrideType.DEL:
                value = "(removed)"
            elif parsed.is_sweep_override() and parsed.value_type != ValueType.INTERVAL_SWEEP:
                value = ",".join(sorted(str(v) for v in parsed.sweep_string_iterator()))
            elif not parsed.is_sweep_override():
                value = parsed.get_value_element_as_str()
        except Exception:  # not Hydra's grammar: Hydra refuses it before any job; as written
            pass
        if key in NOT_THE_WORK or key.startswith(NOT_THE_WORK_PREFIXES):
            continue
        work[key] = value
    return work


def changed_work(before: dict[str, str], now: dict[str, str]) -> list[str]:
    """`key=new (the sweep's: old)` for each key whose value differs."""
    return [
        f"{key}={now.get(key, '(not set)')} (the sweep's: {before.get(key, 'not set')})"
        for key in sorted(set(before) | set(now))
        if before.get(key) != now.get(key)
    ]


_PLAIN_VALUE = re.compile(r"[A-Za-z_][A-Za-z0-9_\-./:@]*")
_YAML_WORDS = {"true", "false", "null", "nan", "inf", "yes", "no", "on", "off", "none"}


def hydra_value(text: str) -> str:
    """`text` as a Hydra override value that Hydra reads back as this very string: a plain word as it
    is, else in Hydra's single quotes (`'c;id>pwned'`, `'o\\'brien'`)."""
    if _PLAIN_VALUE.fullmatch(text) and text.lower() not in _YAML_WORDS:
        return text
    return QuotedString(text=text, quote=Quote.single).with_quotes()


def resume_command(command: str, sweep_id: str) -> str:
    """The sweep's own shell-quoted command (a parent run's `command` tag or sweep.json's) with
    `sweep.id=<id> sweep.resume=true` in place of its own; '' where there is no command to read."""
    try:
        words = shlex.split(command)
    except ValueError:  # not shell words (a tag cut at its length limit)
        return ""
    words = [w for w in words if not w.startswith(("sweep.id=", "sweep.resume="))]
    return shlex.join([*words, f"sweep.id={hydra_value(sweep_id)}", "sweep.resume=true"]) if words else ""


def planned_jobs(hydra_cfg: Any) -> list[list[str]] | None:
    """Each job's overrides, as the basic sweeper will launch them; None for sweepers that decide as
    they go (Optuna)."""
    try:
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

        if "BasicSweeper" not in str(hydra_cfg.sweeper.get("_target_", "")):
            return None
        args = [f"{k}={v}" for k, v in (hydra_cfg.sweeper.get("params") or {}).items()]
        args += list(hydra_cfg.overrides.task)
        overrides = OverridesParser.create().parse_overrides(args)
        return [list(job) for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]
    except Exception:
        return None


_COMPOSED: dict[tuple[int, tuple[str, ...]], tuple[Any, Any]] = {}


def composed_job(config: Any, overrides: list[str]) -> Any:
    """A planned job's config as its launcher will compose it (with its `hydra` node), composed once per
    process (about 0.3 s of CPU each); the caller must not change it. Raises what composing raises."""
    key = (id(config), tuple(overrides))
    cached = _COMPOSED.get(key)
    if cached is not None and cached[0] is config:
        return cached[1]
    composed = GlobalHydra.instance().config_loader().load_sweep_config(config, list(overrides))
    _COMPOSED[key] = (config, composed)
    return composed


def task_config(config: Any) -> Any:
    """The job's config as its task function gets it: without the `hydra` node."""
    task = copy.deepcopy(config)
    with open_dict(task):
        del task["hydra"]
    return task


def checked_job(config: Any, overrides: list[str]) -> Config:
    """A planned job's typed config: composed as its launcher will compose it (:func:`composed_job`), then
    checked as the job checks it. Raises what composing or checking raises."""
    return checked(task_config(composed_job(config, overrides)))


def planned_work(config: Any) -> list[Work | None]:
    """Each planned job's work per unit (None for a job whose config does not compose or check)."""
    jobs = planned_jobs(config.hydra) or []
    if not jobs or not GlobalHydra.instance().is_initialized():
        return []
    works: list[Work | None] = []
    for overrides in jobs:
        try:
            job = with_ranks(to_config(task_config(composed_job(config, overrides))))
            works.append(job.scenario.work(job))
        except Exception:
            works.append(None)
    return works


# ----------------------------------------------------------------------------- a dry run
REFUSED_PLAN = "the sweep is refused before anything starts"


@dataclass(frozen=True, kw_only=True)
class PlannedJob:
    """One job a sweep would run: its name, or why its config is refused; its time from earlier runs."""

    num: int
    name: str
    error: str = ""
    seconds: float | None = None  # median job/wall_s of earlier finished runs of its configuration
    earlier: int = 0  # how many


def plan_lines(overrides: list[str], tracking_uri: str | None = None) -> list[str]:
    """`report --plan`: the jobs `python -m pipeline.run -m <overrides>` would run, each with the median
    wall time of earlier finished runs of its configuration (else unknown), and the total; nothing runs."""
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        try:
            config = loader.load_configuration("config", list(overrides), run_mode=RunMode.MULTIRUN)
        except Exception as err:
            return [f"config error: {describe_compose_error(err)}"]
        command = shlex.join(["python", "-m", "pipeline.run", "-m", *overrides])
        jobs = planned_jobs(config.hydra)
        if jobs is None:  # a search decides its trials as it goes
            trials = config.hydra.sweeper.get("n_trials", "?")
            space = "; ".join(swept(config.hydra)) or "none"
            return [
                f"plan: `{command}` is a search ({config.hydra.sweeper._target_.rsplit('.', 1)[-1]}): "
                f"{trials} trials, each chosen as the search goes, from: {space}",
                "estimate: unknown (which configurations run is decided as the search goes)",
            ]
        planned = _compose_jobs(loader, config, jobs or [[]], tracking_uri)
    return _plan_text(command, planned, config)


def _compose_jobs(
    loader: Any, config: Any, jobs: list[list[str]], tracking_uri: str | None
) -> list[PlannedJob]:
    varied = swept_keys(config.hydra)
    store = None
    planned = []
    for num, overrides in enumerate(jobs):
        try:
            composed = loader.load_sweep_config(config, overrides)
            HydraConfig.instance().set_config(composed)
            job = checked(task_config(composed))
        except Exception as err:
            error = printable(str(err)) if isinstance(err, ConfigError) else describe_compose_error(err)
            planned.append(PlannedJob(num=num, name=" ".join(overrides), error=error))
            continue
        if store is None:
            store = _store(tracking_uri or job.mlflow.tracking_uri, job.mlflow.experiment)
        walls = [
            r.metrics["job/wall_s"]
            for r in (store.runs_where({"config_hash": config_hash(job)}, status="FINISHED") if store else [])
            if "job/wall_s" in r.metrics
        ]
        seconds = sorted(walls)[len(walls) // 2] if walls else None
        planned.append(PlannedJob(num=num, name=run_name(job, varied), seconds=seconds, earlier=len(walls)))
    return planned


def _store(uri: str, experiment: str) -> Any:
    """The store the jobs would log to, where it exists (a dry run makes no store); None otherwise."""
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).exists():
        return None
    try:
        return Tracker(uri, experiment, read_only=True)
    except Exception:
        return None


def _plan_text(command: str, planned: list[PlannedJob], config: Any) -> list[str]:
    bad = [p for p in planned if p.error]
    lines = [f"plan: {len(planned)} job(s) for `{command}` (nothing runs)"]
    width = max((len(p.name) for p in planned if not p.error), default=0)
    for p in planned:
        if p.error:
            lines.append(f"  job {p.num}: bad input, would be recorded FAILED: {p.error}")
        elif p.seconds is None:
            lines.append(f"  job {p.num}: {p.name:<{width}}  unknown (no earlier run of this configuration)")
        else:
            lines.append(
                f"  job {p.num}: {p.name:<{width}}  ~{format_duration(p.seconds)} (median of {p.earlier} earlier run(s))"
            )
    known = [p.seconds for p in planned if p.seconds is not None]
    unknown = len(planned) - len(known) - len(bad)
    total = f"~{format_duration(sum(known))} for the {len(known)} job(s) run before" if known else "unknown"
    if known and unknown:
        total += f", plus {unknown} job(s) never run here (unknown)"
    if bad and len(bad) == len(planned):
        total = f"none: no job has a valid config, so {REFUSED_PLAN}"
    if "BasicLauncher" in str(config.hydra.launcher.get("_target_", "")):
        total += "; one job at a time (Hydra's basic launcher)"
    lines.append(f"estimate: {total}")
    return lines
