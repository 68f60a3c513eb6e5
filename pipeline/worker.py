"""The worker: a fresh Python process that turns one resolved config into one result file.

    python -m pipeline.worker --config job_config.json --result result.json

It never talks to MLflow (its parent does, so a crash here is still recorded). It reports progress as
`@@progress {json}` lines on stdout and writes the result file at the end, failed or not.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

STARTED_AT = time.time()  # the interpreter reached this module (spawn + interpreter start are before it)
PROGRESS_PREFIX = "@@progress "


class Timeline:
    """Seconds spent in each phase of the worker, for the job-cost breakdown (result.info["timeline"])."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.last = time.time()

    def mark(self, phase: str) -> None:
        now = time.time()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self.last
        self.last = now


class Progress:
    """Progress lines for the parent, at most a few per second."""

    def __init__(self, min_interval_s: float = 0.25):
        self.min_interval_s, self.last = min_interval_s, 0.0

    def __call__(self, variant: str, phase: str, done: int, total: int, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= self.min_interval_s or done == total:
            self.last = now
            print(
                PROGRESS_PREFIX
                + json.dumps({"variant": variant, "phase": phase, "done": done, "total": total}),
                flush=True,
            )


def resolve_device(name: str) -> Any:
    import torch

    from pipeline.schema import ConfigError

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                "device",
                name,
                "no CUDA device is visible to this worker (torch.cuda.is_available() is False); use device=cpu or auto",
            )
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device(name)


def classify_error(exc: BaseException, cfg: dict[str, Any]) -> tuple[str, str]:
    """(error_type, message) for a failure inside the worker."""
    import torch

    from pipeline.schema import ConfigError

    if isinstance(exc, ConfigError):
        return "ConfigError", str(exc)
    if isinstance(exc, torch.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)
    ):
        return "OutOfMemoryError", str(exc)  # a CUDA OOM, or the CPU allocator refusing
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    if (
        module.startswith("torch._dynamo")
        and cfg["compile"]["fullgraph"]
        and name in ("Unsupported", "UserError", "UncapturedHigherOrderOpError")
    ):
        return "GraphBreakInFullgraph", f"compile.fullgraph=true but Dynamo hit a graph break: {exc}"
    if module.startswith(("torch._dynamo", "torch._inductor")):
        return f"CompileError.{name}", str(exc)
    return name, str(exc)


class JobRunner:
    """One job inside the worker: build from the config, warm up, measure, diagnose, fill the result.

    Order (paired mode): eager memory probe alone (then freed) -> compiled warm-up and round 1 alone ->
    eager copy warm-up -> rounds E1 C2 E2 C3 E3 ... Every memory figure comes from a phase where its
    variant is alone on the device; the timing rounds alternate so drift hits both variants alike.
    Diagnostics that run steps (syncs, profile) come after the measurement.
    """

    def __init__(
        self, cfg: dict[str, Any], result: Any, progress: Progress, out_dir: Path, timeline: Timeline
    ):
        from pipeline import measure
        from pipeline.precision import Precision

        self.cfg, self.result, self.progress, self.out_dir = cfg, result, progress, out_dir
        trainer, compile_cfg = cfg["trainer"], cfg["compile"]
        self.device = resolve_device(cfg["device"])
        self.compiled = compile_cfg["mode"] != "eager"
        self.paired = self.compiled and bool(cfg["benchmark"]["paired_eager"])
        self.warmup, self.measured = trainer["warmup_steps"], trainer["steps"] - trainer["warmup_steps"]
        self.rounds = measure.split_rounds(self.measured, cfg["benchmark"]["rounds"] if self.paired else 1)
        self.every = max(1, self.measured // 50)
        self.spec, self.batch_size = cfg["model"]["input"], trainer["batch_size"]
        self.precision = Precision.from_config(cfg["precision"])
        self.memory = measure.Memory(self.device)
        self.timeline = timeline
        timeline.mark("imports")

    # ----------------------------------------------------------------------------- phases
    def run(self) -> None:
        import torch

        from pipeline import measure
        from pipeline.diagnose import CompileLogRecorder

        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        info = self.result.info
        info["worker_pid"] = os.getpid()
        info["precision_flags"] = self.precision.apply_backend_flags()
        info["rounds"] = self.rounds
        self.result.environment = measure.environment(self.device)
        self.result.method = measure.describe_method(
            self.device, self.warmup, self.measured, len(self.rounds), self.paired, self.cfg["data"]["loader"]
        )
        measure.init_device_libraries(self.device)
        self.timeline.mark("device_init")
        self.import_model_library()
        self.timeline.mark("model_library")
        with CompileLogRecorder() as recorder:
            self.build()
            self.timeline.mark("build")
            self.count_flops()
            self.timeline.mark("flops")
            if self.cfg["diagnose"]["explain"]:
                self.explain(recorder)
                self.timeline.mark("explain")
            self.measure()
            self.timeline.mark("variants_warmup_and_rounds")
        self.collect_metrics(recorder)
        self.diagnose_steps()
        self.timeline.mark("diagnostics")
        self.progress(self.main.name, "done", 1, 1, force=True)

    def build(self) -> None:
        import torch

        from losses import build_loss

        torch.manual_seed(self.cfg["trainer"]["seed"] + 1)
        with torch.device(self.device):  # a teacher is built and initialized on the device
            self.loss = build_loss(self.cfg["loss"], self.spec).to(dtype=self.precision.param_dtype).train()

    def import_model_library(self) -> None:
        """Import the model's factory (and its library: timm, transformers) on its own, so the job-cost
        breakdown shows it apart from building the model."""
        from hydra.utils import get_method

        from models import ensure_torchvision_importable

        ensure_torchvision_importable()
        get_method(self.cfg["model"]["_target_"])

    def fresh_model(self) -> Any:
        """The model, built and initialized on the device from the job's seed: every call gives the
        same initial weights, so paired variants start equal, and nothing is initialized on the host."""
        import torch

        from models import build_model

        torch.manual_seed(self.cfg["trainer"]["seed"])
        with torch.device(self.device):
            model = build_model(self.cfg["model"])
        self.result.info["parameters"] = sum(p.numel() for p in model.parameters())
        return model

    def make_variant(self, name: str, net: Any, compile_settings: dict[str, Any]) -> Any:
        import torch

        from pipeline import measure
        from pipeline.compile import apply_compile, needs_tensor_lr
        from pipeline.data import make_batches
        from pipeline.train import TrainParts, build_optimizer

        trainer, device, precision = self.cfg["trainer"], self.device, self.precision
        net = net.to(device=device, dtype=precision.param_dtype).train()
        optimizer = build_optimizer(
            net.parameters(), trainer["optimizer"], tensor_lr=needs_tensor_lr(compile_settings), device=device
        )
        parts = TrainParts(net, self.loss, optimizer, precision.make_scaler(device.type), precision, device)
        started = time.perf_counter()
        built = apply_compile(compile_settings, parts)
        setup_s = time.perf_counter() - started
        if compile_settings is self.cfg["compile"]:
            self.result.info.update(
                {
                    "compiled": built.description,
                    "compile_kwargs": built.kwargs or {},
                    "compiled_regions": built.regions,
                }
            )
            self.forward_loss = built.forward_loss
        batches = make_batches(
            self.cfg["data"], self.spec, self.batch_size, device, precision.input_dtype, trainer["seed"]
        )
        losses = torch.zeros(trainer["steps"], device=device, dtype=torch.float32)
        return measure.Variant(name, built.step, batches, losses, setup_s=setup_s)

    def measure(self) -> None:
        from pipeline import measure

        eager_settings = {**self.cfg["compile"], "mode": "eager", "optimizer": False}
        self.probe = self.eager = None
        if self.paired:
            baseline = self.memory.allocated()
            self.probe = self.make_variant("eager", self.fresh_model(), eager_settings)
            measure.solo_phase(
                self.probe, self.memory, self.warmup, self.rounds[0], self.device, measure.quiet, self.every
            )
            self.result.info["eager_probe_leak_bytes"] = measure.release(self.probe, self.memory, baseline)
        model = self.fresh_model()
        self.main = self.make_variant("compiled" if self.compiled else "eager", model, self.cfg["compile"])
        measure.solo_phase(
            self.main,
            self.memory,
            self.warmup,
            self.rounds[0],
            self.device,
            self.progress,
            self.every,
            total=self.measured,
        )
        self.stats_after_warmup = measure.compile_stats() if self.compiled else None
        self.nvml_gib = measure.nvml_process_memory_gib(self.device)
        if self.paired:
            self.eager = self.make_variant("eager", self.fresh_model(), eager_settings)
            measure.warm_up(self.eager, self.warmup, self.device, self.progress)
            schedule = [(self.eager, self.rounds[0])] + [
                pair for n in self.rounds[1:] for pair in ((self.main, n), (self.eager, n))
            ]
            for variant, n in schedule:
                measure.timed_round(variant, n, self.device, self.progress, self.every, self.measured)

    # ----------------------------------------------------------------------------- results
    def collect_metrics(self, recorder: Any) -> None:
        from pipeline import diagnose, measure

        main, result = self.main, self.result
        result.series["loss"] = main.losses.tolist()
        result.series["step_time_ms"] = main.step_ms
        tokens = self.spec["seq_len"] if self.spec["kind"] == "tokens" else None
        m = measure.variant_metrics(main, self.batch_size, tokens, self.compiled)
        if self.device.type == "cuda":
            m.update(measure.memory_metrics(main))
            if self.nvml_gib is not None:
                m["nvml_process_mem_gib"] = self.nvml_gib
        m["loss_first"], m["loss_final"] = result.series["loss"][0], result.series["loss"][-1]
        if self.compiled:
            stats = measure.compile_stats()
            m["torch_compile_time_s"] = self.stats_after_warmup["torch_compile_time_s"]
            m["graph_breaks"], m["unique_graphs"], m["frames_compiled"] = (
                stats["graph_breaks"],
                stats["unique_graphs"],
                stats["frames_compiled"],
            )
            m["recompiles_after_warmup"] = (
                stats["frames_compiled"] - self.stats_after_warmup["frames_compiled"]
            )
            m.update(diagnose.compile_phases())
            cache = diagnose.cache_state()
            m["inductor_cache_hits"], m["inductor_cache_misses"] = (
                cache["inductor_cache_hits"],
                cache["inductor_cache_misses"],
            )
            result.info["inductor_cache"] = cache["inductor_cache"]
            logged = recorder.summary()
            m["cudagraph_skips"] = len(logged["cudagraph_skips"])
            failed = diagnose.frames_failed()
            m["frames_failed"] = len(failed)
            result.diagnostics.update(
                {
                    **logged,
                    "graph_break_reasons": stats["graph_break_reasons"],
                    "recompile_reasons": stats["recompile_reasons"],
                    "frames_failed": failed,
                }
            )
        if self.eager is not None:
            m.update(measure.paired_metrics(main, self.eager, self.probe, self.cfg["benchmark"], self.device))
            result.series["eager_loss"] = self.eager.losses.tolist()
            result.series["eager_step_time_ms"] = self.eager.step_ms
        if self.flops:
            mfu, note = diagnose.mfu_metrics(
                self.flops, m["step_time_ms_p50"], result.environment.get("gpu_name"), self.cfg["precision"]
            )
            m.update(mfu)
            result.info["mfu_note"] = note
        m["cpu_rss_peak_gib"] = measure.cpu_rss_peak_gib()
        note = measure.noise_note(m, self.cfg["benchmark"]["noisy_spread_pct"])
        m["measurement_noisy"] = float(note is not None)
        if note:
            result.info["measurement_note"] = note
        result.metrics.update(m)

    def count_flops(self) -> None:
        from pipeline.diagnose import count_flops

        self.flops = None
        if not self.cfg["diagnose"]["flops"]:
            return
        try:
            self.flops = count_flops(self.cfg["model"], self.cfg["loss"], self.batch_size)
        except Exception as exc:  # a model that cannot run on the meta device: say so, measure anyway
            self.result.info["flops_note"] = f"FLOPs not counted: {type(exc).__name__}: {exc}"[:400]

    def explain(self, recorder: Any) -> None:
        """`torch._dynamo.explain` on a throwaway copy, before anything real is compiled; its compile
        state is then forgotten so the job's own statistics start from zero."""
        from pipeline import diagnose
        from pipeline.data import make_batches
        from pipeline.train import ModelWithLoss

        model = self.fresh_model().to(dtype=self.precision.param_dtype).train()
        batches = make_batches(
            {**self.cfg["data"], "loader": False, "num_batches": 1},
            self.spec,
            self.batch_size,
            self.device,
            self.precision.input_dtype,
            0,
        )
        with self.precision.autocast(self.device.type):
            text = diagnose.explain(ModelWithLoss(model, self.loss), next(batches))
        (self.out_dir / "explain.txt").write_text(text)
        del model, batches
        diagnose.reset_compile_state()
        recorder.__init__()  # forget the analysis' own log records

    def diagnose_steps(self) -> None:
        """Extra, unmeasured steps: host-device syncs in one step; a profiler trace when asked."""
        from pipeline import diagnose

        step = lambda: self.main.run_step(record=False)  # noqa: E731
        if self.cfg["diagnose"]["sync_check"]:
            syncs = diagnose.count_syncs(step, self.device)
            self.result.diagnostics["host_syncs"] = syncs
            if "count" in syncs:
                self.result.metrics["host_syncs_per_step"] = syncs["count"]
        if self.cfg["profile"]:
            diagnose.profile_steps(step, self.device, self.out_dir / "profile")


def run_job(cfg: dict[str, Any], result: Any, progress: Progress, out_dir: Path) -> None:
    timeline = Timeline()
    try:
        JobRunner(cfg, result, progress, out_dir, timeline).run()
    finally:
        result.info["timeline"] = {k: round(v, 3) for k, v in timeline.phases.items()}
        result.info["worker_module_loaded_at"] = STARTED_AT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", required=True, help="resolved job config (JSON)")
    parser.add_argument("--result", required=True, help="where to write the result file")
    args = parser.parse_args(argv)
    faulthandler.enable()  # a segfault still leaves a Python stack in the worker log
    # SLURM's time-limit warning reaches every process of the job; the job's parent decides what it means.
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)

    from pipeline.result import FAILED, FINISHED, JobResult

    with open(args.config) as f:
        cfg = json.load(f)
    result = JobResult()
    progress = Progress()
    try:
        run_job(cfg, result, progress, Path(args.result).parent)
        result.status = FINISHED
    except BaseException as exc:
        error_type, message = (
            classify_error(exc, cfg)
            if not isinstance(exc, KeyboardInterrupt)
            else ("Interrupted", "interrupted")
        )
        result.fail(FAILED, error_type, message, traceback.format_exc())
        _record_memory_at_failure(result)
    finally:
        result.write(args.result)
    print(
        f"worker: {result.status}"
        + (f" ({result.error.type}: {result.error.message})" if result.error else ""),
        flush=True,
    )
    return 0 if result.status == FINISHED else 1


def _record_memory_at_failure(result: Any) -> None:
    """Peak memory up to the failure (an out-of-memory error is only useful with it)."""
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            result.metrics["job_peak_mem_allocated_gib"] = torch.cuda.max_memory_allocated() / 1024**3
            result.metrics["job_peak_mem_reserved_gib"] = torch.cuda.max_memory_reserved() / 1024**3
        from pipeline.measure import cpu_rss_peak_gib

        result.metrics["cpu_rss_peak_gib"] = cpu_rss_peak_gib()
    except Exception:
        pass


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # The result file is written: skip interpreter teardown (CUDA context, inductor's compile-worker
    # pool), which can take seconds and measures nothing. The parent cleans up the process group.
    os._exit(code)
