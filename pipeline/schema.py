"""The typed configuration contract.

Every key a user can set is a dataclass field here, with its default and a help text (`make docs`
turns these into the README's config reference). Hydra checks types and key names when it composes
the config; :func:`validate` checks values, enum-like strings (which may contain dashes, such as
``max-autotune``) and combinations, and names the key, the bad value and what is allowed.

This module does no torch work at import time; the few checks that need torch or a model library
(backend names, timm/HF model names) import them lazily, and once passed they are remembered per
library version (:mod:`pipeline.known_good`), so a job's own process stays free of those imports.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

COMPILE_MODES = ("eager", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
COMPILE_SCOPES = ("model", "loss", "model_and_loss", "regional", "step")
DEVICES = ("auto", "cuda", "cpu")
INPUT_KINDS = ("image", "tokens")
TOKEN_TARGETS = ("next_token", "masked_token", "class")
AUTOCAST_DTYPES = ("bfloat16", "float16")
PARAM_DTYPES = ("float32", "bfloat16")
DISTILL_KINDS = ("mse", "kl")


def doc(default: Any, help: str, **kw: Any) -> Any:
    """A dataclass field with a help text (read by `make docs`); a dataclass type or a dict default is
    turned into a default factory."""
    meta = {"help": help, **kw}
    if isinstance(default, type) and is_dataclass(default):
        return field(default_factory=default, metadata=meta)
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class InputSpec:
    """What a model eats; fake data is generated to match it."""

    kind: str = doc("image", "`image` (B×C×H×W float) or `tokens` (B×T integer ids)", choices=INPUT_KINDS)
    channels: int = doc(3, "image channels")
    height: int = doc(224, "image height in pixels")
    width: int = doc(224, "image width in pixels")
    num_classes: int = doc(1000, "classes of an image classifier (the width of its logits)")
    vocab_size: int = doc(50257, "token vocabulary size (the width of an LM's logits)")
    seq_len: int = doc(1024, "tokens per sequence")
    target: str = doc(
        "class",
        "what the labels are: `class` (one per image), `next_token` (causal LM, shifted in the loss), "
        "`masked_token` (masked LM: 15% of positions labelled, the rest ignored)",
        choices=TOKEN_TARGETS,
    )


@dataclass
class ModelConfig:
    """A model: a factory (`_target_`) called with `name` (when set) and `kwargs`."""

    id: str = doc(MISSING, "short label used in run names and tags, e.g. `vit_b16`")
    _target_: str = doc("models.timm_models.create", "dotted path of the factory that builds the model")
    name: str | None = doc(
        None, "the library's model name (timm name, HF config class), passed to the factory"
    )
    kwargs: dict[str, Any] = doc({}, "extra keyword arguments of the factory (timm kwargs, HF config fields)")
    input: InputSpec = doc(InputSpec, "the input spec; data generation follows it")
    batch_size: int = doc(64, "this model's default batch size (`trainer.batch_size` defaults to it)")


@dataclass
class LossConfig:
    """One interface for every loss: `loss(batch, outputs) -> scalar tensor`."""

    id: str = doc(MISSING, "short label used in run names and tags")
    _target_: str = doc("losses.cross_entropy.CrossEntropy", "dotted path of the loss module's class")
    kind: str = doc(
        "mse", "distillation only: `mse` (student vs teacher logits) or `kl`", choices=DISTILL_KINDS
    )
    temperature: float = doc(2.0, "distillation `kl` only: softmax temperature")
    alpha: float = doc(0.5, "distillation `kl` only: weight of the KL term; 1-alpha goes to hard-label CE")
    teacher: ModelConfig | None = doc(None, "distillation only: the teacher model config (any model config)")


@dataclass
class PrecisionConfig:
    id: str = doc(MISSING, "short label used in run names and tags")
    autocast_dtype: str | None = doc(None, "autocast dtype, or null for no autocast", choices=AUTOCAST_DTYPES)
    param_dtype: str = doc("float32", "dtype of weights and inputs", choices=PARAM_DTYPES)
    tf32: bool = doc(False, "allow TF32 for float32 matmuls and convolutions")
    grad_scaler: bool = doc(False, "scale the loss with a GradScaler (needed for float16 autocast)")


@dataclass
class CompileConfig:
    mode: str = doc(
        "default", "`eager` means no torch.compile; the rest are torch.compile modes", choices=COMPILE_MODES
    )
    backend: str = doc("inductor", "a torch.compile backend, checked against `torch._dynamo.list_backends()`")
    fullgraph: bool = doc(False, "fail on any graph break")
    dynamic: bool | None = doc(None, "dynamic shapes: null lets torch decide, true/false force it")
    options: dict[str, Any] = doc(
        {}, "backend options (inductor config keys), merged over the mode's options"
    )
    scope: str = doc("model", "what is compiled", choices=COMPILE_SCOPES)
    optimizer: bool = doc(False, "also compile `optimizer.step`")


@dataclass
class OptimizerConfig:
    _target_: str = doc("torch.optim.Adam", "optimizer class (Adam, as in the seed loop)")
    lr: float = doc(1e-3, "learning rate")
    fused: bool | None = doc(None, "use the fused kernels (CUDA); null leaves torch's default")
    foreach: bool | None = doc(None, "use the foreach kernels; null leaves torch's default")
    kwargs: dict[str, Any] = doc({}, "other optimizer arguments (betas, weight_decay, ...)")


@dataclass
class TrainerConfig:
    steps: int = doc(100, "training steps in all, warm-up included")
    warmup_steps: int = doc(10, "steps run before timing starts (compilation happens here)")
    batch_size: int = doc("${model.batch_size}", "samples per step; defaults to the model's batch size")  # type: ignore[arg-type]
    timeout_s: float = doc(3600.0, "the worker is killed after this many seconds (status KILLED)")
    seed: int = doc(0, "seed for weights and fake data")
    optimizer: OptimizerConfig = doc(OptimizerConfig, "the optimizer")


@dataclass
class DataConfig:
    loader: bool = doc(
        False,
        "false: batches made once on the device and rotated; true: a DataLoader makes CPU batches copied every step",
    )
    num_batches: int = doc(4, "distinct on-device batches rotated among (loader=false)")
    num_workers: int = doc(4, "DataLoader workers (loader=true)")
    pin_memory: bool = doc(False, "pin host batches (loader=true)")
    non_blocking: bool = doc(False, "asynchronous host-to-device copies (loader=true, needs pin_memory)")


@dataclass
class MlflowConfig:
    tracking_uri: str = doc(
        "${oc.env:MLFLOW_TRACKING_URI,${default_store:}}",
        "tracking URI; `MLFLOW_TRACKING_URI` wins; default `sqlite:///<cwd>/outputs/mlflow.db` (absolute path)",
    )
    experiment: str = doc("compile-sweeps", "MLflow experiment name")
    artifact_location: str | None = doc(
        None,
        "artifact root for a new experiment; null: outputs/mlartifacts beside a sqlite store, the server's default otherwise",
    )


@dataclass
class BenchmarkConfig:
    paired_eager: bool = doc(
        True, "also measure eager in the same worker, interleaved in rounds, for `speedup_vs_eager`"
    )
    rounds: int = doc(3, "measurement rounds per variant when paired (measured steps are split evenly)")
    loss_rtol: float = doc(
        0.05,
        "loss parity tolerance: max relative gap between compiled and eager losses over the first `parity_steps`",
    )
    parity_steps: int = doc(
        3,
        "steps over which loss parity is judged (later steps on rotated random batches diverge chaotically;"
        " on an H200, HF BERT and Llama curves at amp separated from step 4 on)",
    )
    noisy_spread_pct: float = doc(
        10.0,
        "flag a job as noisy (`measurement_noisy`, a warning in its last line) when the p10-p90 spread of its measured steps exceeds this percentage of the median",
    )


@dataclass
class DiagnoseConfig:
    explain: bool = doc(False, "run torch._dynamo.explain before training and log its report")
    trace: bool = doc(False, "record the compiler's structured trace (TORCH_TRACE) and tlparse's report")
    sync_check: bool = doc(True, "count host-device syncs during one extra step after measuring (CUDA only)")
    flops: bool = doc(True, "count FLOPs of one step with torch.utils.flop_counter, for MFU")
    cache_dir: str | None = doc(None, "inductor cache dir; null: shared per sweep under outputs/")
    cold_cache: bool = doc(False, "start from an empty inductor cache (cold-start compile time)")


@dataclass
class SweepConfig:
    id: str | None = doc(None, "sweep id (tag `sweep_id`); null: made up at multirun start")
    resume: bool = doc(False, "skip jobs whose configuration already has a FINISHED run in sweep `sweep.id`")
    name: str | None = doc(None, "name of the named sweep file used, if any")
    objective: str | None = doc(
        None,
        "a metric the job returns to a search sweeper (sweep=compile_search: Optuna), e.g. step_time_ms_p50; a job that fails returns its outcome: a failed trial",
    )


@dataclass
class Config:
    model: ModelConfig = doc(MISSING, "model group: vit_b16, vit_tiny, resnet50, gpt2, ...")
    loss: LossConfig = doc(MISSING, "loss group: cross_entropy, distillation")
    precision: PrecisionConfig = doc(MISSING, "precision group: amp, fp32, tf32, amp_fp16, bf16")
    compile: CompileConfig = doc(CompileConfig, "torch.compile settings")
    trainer: TrainerConfig = doc(TrainerConfig, "the fixed-step training loop")
    data: DataConfig = doc(DataConfig, "fake data")
    device: str = doc("auto", "`auto` (cuda if present, else cpu), `cuda` or `cpu`", choices=DEVICES)
    profile: bool = doc(False, "record a torch.profiler trace of a few steps after warm-up")
    gpu_pool: Any = doc(
        None,
        "GPUs that concurrent jobs on one machine share, one per job at a time: `all` or a list of indices like `[0,1]` "
        "(a list, so a multirun does not sweep it); each job's worker sees only its GPU. hydra/launcher=local_gpus uses `all` unless this says otherwise; "
        "null: the worker sees what the launcher gives",
    )
    mlflow: MlflowConfig = doc(MlflowConfig, "where runs are logged")
    benchmark: BenchmarkConfig = doc(BenchmarkConfig, "paired eager baseline")
    diagnose: DiagnoseConfig = doc(DiagnoseConfig, "graph breaks, syncs, traces, FLOPs")
    sweep: SweepConfig = doc(SweepConfig, "multirun bookkeeping")


def default_store() -> str:
    """`sqlite:///<where the command runs>/outputs/mlflow.db`. A resolver of the project's own rather
    than `${hydra:runtime.cwd}`, which needs Hydra's runtime config and fails where Hydra has not set it
    (multirun callbacks, jobs on other launchers). Jobs do not change directory (hydra.job.chdir=false)."""
    from pathlib import Path

    return f"sqlite:///{(Path.cwd() / 'outputs' / 'mlflow.db').resolve()}"


OmegaConf.register_new_resolver("default_store", default_store, replace=True)


def register_configs() -> None:
    """Register the schema so `conf/config.yaml` can extend it."""
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=Config)


class ConfigError(ValueError):
    """Bad input. `str(err)` is the one line shown to the user."""

    def __init__(self, key: str, value: Any, allowed: str):
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"{key}={value!r} is not allowed: {allowed}")


def _choices(key: str, value: Any, options: tuple[str, ...], errors: list[ConfigError]) -> None:
    if value not in options:
        errors.append(ConfigError(key, value, "allowed values are " + ", ".join(options)))


def _positive(key: str, value: Any, errors: list[ConfigError], *, strict: bool = True) -> None:
    if value is None or (value <= 0 if strict else value < 0):
        errors.append(ConfigError(key, value, "must be > 0" if strict else "must be >= 0"))


def _validate_model(prefix: str, model: DictConfig, errors: list[ConfigError]) -> None:
    spec = model.input
    _choices(f"{prefix}.input.kind", spec.kind, INPUT_KINDS, errors)
    _choices(f"{prefix}.input.target", spec.target, TOKEN_TARGETS, errors)
    if spec.kind == "image":
        for k in ("channels", "height", "width", "num_classes"):
            _positive(f"{prefix}.input.{k}", spec[k], errors)
        if spec.target != "class":
            errors.append(
                ConfigError(f"{prefix}.input.target", spec.target, "image models take `class` targets")
            )
    else:
        for k in ("vocab_size", "seq_len"):
            _positive(f"{prefix}.input.{k}", spec[k], errors)
        if spec.target == "class":
            _positive(f"{prefix}.input.num_classes", spec.num_classes, errors)
    _positive(f"{prefix}.batch_size", model.batch_size, errors)


def _validate_factory(prefix: str, model: DictConfig, errors: list[ConfigError]) -> None:
    """The model exists: a timm name timm knows, an HF config that builds for this input, a factory
    that imports. (Imports the model library into this process, once.)"""
    from pipeline import known_good

    target = model["_target_"]
    if target == "models.timm_models.create":
        if not known_good.passes("timm model", model.name, lambda: _timm_model_exists(model.name)):
            import difflib

            from models import timm_models

            close = difflib.get_close_matches(str(model.name), timm_models.timm.list_models(), n=3)
            errors.append(
                ConfigError(
                    f"{prefix}.name",
                    model.name,
                    "a timm model name (timm.list_models())"
                    + (f"; close: {', '.join(close)}" if close else ""),
                )
            )
    elif target == "models.hf.create":
        settings = [model.name, OmegaConf.to_container(model.input), OmegaConf.to_container(model.kwargs)]
        if not known_good.passes("hf config", settings, lambda: _hf_config_error(*settings) is None):
            err = _hf_config_error(*settings)
            assert err is not None
            errors.append(ConfigError(prefix + err.key.removeprefix("model"), err.value, err.allowed))
    else:
        from hydra.utils import get_method

        try:
            get_method(target)
        except Exception as err:
            errors.append(
                ConfigError(
                    f"{prefix}._target_",
                    target,
                    f"a dotted path to an importable factory ({type(err).__name__}: {' '.join(str(err).split())[:200]})",
                )
            )


def _timm_model_exists(name: str) -> bool:
    from models import timm_models

    return timm_models.model_exists(name)


def _hf_config_error(name: str, input_spec: dict[str, Any], kwargs: dict[str, Any]) -> ConfigError | None:
    from models import hf

    try:
        hf.make_config(name, input_spec, **kwargs)
    except ConfigError as err:
        return err
    return None


def _validate_compile(cfg: DictConfig, errors: list[ConfigError]) -> None:
    c = cfg.compile
    _choices("compile.mode", c.mode, COMPILE_MODES, errors)
    _choices("compile.scope", c.scope, COMPILE_SCOPES, errors)
    if c.mode == "eager":
        for key, value, neutral in (
            ("fullgraph", c.fullgraph, False),
            ("dynamic", c.dynamic, None),
            ("optimizer", c.optimizer, False),
        ):
            if value != neutral:
                errors.append(
                    ConfigError(
                        f"compile.{key}",
                        value,
                        f"has no effect with compile.mode=eager (no torch.compile); leave it {neutral!r}",
                    )
                )
        if c.options:
            errors.append(
                ConfigError(
                    "compile.options",
                    dict(c.options),
                    "has no effect with compile.mode=eager; leave it empty",
                )
            )
        return
    from pipeline import known_good

    if not known_good.passes("compile.backend", c.backend, lambda: c.backend in available_backends()):
        errors.append(
            ConfigError("compile.backend", c.backend, "allowed values are " + ", ".join(available_backends()))
        )
    elif c.scope == "step" and c.fullgraph:
        errors.append(
            ConfigError(
                "compile.fullgraph",
                True,
                "not with compile.scope=step: torch breaks a training step's graph at backward() and in the optimizer "
                "(zero_grad is skipped, Optimizer.step breaks on purpose), so fullgraph=true always fails there",
            )
        )
    elif c.backend != "inductor" and c.mode != "default":
        errors.append(
            ConfigError(
                "compile.mode",
                c.mode,
                f"only `default` works with compile.backend={c.backend} (modes are inductor's)",
            )
        )


def available_backends() -> list[str]:
    """The backends torch lists (including the debug ones, such as `aot_eager`)."""
    import torch._dynamo

    return sorted(torch._dynamo.list_backends(exclude_tags=()))


def _validate_loss(cfg: DictConfig, errors: list[ConfigError]) -> None:
    loss = cfg.loss
    if loss.teacher is None:
        return
    _choices("loss.kind", loss.kind, DISTILL_KINDS, errors)
    _positive("loss.temperature", loss.temperature, errors)
    if not 0.0 <= loss.alpha <= 1.0:
        errors.append(ConfigError("loss.alpha", loss.alpha, "must be in [0, 1]"))
    _validate_model("loss.teacher", loss.teacher, errors)
    _validate_factory("loss.teacher", loss.teacher, errors)
    student, teacher = cfg.model.input, loss.teacher.input
    width = "num_classes" if student.kind == "image" or student.target == "class" else "vocab_size"
    if teacher.kind != student.kind:
        errors.append(
            ConfigError(
                "loss.teacher.input.kind",
                teacher.kind,
                f"must match the student's model.input.kind={student.kind!r}",
            )
        )
    elif teacher[width] != student[width]:
        errors.append(
            ConfigError(
                f"loss.teacher.input.{width}",
                teacher[width],
                f"must equal the student's model.input.{width}={student[width]} (logits are compared)",
            )
        )
    else:
        dims = ("channels", "height", "width") if student.kind == "image" else ("seq_len",)
        for d in dims:
            if teacher[d] != student[d]:
                errors.append(
                    ConfigError(
                        f"loss.teacher.input.{d}",
                        teacher[d],
                        f"must equal model.input.{d}={student[d]} (the teacher sees the student's batch)",
                    )
                )


def validate(cfg: DictConfig) -> None:
    """Check values and combinations; raise the first :class:`ConfigError` (all are in `.errors`)."""
    errors: list[ConfigError] = []
    t = cfg.trainer
    _positive("trainer.steps", t.steps, errors)
    _positive("trainer.warmup_steps", t.warmup_steps, errors)
    _positive("trainer.batch_size", t.batch_size, errors)
    _positive("trainer.timeout_s", t.timeout_s, errors)
    _positive("trainer.optimizer.lr", t.optimizer.lr, errors)
    if t.steps is not None and t.warmup_steps is not None and t.warmup_steps >= t.steps > 0:
        errors.append(
            ConfigError(
                "trainer.warmup_steps",
                t.warmup_steps,
                f"must be < trainer.steps={t.steps} (at least one measured step)",
            )
        )
    _choices("device", cfg.device, DEVICES, errors)
    pool = cfg.gpu_pool
    pool_ok = (
        pool is None
        or pool == "all"
        or isinstance(pool, int)
        or (OmegaConf.is_list(pool) and len(pool) > 0 and all(isinstance(i, int) and i >= 0 for i in pool))
    )
    if not pool_ok:
        errors.append(
            ConfigError(
                "gpu_pool",
                pool if not OmegaConf.is_list(pool) else list(pool),
                "`all`, or a list of GPU indices such as [0,1], or null",
            )
        )
    _positive("data.num_batches", cfg.data.num_batches, errors)
    _positive("data.num_workers", cfg.data.num_workers, errors, strict=False)
    if cfg.data.non_blocking and not cfg.data.pin_memory:
        errors.append(
            ConfigError(
                "data.non_blocking",
                True,
                "needs data.pin_memory=true (copies from pageable memory are synchronous)",
            )
        )
    p = cfg.precision
    if p.autocast_dtype is not None:
        _choices("precision.autocast_dtype", p.autocast_dtype, AUTOCAST_DTYPES, errors)
    _choices("precision.param_dtype", p.param_dtype, PARAM_DTYPES, errors)
    _validate_model("model", cfg.model, errors)
    if not errors:  # the factory check imports the model library: only for an otherwise valid model
        _validate_factory("model", cfg.model, errors)
    _validate_compile(cfg, errors)
    _validate_loss(cfg, errors)
    _positive("benchmark.rounds", cfg.benchmark.rounds, errors)
    _positive("benchmark.loss_rtol", cfg.benchmark.loss_rtol, errors)
    _positive("benchmark.parity_steps", cfg.benchmark.parity_steps, errors)
    _positive("benchmark.noisy_spread_pct", cfg.benchmark.noisy_spread_pct, errors)
    if cfg.sweep.objective is not None:
        from pipeline.measure import METRICS

        if cfg.sweep.objective not in METRICS:
            errors.append(
                ConfigError(
                    "sweep.objective",
                    cfg.sweep.objective,
                    "a metric name such as step_time_ms_p50 (the list: pipeline/measure.py METRICS)",
                )
            )
    if errors:
        first = errors[0]
        first.errors = errors  # type: ignore[attr-defined]
        raise first


def to_container(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config as plain data (what the worker receives and MLflow logs)."""
    return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)  # type: ignore[return-value]


def _schema_node(path: list[str]) -> Any:
    """The dataclass type at a dotted path of the schema, or None."""
    import typing

    node: Any = Config
    for part in path:
        if not (isinstance(node, type) and is_dataclass(node)):
            return None
        hints = typing.get_type_hints(node)
        if part not in hints:
            return None
        node = hints[part]
        args = [a for a in typing.get_args(node) if a is not type(None)]
        if args and is_dataclass(args[0]):
            node = args[0]
    return node


def _type_name(tp: Any) -> str:
    import typing

    args = typing.get_args(tp)
    if args:
        return " or ".join("null" if a is type(None) else _type_name(a) for a in args)
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def describe_compose_error(err: BaseException) -> str:
    """One line for a Hydra composition error: the key, the bad value, what is allowed."""
    from hydra.errors import MissingConfigException, OverrideParseException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

    cause = err.__cause__ or err
    if isinstance(err, MissingConfigException) and err.options is not None:
        missing = str(err.missing_cfg_file or "")
        group, _, option = missing.rpartition("/")
        return f"{group}={option} is not an option of the `{group}` group: allowed values are {', '.join(err.options)}"
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)) and getattr(cause, "full_key", None):
        path = cause.full_key.split(".")
        parent = _schema_node(path[:-1])
        allowed = (
            [f.name for f in fields(parent)] if isinstance(parent, type) and is_dataclass(parent) else []
        )
        where = ".".join(path[:-1]) or "the top level"
        return f"{cause.full_key} is not a config key: {where} has " + (
            ", ".join(allowed) if allowed else "no such key"
        )
    if isinstance(cause, ValidationError) and getattr(cause, "full_key", None):
        value = getattr(cause, "value", None)
        tp = _schema_node(cause.full_key.split("."))
        expected = _type_name(tp) if tp is not None else "another type"
        return f"{cause.full_key}={value!r} is not allowed: expected {expected}"
    if isinstance(err, OverrideParseException):
        return f"cannot parse the override: {str(err).splitlines()[0]}"
    return " ".join(str(err).split())
