"""The job's preflight: every check of its config before anything starts. First the config's own
(:func:`pipeline.config.checks.check`), then those that need a library or the host: a timm model name,
an HF config that builds for the input, a factory that imports, a torch.compile backend, inductor
options (`compile.options`, against `torch._inductor.config`), a distributed job's GPUs and blocks,
float8's GPU and torchao. They import torch or the model library lazily, and once passed they are
remembered per library version (:mod:`pipeline.config.known_good`), so a job's own process usually
skips those imports. The job's parent never initializes CUDA: GPUs are counted through NVML.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import os
import typing
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from pipeline.config import known_good
from pipeline.config.checks import check, raise_first
from pipeline.config.errors import ConfigError
from pipeline.config.schema import CPU_RANKS, CompileConfig, Config, MlflowConfig, ModelConfig
from pipeline.job.gpu_pool import pool_indices
from pipeline.nvml import nvml
from pipeline.provenance import PROJECT_ROOT


def validate(cfg: Config | DictConfig) -> Config:
    """Every check, the config's own first; return the typed config, or raise the first
    :class:`ConfigError` (every error found is in its `.errors`)."""
    config = checked(cfg)
    raise_first(host_errors(config))
    errors = model_errors("model", config.model)  # imports the model library, once per version
    if config.compile.compiled:
        errors += backend_errors(config.compile.backend)
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


TIMM_FACTORY, HF_FACTORY = "models.timm_models.create", "models.hf.create"
# Processes a job may start on this host's CPUs: one gloo rank per core (more only time the
# oversubscription), and DataLoader workers per rank up to twice the cores (torch suggests one per
# core). Beyond, a typo (`parallel.nproc=1000`) starts hundreds of processes and the OOM killer picks
# whatever it likes on the host.
DATALOADER_WORKERS_PER_CORE = 2


def host_cores() -> int:
    """The cores this process may run on (its affinity: a SLURM allocation, a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def host_errors(config: Config) -> list[ConfigError]:
    """What this host cannot give the job, before any process starts: a CUDA GPU for `device=cuda`, CPU
    ranks and DataLoader workers beyond its cores; a sqlite store in folders that would have to be made
    outside the project (`store_errors`)."""
    cores, errors = host_cores(), store_errors(config.mlflow)
    missing = cuda_missing() if config.device == "cuda" else ""
    if missing:  # else its worker starts, fails on torch's own error, and a FAILED run is all there is
        errors.append(
            ConfigError(
                "device",
                "cuda",
                f"a CUDA GPU, and {missing}: device=cpu, or device=auto (cuda where there is one)",
            )
        )
    par = config.parallel
    on_cpu = config.device == "cpu" or (config.device == "auto" and not visible_gpus())
    if par.distributed and par.nproc > cores and on_cpu:
        errors.append(
            ConfigError(
                "parallel.nproc",
                par.nproc,
                f"at most {cores} on the CPU (one gloo process per core this job may use: {cores})",
            )
        )
    limit = DATALOADER_WORKERS_PER_CORE * cores
    if config.data.loader and config.data.num_workers > limit:
        errors.append(
            ConfigError(
                "data.num_workers",
                config.data.num_workers,
                f"at most {limit} ({DATALOADER_WORKERS_PER_CORE} DataLoader processes per core this job may use: {cores})",
            )
        )
    return errors


def store_errors(mlflow: MlflowConfig) -> list[ConfigError]:
    """A sqlite store whose folder does not exist is made where the project or the current folder holds
    it (`outputs/`); anywhere else a missing folder is more likely a typo (`sqlite:////typo/dir/m.db`)
    than a wish to make folders at the root: refused, naming the first folder missing."""
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
    return [
        ConfigError(
            "mlflow.tracking_uri",
            uri,
            f"{missing} does not exist: make the store's folder first (mkdir -p {db.parent}) if that is where it "
            "goes, or fix the path",
        )
    ]


def model_errors(at: str, model: ModelConfig) -> list[ConfigError]:
    """The model exists: a timm name timm knows, an HF config that builds for this input, a factory
    that imports. (Imports the model library into this process, once per library version.)"""
    target = model._target_
    if target == TIMM_FACTORY:
        if known_good.passes("timm model", model.name, lambda: _timm_model_exists(model.name)):
            return []
        return [ConfigError(f"{at}.name", model.name, _timm_allowed(model.name))]
    if target == HF_FACTORY:
        settings = [model.name, dataclasses.asdict(model.input), dict(model.kwargs)]
        if known_good.passes("hf config", settings, lambda: _hf_config_error(*settings) is None):
            return []
        err = _hf_config_error(*settings)
        assert err is not None
        return [ConfigError(at + err.key.removeprefix("model"), err.value, err.allowed)]
    from hydra.utils import get_method

    try:
        get_method(target)
    except Exception as err:
        reason = " ".join(str(err).split())[:200]
        return [
            ConfigError(
                f"{at}._target_",
                target,
                f"a dotted path to an importable factory ({type(err).__name__}: {reason})",
            )
        ]
    return []


def parallel_errors(config: Config) -> list[ConfigError]:
    """A distributed job fits the machine and the model: no more processes than visible GPUs on
    cuda, or on auto where there are GPUs (counted through NVML: this process never initializes
    CUDA), and blocks FSDP2 can shard
    (the model built on the meta device, once per library version)."""
    par, errors = config.parallel, []
    visible = visible_gpus() if config.device in ("cuda", "auto") else None
    if visible is not None and (config.device == "cuda" or visible > 0) and par.nproc > visible:
        errors.append(
            ConfigError(
                "parallel.nproc",
                par.nproc,
                f"at most the {visible} GPU(s) this job sees (device={config.device}); device=cpu runs gloo processes",
            )
        )
    if par.strategy == "fsdp":
        settings = [config.model.id, config.model._target_, config.model.name, dict(config.model.kwargs)]
        if not known_good.passes("fsdp blocks", settings, lambda: _has_blocks(config.model)):
            errors.append(
                ConfigError(
                    "parallel",
                    "fsdp",
                    f"model={config.model.id} has no repeated blocks to shard (no ModuleList/Sequential of same-class "
                    "modules): parallel=ddp or none",
                )
            )
    return errors


def checked(cfg: Config | DictConfig) -> Config:
    """The config's own checks (:func:`pipeline.config.checks.check`) with `parallel.nproc` resolved
    (`with_ranks`): those that count ranks run again with the number. The typed config a job's identity,
    hash and host checks are made of, wherever a job's config is composed."""
    config = check(cfg)
    return check(with_ranks(config)) if config.parallel.nproc is None else config


def with_ranks(config: Config) -> Config:
    """`config` with `parallel.nproc` resolved: null means one rank per GPU the job may use (`ranks_here`);
    parallel=none runs one process. Every Config a job's identity is made of goes through here (its
    run's name and hash show the number), before any check that counts ranks."""
    par = config.parallel
    if par.nproc is not None:
        return config
    nproc = ranks_here(config) if par.distributed else 1
    return dataclasses.replace(config, parallel=dataclasses.replace(par, nproc=nproc))


def ranks_here(config: Config) -> int:
    """The GPUs a distributed job may use, counted without CUDA: gpu_pool's (hydra/launcher=local_gpus
    hands it out: the config's, else the launcher's PIPELINE_GPU_POOL), else CUDA_VISIBLE_DEVICES or
    NVML's count; CPU_RANKS gloo processes on the CPU or where no GPU is seen (device=cuda then fails the
    GPU check, naming what it sees)."""
    if config.device == "cpu":
        return CPU_RANKS
    pool = config.gpu_pool or os.environ.get("PIPELINE_GPU_POOL")
    found = None
    if pool:
        try:
            found = len(pool_indices(pool))
        except Exception:  # NVML not there: what the process may see
            found = None
    if not found:
        found = visible_gpus()
    return found or CPU_RANKS


def cuda_missing() -> str:
    """Why a job here can have no CUDA GPU ('' where it may have one), through NVML and the driver's
    files, never CUDA: CUDA_VISIBLE_DEVICES hides every GPU, NVML finds none, or (no NVML library) the
    host has no NVIDIA driver."""
    count = visible_gpus()
    if count:
        return ""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return f"CUDA_VISIBLE_DEVICES={listed!r} hides every GPU"
    if count == 0:
        return "NVML finds none on this host"
    if any(Path(p).exists() for p in ("/proc/driver/nvidia/version", "/dev/nvidiactl")):
        return ""  # a driver, but no NVML to count its GPUs: torch will say
    return "this host has no NVIDIA driver (no /proc/driver/nvidia, no NVML)"


def visible_gpus() -> int | None:
    """GPUs this job may use: CUDA_VISIBLE_DEVICES if set, else NVML's count; None if unknown."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return len([d for d in listed.split(",") if d.strip() and d.strip() != "-1"])
    try:
        with nvml() as n:
            return int(n.nvmlDeviceGetCount())
    except Exception:
        return None


def _has_blocks(model: ModelConfig) -> bool:
    import torch

    from models import build_model
    from pipeline.axes.compile import repeated_blocks

    with torch.device("meta"):
        return bool(repeated_blocks(build_model(model)))


def _timm_model_exists(name: str | None) -> bool:
    from models import timm_models

    return timm_models.model_exists(name)


def _timm_allowed(name: str | None) -> str:
    import difflib

    from models import timm_models

    close = difflib.get_close_matches(str(name), timm_models.timm.list_models(), n=3)
    return "a timm model name (timm.list_models())" + (f"; close: {', '.join(close)}" if close else "")


def _hf_config_error(name: str, input_spec: dict[str, Any], kwargs: dict[str, Any]) -> ConfigError | None:
    from models import hf

    try:
        hf.make_config(name, input_spec, **kwargs)
    except ConfigError as err:
        return err
    return None


FLOAT8_MIN_CAPABILITY = (8, 9)  # Ada and Hopper: float8 tensor cores
PRECISION_DIR = Path(__file__).resolve().parents[2] / "conf" / "precision"


def float8_errors(config: Config) -> list[ConfigError]:
    """`precision=fp8` (float8 training through torchao) where it can run: training, on a visible GPU
    of compute capability 8.9 or newer (asked of NVML: this process never initializes CUDA), with
    torchao installed. Else one line naming the key, why, and the precisions allowed here."""
    why = _float8_unavailable(config)
    if not why:
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
    capabilities = gpu_capabilities()
    if not capabilities:
        return "float8 training (torchao) runs on Hopper-class GPUs only, and NVML sees no GPU on this host"
    if min(capabilities) < FLOAT8_MIN_CAPABILITY:
        found = ", ".join(f"{major}.{minor}" for major, minor in sorted(set(capabilities)))
        return f"float8 training (torchao) needs compute capability >= 8.9 (Hopper-class); this host's GPUs have {found}"
    return ""


def gpu_capabilities() -> list[tuple[int, int]]:
    """The compute capability of every GPU NVML sees (empty without NVML or a GPU)."""
    try:
        with nvml() as n:
            return [
                tuple(n.nvmlDeviceGetCudaComputeCapability(n.nvmlDeviceGetHandleByIndex(i)))  # type: ignore[misc]
                for i in range(n.nvmlDeviceGetCount())
            ]
    except Exception:
        return []


def backend_errors(backend: str) -> list[ConfigError]:
    if known_good.passes("compile.backend", backend, lambda: backend in available_backends()):
        return []
    return [ConfigError("compile.backend", backend, "allowed values are " + ", ".join(available_backends()))]


def available_backends() -> list[str]:
    """The backends torch lists (including the debug ones, such as `aot_eager`)."""
    import torch._dynamo

    return sorted(torch._dynamo.list_backends(exclude_tags=()))


def inductor_option_errors(settings: CompileConfig) -> list[ConfigError]:
    """Each `compile.options` key is a key of the installed torch's inductor config, with a value of
    its type: what torch checks only once the worker compiles, tens of seconds in."""
    options = settings.inductor_options()
    if not options or settings.backend != "inductor":
        return []
    check = sorted(options.items(), key=lambda item: item[0])
    if known_good.passes("inductor options", check, lambda: not _option_errors(options)):
        return []
    return _option_errors(options)


def _option_errors(options: dict[str, Any]) -> list[ConfigError]:
    from torch._inductor import config

    known = config.get_config_copy()
    errors = []
    for key, value in options.items():
        name = key.replace("-", "_")  # as torch reads them
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=3)
            hint = f"; close: {', '.join(close)}" if close else ""
            errors.append(
                ConfigError(
                    f"compile.options.{key}", value, f"an inductor option (torch._inductor.config){hint}"
                )
            )
            continue
        expected = config.get_type(name)
        if (
            typing.get_origin(expected) is None
            and isinstance(expected, type)
            and not isinstance(value, expected)
        ):
            errors.append(
                ConfigError(
                    f"compile.options.{key}",
                    value,
                    f"torch._inductor.config.{name} takes {expected.__name__}",
                )
            )
    return errors
