"""The typed config: one dataclass per config node, each field with its help text and its allowed values
(checked by :mod:`pipeline.config.checks`); checks across fields sit in each section's `check`. Hydra
composes `conf/` over it (:func:`to_config`); the worker rebuilds it from JSON (:func:`from_dict`). No torch.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from pipeline.config.errors import ConfigError
from pipeline.config.fields import doc
from pipeline.display import first_few
from pipeline.scenarios import scenario_config
from pipeline.scenarios.base import ScenarioConfig, model_options

COMPILE_MODES = ("eager", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
COMPILE_SCOPES = ("model", "loss", "model_and_loss", "regional", "step")
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")  # the modes that run compiled code as CUDA graphs
DEVICES = ("auto", "cuda", "cpu")
INPUT_KINDS = ("image", "tokens")
AUTOCAST_DTYPES = ("bfloat16", "float16")
PARAM_DTYPES = ("float32", "bfloat16", "float16")
CPU_RANKS = 2  # parallel.nproc=null on the CPU (and what SLURM asks for): gloo processes
OPTIMIZE_DDP = ("on", "off", "compiled_autograd")
WORKER_STARTS = ("template", "spawn")
MAX_STEPS = 10_000_000  # a job's per-step series live in memory and in MLflow: beyond this, a mistake
MAX_SEED = 2**32 - 1


class _Labelled:
    """A section whose `id` labels the job's runs and tags."""

    id: str

    def check(self, at: str) -> Iterator[ConfigError]:
        if not str(self.id).strip():
            yield ConfigError(f"{at}.id", self.id, "a non-empty label (it names the job's runs and tags)")


@dataclass(kw_only=True)
class InputSpec:
    """What a model eats; fake data is generated to match it."""

    kind: str = doc("image", "`image` (B×C×H×W float) or `tokens` (B×T integer ids)", choices=INPUT_KINDS)
    channels: int = doc(3, "image channels", gt=0)
    height: int = doc(224, "image height in pixels", gt=0)
    width: int = doc(224, "image width in pixels", gt=0)
    num_classes: int = doc(1000, "classes of an image classifier (the width of its logits)", gt=0)
    vocab_size: int = doc(50257, "token vocabulary size (the width of an LM's logits)", gt=0)
    seq_len: int = doc(1024, "tokens per sequence", gt=0)
    target: str = doc(
        "class",
        "what the labels are: `class` (one per image), `next_token` (causal LM, shifted in the loss), "
        "`masked_token` (masked LM: 15% of positions labelled, the rest ignored)",
        choices=("next_token", "masked_token", "class"),
    )

    def check(self, at: str) -> Iterator[ConfigError]:
        if self.kind == "image" and self.target != "class":
            yield ConfigError(f"{at}.target", self.target, "image models take `class` targets")


@dataclass(kw_only=True)
class ModelConfig(_Labelled):
    """A model: a factory (`_target_`) called with `name` (when set) and `kwargs`."""

    id: str = doc(MISSING, "short label used in run names and tags, e.g. `vit_b16`")
    _target_: str = doc("models.timm_models.create", "dotted path of the factory that builds the model")
    name: str | None = doc(
        None, "the library's model name (timm name, HF config class), passed to the factory"
    )
    kwargs: dict[str, Any] = doc({}, "extra keyword arguments of the factory (timm kwargs, HF config fields)")
    input: InputSpec = doc(InputSpec, "the input spec; data generation follows it")
    batch_size: int = doc(64, "this model's default batch size (`trainer.batch_size` defaults to it)", gt=0)
    scenarios: list[str] = doc(
        [],
        "the scenarios this model runs (conf/scenario names); empty: every scenario that does not ask models "
        "to opt in (causal LMs list the generation scenario)",
    )


@dataclass(kw_only=True)
class LossConfig(_Labelled):
    """One interface for every loss: `loss(batch, outputs) -> scalar tensor`."""

    id: str = doc(MISSING, "short label used in run names and tags")
    _target_: str = doc("losses.cross_entropy.CrossEntropy", "dotted path of the loss module's class")
    kind: str = doc(
        "mse", "distillation only: `mse` (student vs teacher logits) or `kl`", choices=("mse", "kl")
    )
    temperature: float = doc(2.0, "distillation `kl` only: softmax temperature", gt=0)
    alpha: float = doc(
        0.5, "distillation `kl` only: weight of the KL term; 1-alpha goes to hard-label CE", within=(0.0, 1.0)
    )
    teacher: ModelConfig | None = doc(None, "distillation only: the teacher model config (any model config)")


@dataclass(kw_only=True)
class PrecisionConfig(_Labelled):
    id: str = doc(MISSING, "short label used in run names and tags")
    autocast_dtype: str | None = doc(None, "autocast dtype, or null for no autocast", choices=AUTOCAST_DTYPES)
    param_dtype: str = doc("float32", "dtype of weights and inputs", choices=PARAM_DTYPES)
    tf32: bool = doc(False, "allow TF32 for float32 matmuls and convolutions")
    grad_scaler: bool = doc(False, "scale the loss with a GradScaler (needed for float16 autocast)")
    float8: bool = doc(
        False,
        "train the linear layers in float8 through torchao (`convert_to_float8_training`; layers whose sizes are multiples of 16): "
        "`precision=fp8`, training on Hopper-class GPUs (compute capability 8.9 or newer) with torchao installed; refused elsewhere before the job starts",
    )


@dataclass(kw_only=True)
class CompileConfig:
    mode: str = doc(
        "default", "`eager` means no torch.compile; the rest are torch.compile modes", choices=COMPILE_MODES
    )
    backend: str = doc("inductor", "a torch.compile backend, checked against `torch._dynamo.list_backends()`")
    fullgraph: bool = doc(False, "fail on any graph break")
    dynamic: bool | None = doc(None, "dynamic shapes: null lets torch decide, true/false force it")
    options: dict[str, Any] = doc(
        {},
        "inductor options (`torch._inductor.config` keys, checked before the job starts), merged over the mode's options; "
        "`compile.options={max_autotune: true}` or `+compile.options.max_autotune=true`",
    )
    scope: str = doc("model", "what is compiled", choices=COMPILE_SCOPES)
    optimizer: bool = doc(False, "also compile `optimizer.step`")
    budget_s: float | None = doc(
        None,
        "compile-time budget: a job whose `compile/total_s` exceeds it ends FAILED (`OverCompileBudget`, its figures kept), "
        "so a search records the trial as failed; null: no budget (`trainer.timeout_s` still bounds the whole job)",
        gt=0,
    )

    @property
    def compiled(self) -> bool:
        return self.mode != "eager"

    @property
    def uses_cudagraphs(self) -> bool:
        """Whether the compiled code runs as CUDA graphs (by its mode, or `triton.cudagraphs` on)."""
        return self.compiled and (
            self.mode in CUDAGRAPH_MODES or bool(self.inductor_options().get("triton.cudagraphs"))
        )

    def inductor_options(self) -> dict[str, Any]:
        """The options with nested keys joined by dots, as torch takes them (`triton.cudagraphs`)."""
        return dotted(self.options)

    def as_eager(self) -> CompileConfig:
        """These settings with compilation off (the paired eager baseline)."""
        return dataclasses.replace(self, mode="eager", optimizer=False)

    def check(self, at: str) -> Iterator[ConfigError]:
        if not self.compiled:
            for key, neutral in (("fullgraph", False), ("dynamic", None), ("optimizer", False)):
                if getattr(self, key) != neutral:
                    yield ConfigError(
                        f"{at}.{key}",
                        getattr(self, key),
                        f"has no effect with compile.mode=eager (no torch.compile); leave it {neutral!r}",
                    )
            if self.options:
                yield ConfigError(
                    f"{at}.options",
                    dict(self.options),
                    "has no effect with compile.mode=eager; leave it empty",
                )
        elif self.scope == "step" and self.fullgraph:
            yield ConfigError(
                f"{at}.fullgraph",
                True,
                "not with compile.scope=step: torch breaks a training step's graph at backward() and in the optimizer "
                "(zero_grad is skipped, Optimizer.step breaks on purpose), so fullgraph=true always fails there",
            )
        elif self.backend != "inductor" and self.mode != "default":
            yield ConfigError(
                f"{at}.mode",
                self.mode,
                f"only `default` works with compile.backend={self.backend} (modes are inductor's)",
            )
        if self.compiled and self.options and self.backend != "inductor":
            yield ConfigError(
                f"{at}.options",
                dict(self.options),
                f"only the inductor backend takes options: compile.backend={self.backend} would ignore them",
            )


def dotted(options: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings flattened to dotted keys; an empty mapping stays a value."""
    flat: dict[str, Any] = {}
    for key, value in options.items():
        if isinstance(value, dict) and value:
            flat.update(dotted(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


@dataclass(kw_only=True)
class OptimizerConfig:
    _target_: str = doc("torch.optim.Adam", "optimizer class (Adam, as in the seed loop)")
    lr: float = doc(1e-3, "learning rate", gt=0)
    fused: bool | None = doc(None, "use the fused kernels (CUDA); null leaves torch's default")
    foreach: bool | None = doc(None, "use the foreach kernels; null leaves torch's default")
    kwargs: dict[str, Any] = doc({}, "other optimizer arguments (betas, weight_decay, ...)")


@dataclass(kw_only=True)
class TrainerConfig:
    steps: int = doc(
        100,
        "steps each variant runs at least, warm-up included; a job then measures on in rounds until its question "
        "is decided or benchmark.budget_s is spent (benchmark.budget_s=0: about this many)",
        gt=0,
    )
    warmup_steps: int = doc(10, "steps run before timing starts (compilation happens here)", gt=0)
    batch_size: int = doc("${model.batch_size}", "samples per step; defaults to the model's batch size", gt=0)  # type: ignore[arg-type]
    timeout_s: float = doc(3600.0, "the worker is killed after this many seconds (status KILLED)", gt=0)
    seed: int = doc(0, "seed for weights and fake data")
    optimizer: OptimizerConfig = doc(OptimizerConfig, "the optimizer")

    @property
    def measured_steps(self) -> int:
        return self.steps - self.warmup_steps

    def check(self, at: str) -> Iterator[ConfigError]:
        if self.warmup_steps >= self.steps > 0:
            yield ConfigError(
                f"{at}.warmup_steps",
                self.warmup_steps,
                f"must be < trainer.steps={self.steps} (at least one measured step)",
            )
        if self.steps > MAX_STEPS:
            yield ConfigError(
                f"{at}.steps",
                self.steps,
                f"must be <= {MAX_STEPS:,} (every step's time and loss are kept in memory and logged: "
                "a job this long never ends within trainer.timeout_s)",
            )
        if not 0 <= self.seed <= MAX_SEED:
            yield ConfigError(
                f"{at}.seed",
                self.seed,
                f"must be in [0, {MAX_SEED}] (torch's and the data's generators take 32-bit seeds)",
            )


@dataclass(kw_only=True)
class DataConfig:
    loader: bool = doc(
        False,
        "false: batches made once on the device and rotated; true: a DataLoader makes CPU batches copied every step",
    )
    num_batches: int = doc(4, "distinct on-device batches rotated among (loader=false)", gt=0)
    num_workers: int = doc(4, "DataLoader workers (loader=true)", ge=0)
    pin_memory: bool = doc(False, "pin host batches (loader=true)")
    non_blocking: bool = doc(False, "asynchronous host-to-device copies (loader=true, needs pin_memory)")

    def check(self, at: str) -> Iterator[ConfigError]:
        if self.non_blocking and not self.pin_memory:
            yield ConfigError(
                f"{at}.non_blocking",
                True,
                "needs data.pin_memory=true (copies from pageable memory are synchronous)",
            )


DEFAULT_EXPERIMENT = "compile-sweeps"


@dataclass(kw_only=True)
class MlflowConfig:
    tracking_uri: str = doc(
        "${oc.env:MLFLOW_TRACKING_URI,${default_store:}}",
        "tracking URI; `MLFLOW_TRACKING_URI` wins; default `sqlite:///<cwd>/outputs/mlflow.db` (absolute path)",
    )
    experiment: str = doc(DEFAULT_EXPERIMENT, "MLflow experiment name")
    artifact_location: str | None = doc(
        None,
        "artifact root for a new experiment; null: outputs/mlartifacts beside a sqlite store, the server's default otherwise",
    )

    def check(self, at: str) -> Iterator[ConfigError]:
        """A plain path (MLflow's file store) would fail once the worker started: refused up front."""
        uri = self.tracking_uri
        if ("://" in uri and not uri.startswith("file:")) or uri.startswith("databricks"):
            return
        path = Path(uri.removeprefix("file://").removeprefix("file:")).expanduser().resolve()
        store = path if path.suffix == ".db" else path / "mlflow.db"
        yield ConfigError(
            f"{at}.tracking_uri",
            uri,
            "a plain path is MLflow's file store, which MLflow 3 keeps in maintenance mode: use a sqlite file "
            f"(mlflow.tracking_uri=sqlite:///{store}) or a server (http://host:port, `make mlflow-server`)",
        )


@dataclass(kw_only=True)
class BenchmarkConfig:
    paired_eager: bool = doc(
        True, "also measure eager in the same worker, interleaved in rounds, for `speedup/vs_eager`"
    )
    rounds: int = doc(
        10,
        "timed rounds per variant at least before the first look (more when trainer.steps asks for more steps); "
        "paired variants alternate round by round (C E | E C | ...)",
        gt=0,
    )
    round_s: float = doc(
        0.02,
        "seconds a timed round aims at (the units in it sized from the warm-up; at least one): paired rounds shorter "
        "than the spells of the host's speed (50-100 ms on the lent VMs) see the same host (docs/verdicts.md)",
        gt=0,
    )
    budget_s: float = doc(
        30.0,
        "seconds of timed rounds a job may spend answering its question (the paired speedup clear of or within "
        "sweep.min_effect_pct, its interval within benchmark.target_pct; a lone figure's interval within "
        "benchmark.target_pct); then it says `undecided within budget`, or with its direction known `faster but imprecise "
        "within budget` (a lone figure: `imprecise within budget`). 0: one look after the first rounds",
        ge=0,
    )
    target_pct: float = doc(
        1.0,
        "precise enough: an interval's half-width in % of its figure (the paired speedup's, or a lone figure's) "
        "at which a job may stop measuring",
        gt=0,
    )
    loss_rtol: float = doc(
        0.05,
        "loss parity tolerance: max relative gap between compiled and eager losses over the first `parity_steps`",
        gt=0,
    )
    parity_steps: int = doc(
        3,
        "steps over which loss parity is judged (later steps on rotated random batches diverge chaotically,"
        " at amp within a few steps)",
        gt=0,
    )
    repeat: int = doc(
        0,
        "repeat index of this configuration: sweep `benchmark.repeat=0,1,2` to measure it in three separate jobs; the verdict pools repeats",
        ge=0,
    )
    worker_start: str = doc(
        "template",
        "how a sweep's job starts its worker: `template` forks it from the sweep's pre-imported template process "
        "(one per machine; imports done, no CUDA, no compiler state), `spawn` starts a fresh interpreter. "
        "A single run spawns (unless PIPELINE_TEMPLATE_SOCKET names a running template, as the test suite's); a job that cannot fork "
        "(SLURM task, no Linux, a template that touched CUDA) spawns and says why",
        choices=WORKER_STARTS,
    )
    overlap: bool = doc(
        False,
        "compile the next job while this one measures: two jobs share a GPU (hydra/launcher=local_gpus), one "
        "compiling, one measuring, each pinned to its own half of the CPU cores; a machine-wide lock lets one job "
        "at a time run anything on the device after its compilation, the other job's worker and its compile processes "
        "paused meanwhile (pipeline/measure/gate.py). One-GPU jobs only",
    )
    overlap_jobs: int = doc(
        2,
        "with benchmark.overlap, how many jobs share one GPU: one measures while the others compile, each on its own "
        "1/N of the CPU cores; more slots keep the GPU busy when compiling takes several times longer than measuring",
        ge=2,
    )
    noisy_spread_pct: float = doc(
        10.0,
        "flag a job as noisy (`step/noisy`, a warning in its last line) when the p10-p90 spread of its measured steps exceeds this percentage of the median",
        gt=0,
    )
    host_check_s: float = doc(
        0.3,
        "seconds of a torch-free reference workload timed in all, in bursts before each timed round (outside its time): "
        "how far the host's own CPU speed moved while the job measured (`host/reference_spread_pct`; a launch-bound step "
        "follows it). 0: off",
        ge=0,
    )


@dataclass(kw_only=True)
class DiagnoseConfig:
    explain: bool = doc(False, "run torch._dynamo.explain before training and log its report")
    trace: bool = doc(False, "record the compiler's structured trace (TORCH_TRACE) and tlparse's report")
    sync_check: bool = doc(True, "count host-device syncs during one extra step after measuring (CUDA only)")
    flops: bool = doc(True, "count FLOPs of one step with torch.utils.flop_counter, for MFU")
    cache_dir: str | None = doc(None, "inductor cache dir; null: shared per sweep under outputs/")
    cold_cache: bool = doc(False, "start from an empty inductor cache (cold-start compile time)")
    comm: bool = doc(
        True,
        "distributed jobs: profile a few extra steps after measuring for the exposed communication and the "
        "collectives' bus bandwidth (comm/*), against the machine's own from a probe run once per machine",
    )


@dataclass(kw_only=True)
class SweepConfig:
    id: str | None = doc(None, "sweep id (tag `sweep_id`); null: made up at multirun start")
    resume: bool = doc(False, "skip jobs whose configuration already has a FINISHED run in sweep `sweep.id`")
    name: str | None = doc(None, "name of the named sweep file used, if any")
    min_effect_pct: float = doc(
        1.0,
        "the smallest difference the verdict calls a difference: configurations closer than this are a tie, however precise the figures",
        gt=0,
    )
    max_interval_pct: float = doc(
        2.5,
        "unused, accepted so that older commands still compose: an interval honest for the noise decides however wide "
        "it is (docs/verdicts.md)",
        gt=0,
    )
    kind: str = doc(
        "compare",
        "`compare`: the summary ranks the configurations (fastest, tie or inconclusive); `suite`: one compile "
        "configuration over many models, answered per model (compiled against its own eager copy: faster, slower, "
        "no difference, inconclusive, failed) with no model ranked against another (sweep=timm_suite, hf_suite, tiny_suite)",
        choices=("compare", "suite"),
    )
    objective: str | None = doc(
        None,
        "a metric the job returns to a search sweeper (sweep=compile_search, sweep=throughput_search: Optuna), e.g. step/p50_ms or throughput/samples_per_s; a job that fails returns its outcome: a failed trial",
    )

    def check(self, at: str) -> Iterator[ConfigError]:
        from pipeline.measure.registry import METRICS  # torch-free

        if self.objective is not None and (
            self.objective not in METRICS or METRICS[self.objective].better is None
        ):
            yield ConfigError(
                f"{at}.objective",
                self.objective,
                "a metric with a better side, such as step/p50_ms or throughput/samples_per_s (the list: "
                "pipeline/measure/registry.py METRICS, those declared lower() or higher())",
            )


@dataclass(kw_only=True)
class ParallelConfig:
    """One job on `nproc` processes of one node (torchrun); `trainer.batch_size` is per process."""

    strategy: str = doc(
        "none",
        "`none` (one device, no process group), `ddp` (DistributedDataParallel), `fsdp` (FSDP2 `fully_shard` "
        "per repeated block, then the root)",
        choices=("none", "ddp", "fsdp"),
    )
    nproc: int | None = doc(
        1,
        "processes (GPUs) per job, started by torchrun; ddp/fsdp only. null (parallel=ddp/fsdp's default): one per "
        "GPU the job may use (gpu_pool's under hydra/launcher=local_gpus, else CUDA_VISIBLE_DEVICES or NVML's "
        f"count), {CPU_RANKS} gloo processes on the CPU; resolved before the job starts, its run shows the number",
        ge=1,
    )
    bucket_cap_mb: float = doc(
        25.0, "ddp: gradient bucket size in MiB (DDPOptimizer splits graphs at buckets)", gt=0
    )
    optimize_ddp: str = doc(
        "on",
        "ddp with torch.compile: `on` (torch._dynamo.config.optimize_ddp: graphs split at bucket boundaries so "
        "all-reduce overlaps backward), `off` (one graph, buckets reduced after it), `compiled_autograd` "
        "(optimize_ddp=python_reducer with compiled autograd: backward traced whole, the reducer in Python)",
        choices=OPTIMIZE_DDP,
    )
    reshard_after_forward: bool = doc(
        True, "fsdp: free the gathered parameters after forward (gathered again for backward)"
    )
    param_dtype: str | None = doc(
        None,
        "fsdp: MixedPrecisionPolicy param_dtype (compute dtype of gathered weights); null: the weights' dtype",
        choices=PARAM_DTYPES,
    )
    reduce_dtype: str | None = doc(
        None,
        "fsdp: MixedPrecisionPolicy reduce_dtype (gradient reduce-scatter dtype); null: param_dtype",
        choices=PARAM_DTYPES,
    )

    @property
    def distributed(self) -> bool:
        return self.strategy != "none"

    def check(self, at: str) -> Iterator[ConfigError]:
        if not self.distributed and self.nproc not in (1, None):
            yield ConfigError(
                f"{at}.nproc",
                self.nproc,
                "needs parallel=ddp or parallel=fsdp (parallel=none runs one process)",
            )
        only = dict.fromkeys(("bucket_cap_mb", "optimize_ddp"), "ddp")
        only |= dict.fromkeys(("reshard_after_forward", "param_dtype", "reduce_dtype"), "fsdp")
        for f in fields(self):  # each left at its default unless its strategy is chosen
            value = getattr(self, f.name)
            if f.name in only and self.strategy != only[f.name] and value != f.default:
                yield ConfigError(
                    f"{at}.{f.name}", value, f"only with parallel={only[f.name]}; leave it {f.default!r}"
                )


@dataclass(kw_only=True)
class Config:
    model: ModelConfig = doc(MISSING, "model group: vit_b16, vit_tiny, resnet50, gpt2, ...")
    loss: LossConfig = doc(MISSING, "loss group: cross_entropy, distillation")
    precision: PrecisionConfig = doc(MISSING, "precision group: amp, fp32, tf32, amp_fp16, bf16")
    scenario: Any = doc(
        {},
        "the scenario group (conf/scenario/): what a job runs and measures; its keys are the scenario's own "
        "(pipeline/scenarios/<name>/config.py)",
    )
    compile: CompileConfig = doc(CompileConfig, "torch.compile settings")
    parallel: ParallelConfig = doc(
        ParallelConfig, "parallel group: none, ddp, fsdp (processes per job, DDP/FSDP2 knobs)"
    )
    trainer: TrainerConfig = doc(TrainerConfig, "the fixed-step training loop")
    data: DataConfig = doc(DataConfig, "fake data")
    device: str = doc("auto", "`auto` (cuda if present, else cpu), `cuda` or `cpu`", choices=DEVICES)
    profile: bool = doc(False, "record a torch.profiler trace of a few steps after warm-up")
    verbose: bool = doc(
        False,
        "show the libraries' own chatter on the job's output (inductor's perf hints, deprecation and future "
        "warnings); false: they are kept in the job's diagnostics.json, its output shows the job's own lines",
    )
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

    def __post_init__(self) -> None:
        if not isinstance(self.scenario, ScenarioConfig):
            self.scenario = scenario_config(self.scenario)

    @property
    def paired(self) -> bool:
        """Whether the worker also measures an eager copy (a compiled job with the paired baseline on)."""
        return self.compile.compiled and self.benchmark.paired_eager

    def check(self, at: str) -> Iterator[ConfigError]:
        pool = self.gpu_pool
        if not (
            pool is None
            or pool == "all"
            or (isinstance(pool, int) and not isinstance(pool, bool))
            or (isinstance(pool, list) and pool and all(isinstance(i, int) and i >= 0 for i in pool))
        ):
            yield ConfigError("gpu_pool", pool, "`all`, or a list of GPU indices such as [0,1], or null")
        if self.loss.teacher is not None:
            yield from _teacher_fits_student(self.model.input, self.loss.teacher.input)
        yield from self.scenario.fits(self)
        yield from _parallel_fits(self)
        if self.benchmark.overlap and self.parallel.distributed:
            yield ConfigError(
                "benchmark.overlap",
                True,
                "false with parallel=ddp/fsdp: overlap shares one GPU between two one-GPU jobs",
            )
        if self.compile.optimizer and self.trainer.optimizer.fused:
            yield ConfigError(
                "compile.optimizer",
                True,
                "false with trainer.optimizer.fused=true: torch.compile does not trace Adam's fused kernel (torch "
                "disables it: graph breaks, and the step runs eagerly as with compile.optimizer=false); for a compiled "
                "optimizer step set trainer.optimizer.fused=false (the foreach kernels)",
            )


def _parallel_fits(cfg: Config) -> Iterator[ConfigError]:
    """What a distributed job can run: training only, and the compile settings DDP/FSDP2 take."""
    par = cfg.parallel
    if not par.distributed:
        return
    if isinstance(cfg.gpu_pool, list) and par.nproc is not None and par.nproc > len(cfg.gpu_pool):
        yield ConfigError(
            "parallel.nproc",
            par.nproc,
            f"at most the {len(cfg.gpu_pool)} GPU(s) of gpu_pool={cfg.gpu_pool} (one per rank)",
        )
    if par.optimize_ddp != "on" and not cfg.compile.compiled:
        yield ConfigError(
            "parallel.optimize_ddp", par.optimize_ddp, "has no effect with compile.mode=eager; leave it `on`"
        )
    if par.strategy == "ddp" and par.optimize_ddp == "on" and cfg.compile.compiled and par.bucket_cap_mb < 1:
        yield ConfigError(
            "parallel.bucket_cap_mb",
            par.bucket_cap_mb,
            ">= 1 with parallel.optimize_ddp=on: DDPOptimizer asserts that DDP's first bucket (1 MiB) is no larger "
            "than the others; or parallel.optimize_ddp=off",
        )
    if par.optimize_ddp == "compiled_autograd" and cfg.compile.compiled and cfg.compile.scope != "step":
        yield ConfigError(
            "parallel.optimize_ddp",
            par.optimize_ddp,
            "needs compile.scope=step: compiled autograd traces a backward() called inside the compiled function",
        )
    if cfg.compile.uses_cudagraphs:
        by_mode = cfg.compile.mode in CUDAGRAPH_MODES
        yield ConfigError(
            "compile.mode" if by_mode else "compile.options.triton.cudagraphs",
            cfg.compile.mode if by_mode else True,
            f"not with parallel={par.strategy}: CUDA graphs with DDP's hooks are known broken "
            "(pytorch/pytorch#140395: DDP + max-autotune broken since 2.5; #113809: DDP + cudagraph trees); "
            + ("use default or max-autotune-no-cudagraphs" if by_mode else "leave triton.cudagraphs off"),
        )
    if par.strategy == "fsdp" and cfg.precision.grad_scaler:
        yield ConfigError(
            "precision.grad_scaler",
            True,
            "not with parallel=fsdp (sharded gradients need a sharded scaler): precision=amp (bf16)",
        )


def _teacher_fits_student(student: InputSpec, teacher: InputSpec) -> Iterator[ConfigError]:
    if (mismatch := _input_mismatch(student, teacher)) is not None:
        key, value, why = mismatch
        fit = [name for name, spec in _model_inputs().items() if _input_mismatch(student, spec) is None]
        some = first_few(fit, most=5) if fit else "none in conf/model/"
        yield ConfigError(
            f"loss.teacher.input.{key}", value, f"{why}; teachers that fit (model@loss.teacher=): {some}"
        )


def _input_mismatch(student: InputSpec, teacher: InputSpec) -> tuple[str, Any, str] | None:
    """The first input key on which a teacher cannot eat the student's batch, with its value and why."""
    width = "num_classes" if student.kind == "image" or student.target == "class" else "vocab_size"
    if teacher.kind != student.kind:
        return "kind", teacher.kind, f"must match the student's model.input.kind={student.kind!r}"
    if getattr(teacher, width) != getattr(student, width):
        logits = (
            f"must equal the student's model.input.{width}={getattr(student, width)} (logits are compared)"
        )
        return width, getattr(teacher, width), logits
    for dim in ("channels", "height", "width") if student.kind == "image" else ("seq_len",):
        if getattr(teacher, dim) != getattr(student, dim):
            batch = (
                f"must equal model.input.{dim}={getattr(student, dim)} (the teacher sees the student's batch)"
            )
            return dim, getattr(teacher, dim), batch
    return None


def _model_inputs() -> dict[str, InputSpec]:
    """The `model` group's options by the input each file declares."""
    known = {f.name for f in dataclasses.fields(InputSpec)}
    return {
        name: InputSpec(**{k: v for k, v in node["input"].items() if k in known})
        for name, node in model_options().items()
        if isinstance(node.get("input"), dict)
    }


# ------------------------------------------------------------------------------------ composing
def default_store() -> str:
    """`sqlite:///<cwd>/outputs/mlflow.db`; `${hydra:runtime.cwd}` fails where Hydra has not set it."""
    return f"sqlite:///{(Path.cwd() / 'outputs' / 'mlflow.db').resolve()}"


OmegaConf.register_new_resolver("default_store", default_store, replace=True)


# Free-form mappings: `key={a: 1}` on the command line sets keys Hydra's struct mode would refuse as
# "not a config key" (the `+key.a=1` form needs no help).
OPEN_MAPPINGS = ("compile.options", "trainer.optimizer.kwargs", "scenario")


def register_configs() -> None:
    """Register the schema so `conf/config.yaml` can extend it."""
    node = OmegaConf.structured(Config)
    for key in OPEN_MAPPINGS:
        OmegaConf.set_struct(OmegaConf.select(node, key), False)
    ConfigStore.instance().store(name="base_config", node=node)


def unknown_keys(node: Any, cls: type = Config, at: str = "") -> list[ConfigError]:
    """Keys a `+key=value` added that the schema lacks (to_config would drop them silently), and schema
    keys removed with `~`; mappings and open fields (`scenario`, `gpu_pool`) take any key."""
    import difflib

    if not isinstance(node, DictConfig) or node._is_none() or node._is_missing():
        return []
    hints = typing.get_type_hints(cls)
    names = [f.name for f in fields(cls)]
    prefix = f"{at}." if at else ""
    removed = "cannot be removed (~): the schema needs it; set its values instead"
    errors = [ConfigError(f"{prefix}{name}", None, removed) for name in names if name not in node]
    for key in node:
        if key not in hints:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
            known = ", ".join(n for n in names if not n.startswith("_"))
            allowed = f"not a config key{hint}; {at or 'the top level'} has {known}"
            errors.append(ConfigError(f"{prefix}{key}", _raw(node, key), allowed))
        elif (sub := _dataclass_in(hints[key])) is not None:
            errors += unknown_keys(node._get_node(key), sub, f"{prefix}{key}")
    return errors


def _raw(node: DictConfig, key: Any) -> Any:
    """A key's value as written (interpolations unresolved), for the error line."""
    try:
        child = node._get_node(key)
        return OmegaConf.to_container(child) if isinstance(child, DictConfig) else child._value()  # type: ignore[union-attr]
    except Exception:
        return "?"


def to_config(cfg: DictConfig) -> Config:
    """The composed config as a :class:`Config` object, interpolations resolved."""
    return typing.cast(Config, OmegaConf.to_object(cfg))


def to_dict(cfg: Config) -> dict[str, Any]:
    """Plain data (what the worker receives as JSON and MLflow logs as params)."""
    return dataclasses.asdict(cfg)


def from_dict(data: dict[str, Any], cls: type = Config) -> Any:
    """Rebuild a config object from :func:`to_dict`'s output (the worker, `--sync`, `--results`)."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in (f for f in fields(cls) if f.name in data):
        value, node = data[f.name], _dataclass_in(hints[f.name])
        values[f.name] = from_dict(value, node) if node is not None and isinstance(value, dict) else value
    return cls(**values)


def _dataclass_in(tp: Any) -> type | None:
    """The dataclass of a field typed `X` or `X | None`, else None."""
    return next((a for a in (tp, *typing.get_args(tp)) if isinstance(a, type) and is_dataclass(a)), None)


def schema_node(path: list[str]) -> Any:
    """The type at a dotted path of the schema (a dataclass, or a field's type), or None."""
    node: Any = Config
    for part in path:
        hints = typing.get_type_hints(node) if isinstance(node, type) and is_dataclass(node) else {}
        if part not in hints:
            return None
        node = _dataclass_in(hints[part]) or hints[part]
    return node
