"""The job's preflight: the config's own checks, then those that need a library or the host (model,
backend, inductor options, GPUs, float8). Library checks import lazily and are remembered per library
version (:mod:`pipeline.config.known_good`); GPUs are counted through NVML, never CUDA."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import importlib.util
import os
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from pipeline.config import known_good
from pipeline.config.checks import check, raise_first
from pipeline.config.errors import ConfigError, not_one_of
from pipeline.config.schema import CPU_RANKS, CompileConfig, Config, MlflowConfig, ModelConfig
from pipeline.job.gpu_pool import pool_indices
from pipeline.nvml import nvml
from pipeline.provenance import PROJECT_ROOT
from pipeline.scenarios.generate.config import HF_FACTORY


def validate(cfg: Config | DictConfig) -> Config:
    """Every check, the config's own first: the typed config, or the first ConfigError (all in `.errors`)."""
    config = checked(cfg)
    raise_first(host_errors(config))
    errors = model_errors("model", config.model)  # imports the model library, once per version
    if config.compile.compiled:
        backend = config.compile.backend
        errors += remembered("compile.backend", backend, lambda: backend_errors(backend))
    if config.compile.compiled and not errors:
        errors += inductor_option_errors(config.compile)
    if config.loss.teacher is not None and not errors:
        errors += model_errors("loss.teacher", config.loss.teacher)
    if config.parallel.distributed and not errors:
        errors += parallel_errors(config)
    if config.precision.float8 and not errors:
        errors += float8_errors(config)
    raise_first(errors)
    return config


# At most one gloo rank per core and two DataLoader workers per core: beyond, a typo
# (`parallel.nproc=1000`) starts hundreds of processes and the OOM killer picks among the host's.
DATALOADER_WORKERS_PER_CORE = 2


def host_cores() -> int:
    """The cores this process may run on (its affinity: a SLURM allocation, a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def host_errors(config: Config) -> list[ConfigError]:
    """What this host cannot give the job, before any process starts: a CUDA GPU for `device=cuda`, CPU
    ranks and DataLoader workers beyond its cores, a sqlite store's folder (`store_errors`)."""
    cores, errors = host_cores(), store_errors(config.mlflow)
    if config.device == "cuda" and (missing := cuda_missing()):  # else a FAILED run on torch's own error
        why = f"a CUDA GPU, and {missing}: device=cpu, or device=auto (cuda where there is one)"
        errors.append(ConfigError("device", "cuda", why))
    par = config.parallel
    on_cpu = config.device == "cpu" or (config.device == "auto" and not visible_gpus())
    if par.distributed and par.nproc > cores and on_cpu:
        why = f"at most {cores} on the CPU (one gloo process per core this job may use: {cores})"
        errors.append(ConfigError("parallel.nproc", par.nproc, why))
    limit = DATALOADER_WORKERS_PER_CORE * cores
    if config.data.loader and config.data.num_workers > limit:
        why = (
            f"at most {limit} ({DATALOADER_WORKERS_PER_CORE} DataLoader processes per core this job may use: "
            f"{cores})"
        )
        errors.append(ConfigError("data.num_workers", config.data.num_workers, why))
    return errors


def store_errors(mlflow: MlflowConfig) -> list[ConfigError]:
    """A sqlite store's missing folder is made inside the project or the current folder; anywhere else
    it is more likely a typo (`sqlite:////typo/dir/m.db`): refused, naming the first folder missing."""
    uri = mlflow.tracking_uri
    if not uri.startswith("sqlite:///"):
        return []
    db = Path(uri[len("sqlite:///") :])
    if not db.is_absolute() or db.parent.is_dir():
        return []
    missing = db.parent
    while not missing.parent.exists() and missing.parent != missing:
        missing = missing.parent
    if any(db.resolve().is_relative_to(base) for base in (PROJECT_ROOT, Path.cwd().resolve())):
        return []
    why = f"{missing} does not exist: make the store's folder first (mkdir -p {db.parent})"
    return [ConfigError("mlflow.tracking_uri", uri, why + " if that is where it goes, or fix the path")]


def model_errors(at: str, model: ModelConfig) -> list[ConfigError]:
    """The model exists: a timm name timm knows, an HF config that builds for this input, a factory
    that imports (importing the model library once per library version)."""
    target = model._target_
    if target == "models.timm_models.create":
        return remembered("timm model", model.name, lambda: _timm_errors(at, model.name))
    if target == HF_FACTORY:
        settings = [model.name, dataclasses.asdict(model.input), dict(model.kwargs)]
        return remembered("hf config", settings, lambda: _hf_config_errors(at, model))
    from hydra.utils import get_method

    try:
        get_method(target)
    except Exception as err:
        reason = " ".join(str(err).split())[:200]
        why = f"a dotted path to an importable factory ({type(err).__name__}: {reason})"
        return [ConfigError(f"{at}._target_", target, why)]
    return []


def parallel_errors(config: Config) -> Iterator[ConfigError]:
    """A distributed job fits the machine and the model: no more processes than visible GPUs (on cuda,
    or on auto where there are GPUs), and blocks FSDP2 can shard (built on the meta device)."""
    par = config.parallel
    visible = visible_gpus() if config.device in ("cuda", "auto") else None
    if visible is not None and (config.device == "cuda" or visible > 0) and par.nproc > visible:
        why = f"at most the {visible} GPU(s) this job sees (device={config.device})"
        yield ConfigError("parallel.nproc", par.nproc, why + "; device=cpu runs gloo processes")
    if par.strategy == "fsdp":
        settings = [config.model.id, config.model._target_, config.model.name, dict(config.model.kwargs)]
        if not known_good.passes("fsdp blocks", settings, lambda: _has_blocks(config.model)):
            why = (
                f"model={config.model.id} has no repeated blocks to shard (no ModuleList/Sequential of same-class "
                "modules): parallel=ddp or none"
            )
            yield ConfigError("parallel", "fsdp", why)


def checked(cfg: Config | DictConfig) -> Config:
    """The config's own checks, run again with `parallel.nproc` resolved (`with_ranks`) where it was
    null: the typed config a job's identity, hash and host checks are made of."""
    config = check(cfg)
    return check(with_ranks(config)) if config.parallel.nproc is None else config


def with_ranks(config: Config) -> Config:
    """`config` with `parallel.nproc` resolved (null: `ranks_here`; parallel=none: one process)."""
    par = config.parallel
    if par.nproc is not None:
        return config
    nproc = ranks_here(config) if par.distributed else 1
    return dataclasses.replace(config, parallel=dataclasses.replace(par, nproc=nproc))


def ranks_here(config: Config) -> int:
    """The GPUs a distributed job may use, counted without CUDA: gpu_pool's (the config's, else
    hydra/launcher=local_gpus's PIPELINE_GPU_POOL), else the visible ones; CPU_RANKS on the CPU or where
    no GPU is seen (device=cuda then fails the GPU check)."""
    if config.device == "cpu":
        return CPU_RANKS
    found = None
    if pool := config.gpu_pool or os.environ.get("PIPELINE_GPU_POOL"):
        with contextlib.suppress(Exception):  # NVML not there: what the process may see
            found = len(pool_indices(pool))
    return found or visible_gpus() or CPU_RANKS


def cuda_missing() -> str:
    """Why a job here can have no CUDA GPU ('' where it may have one), asked of NVML, never CUDA."""
    count = visible_gpus()
    if count:
        return ""
    if (listed := os.environ.get("CUDA_VISIBLE_DEVICES")) is not None:
        return f"CUDA_VISIBLE_DEVICES={listed!r} hides every GPU"
    if count == 0:
        return "NVML finds none on this host"
    if any(Path(p).exists() for p in ("/proc/driver/nvidia/version", "/dev/nvidiactl")):
        return ""  # a driver, but no NVML to count its GPUs: torch will say
    return "this host has no NVIDIA driver (no /proc/driver/nvidia, no NVML)"


def visible_gpus() -> int | None:
    """GPUs this job may use: CUDA_VISIBLE_DEVICES if set, else NVML's count; None if unknown."""
    if (listed := os.environ.get("CUDA_VISIBLE_DEVICES")) is not None:
        return len([d for d in listed.split(",") if d.strip() and d.strip() != "-1"])
    try:
        return len(pool_indices("all"))
    except Exception:
        return None


def _has_blocks(model: ModelConfig) -> bool:
    import torch

    from models import build_model
    from pipeline.axes.compile import repeated_blocks

    with torch.device("meta"):
        return bool(repeated_blocks(build_model(model)))


def remembered(check: str, value: Any, find: Callable[[], list[ConfigError]]) -> list[ConfigError]:
    """What `find` finds wrong (it may import torch or a model library), looked for once, and not at all
    where `check` passed for `value` with the installed library versions (:mod:`pipeline.config.known_good`)."""
    found: list[ConfigError] = []

    def run_check() -> bool:
        found.extend(find())
        return not found

    known_good.passes(check, value, run_check)
    return found  # empty where the check passed, now or before


def _timm_errors(at: str, name: str | None) -> list[ConfigError]:
    from models import timm_models

    if timm_models.model_exists(name):
        return []
    close = difflib.get_close_matches(str(name), timm_models.timm.list_models(), n=3)
    why = "a timm model name (timm.list_models())" + (f"; close: {', '.join(close)}" if close else "")
    return [ConfigError(f"{at}.name", name, why)]


def _hf_config_errors(at: str, model: ModelConfig) -> list[ConfigError]:
    from models import hf

    try:
        hf.make_config(model.name, dataclasses.asdict(model.input), **model.kwargs)
    except ConfigError as err:
        return [ConfigError(at + err.key.removeprefix("model"), err.value, err.allowed)]
    return []


PRECISION_DIR = Path(__file__).resolve().parents[2] / "conf" / "precision"


def float8_errors(config: Config) -> list[ConfigError]:
    """`precision=fp8` (torchao's float8 training) only where it can run: training, on GPUs of compute
    capability 8.9 or newer (asked of NVML), with torchao installed."""
    if not (why := _float8_unavailable(config)):
        return []
    others = sorted(p.stem for p in PRECISION_DIR.glob("*.yaml") if p.stem != config.precision.id)
    return [ConfigError("precision", config.precision.id, f"{why}; allowed values here: {', '.join(others)}")]


def _float8_unavailable(config: Config) -> str:
    if not config.scenario.trains:
        return f"float8 training (torchao) is for training scenarios, not scenario={config.scenario.name}"
    if config.device == "cpu":
        return "float8 training (torchao) runs on Hopper-class GPUs only (compute capability >= 8.9), not on device=cpu"
    if config.parallel.distributed:
        return f"float8 training is not wired for parallel={config.parallel.strategy} (FSDP2's float8 all-gather is not measured): parallel=none only"
    if importlib.util.find_spec("torchao") is None:
        return "float8 training needs torchao, which is not installed (pip install torchao)"
    try:  # the compute capability of every GPU NVML sees
        with nvml() as n:
            handles = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
            capabilities = [tuple(n.nvmlDeviceGetCudaComputeCapability(h)) for h in handles]
    except Exception:
        capabilities = []
    if not capabilities:
        return "float8 training (torchao) runs on Hopper-class GPUs only, and NVML sees no GPU on this host"
    if min(capabilities) < (8, 9):  # Ada and Hopper: float8 tensor cores
        found = ", ".join(f"{major}.{minor}" for major, minor in sorted(set(capabilities)))
        return f"float8 training (torchao) needs compute capability >= 8.9 (Hopper-class); this host's GPUs have {found}"
    return ""


def backend_errors(backend: str) -> list[ConfigError]:
    """`compile.backend` is one torch lists (including the debug ones, such as `aot_eager`)."""
    import torch._dynamo

    backends = sorted(torch._dynamo.list_backends(exclude_tags=()))
    if backend in backends:
        return []
    return [not_one_of("compile.backend", backend, backends)]


def inductor_option_errors(settings: CompileConfig) -> list[ConfigError]:
    """Each `compile.options` key is an inductor config key with a value of its type (torch checks this
    only once the worker compiles, tens of seconds in)."""
    options = settings.inductor_options()
    if not options or settings.backend != "inductor":
        return []
    return remembered("inductor options", sorted(options.items()), lambda: list(_option_errors(options)))


def _option_errors(options: dict[str, Any]) -> Iterator[ConfigError]:
    from torch._inductor import config

    known = config.get_config_copy()
    for key, value in options.items():
        name = key.replace("-", "_")  # as torch reads them
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=3)
            hint = f"; close: {', '.join(close)}" if close else ""
            why = f"an inductor option (torch._inductor.config){hint}"
            yield ConfigError(f"compile.options.{key}", value, why)
            continue
        expected = config.get_type(name)
        plain = typing.get_origin(expected) is None and isinstance(expected, type)
        if plain and not isinstance(value, expected):
            why = f"torch._inductor.config.{name} takes {expected.__name__}"
            yield ConfigError(f"compile.options.{key}", value, why)
