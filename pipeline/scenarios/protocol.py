"""The one measurement protocol, for every scenario's unit of work. Paired order: the eager memory probe
alone, the compiled warm-up and solo round, the eager copy's, then rounds alternating E C | C E ... (so the
host's changing speed hits both alike) until the job's question is decided or `benchmark.budget_s` is spent.
A scenario subclasses :class:`Scenario` (`prepare`, `recipe`, `finish_report`); variant.py builds variants."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from hydra.utils import get_method
from torch import nn

from models import build_model
from pipeline.axes.compile import Compiled, ModelWithLoss
from pipeline.axes.data import make_batches
from pipeline.axes.parallel import Ranks
from pipeline.axes.precision import Precision
from pipeline.config.schema import CompileConfig, Config
from pipeline.diagnose import comm, profiler, syncs
from pipeline.diagnose import explain as explain_mod
from pipeline.diagnose.compile_log import CompileLogRecorder
from pipeline.diagnose.compile_stats import CompileDiagnosis, CompileStats, reset_compile_state
from pipeline.diagnose.flops import Mfu
from pipeline.jobdir import JobDir
from pipeline.measure import settings
from pipeline.measure.compile_time import CompileTime, Warmup
from pipeline.measure.gate import MeasureGate
from pipeline.measure.host import HostCheck
from pipeline.measure.memory import MemoryPeaks, cpu_rss_peak_gib, nvml_process_memory_gib
from pipeline.measure.method import describe_method
from pipeline.measure.noise import Noise, round_drift_pct
from pipeline.measure.paired import PairedComparison, compare, pair_log_ratios
from pipeline.measure.ranks import ParallelFigures, agree, agreed_looks, align_ranks, slowest_rank_steps
from pipeline.measure.sequential import Measuring, Stop, StopRule, speedup_interval
from pipeline.measure.stats import Latency, Throughput
from pipeline.measure.timing import LATENCY, StepVariant, Timer, Variant, units_per_round
from pipeline.progress import Progress
from pipeline.scenarios.variant import Recipe, build_variant, placed_model


class Timeline:
    """Seconds spent in each phase of the worker, for the job-cost breakdown (info `timeline`)."""

    def __init__(self, started: float | None = None) -> None:
        self.phases: dict[str, float] = {}
        self.last = time.time() if started is None else started

    def mark(self, phase: str) -> None:
        now = time.time()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self.last
        self.last = now


@dataclass(frozen=True, kw_only=True)
class WorkerContext:
    """What the worker gives every scenario."""

    device: torch.device
    progress: Progress | Any
    out_dir: Path  # the job's folder (explain.txt, profile/ go here)
    timeline: Timeline
    settings_at_start: dict[str, str] = field(default_factory=dict)  # pipeline.measure.settings at start
    worker_start: str = "spawn"  # how the worker started: `template` (forked from the sweep's) or `spawn`


class HasMetrics(Protocol):
    def metrics(self) -> dict[str, float]: ...


@dataclass(kw_only=True)
class Measured:
    """What the measurement phase produced: the variants and what was read between phases."""

    main: Variant
    compiled: Compiled  # how the main variant was built
    eager: Variant | None = None  # the paired eager copy
    probe: Variant | None = None  # the eager memory probe (released)
    probe_leak_bytes: int | None = None
    stats_after_warmup: CompileStats | None = None
    nvml_gib: float | None = None
    own_p50_ms: float | None = None  # distributed: this rank's own median (the times are the slowest rank's)
    eager_own_p50_ms: float | None = None
    stop: Stop | None = None  # how long the timed rounds ran and why they stopped


@dataclass(kw_only=True)
class UnitReport:
    """A job's figures as typed records; `metrics()` gives them under the registry's names."""

    step: Latency  # the headline laps (a step, a call, a decode step)
    throughput: Throughput
    warmup: Warmup
    noise: Noise
    compile_time: CompileTime | None = None
    compile: CompileDiagnosis | None = None
    memory: MemoryPeaks | None = None  # CUDA only
    nvml_gib: float | None = None
    paired: PairedComparison | None = None
    mfu: Mfu | None = None
    cpu_rss_peak_gib: float = 0.0
    host_syncs_per_step: int | None = None
    host: HostCheck | None = None  # the host's own CPU speed over the timed rounds
    parallel: ParallelFigures | None = None  # distributed jobs: the ranks' spread
    stop: Stop | None = None  # how long it measured and why it stopped
    records: list[HasMetrics] = field(default_factory=list)  # the scenario's own typed figures
    extra: dict[str, float] = field(default_factory=dict)  # the scenario's own figures, by registry name
    series: dict[str, list[float]] = field(default_factory=dict)  # per-unit curves
    diagnostics: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)  # effective settings and notes

    def metrics(self) -> dict[str, float]:
        m = {
            **self.step.metrics(),
            "step/count": float(self.step.count),
            **self.noise.metrics(),
            **self.throughput.metrics(),
            **self.warmup.metrics(),
            "memory/cpu_rss_peak_gib": self.cpu_rss_peak_gib,
        }
        typed = (self.compile_time, self.memory, self.compile, self.paired, self.mfu, self.parallel)
        for record in (*typed, self.host, self.stop, *self.records):
            if record is not None:
                m.update(record.metrics())
        if self.nvml_gib is not None:
            m["memory/nvml_process_gib"] = self.nvml_gib
        if self.host_syncs_per_step is not None:
            m["diagnose/host_syncs_per_step"] = float(self.host_syncs_per_step)
        return {**m, **self.extra}


class Scenario:
    """A unit of work, warmed up, timed in (paired) rounds and diagnosed. Subclasses implement `prepare`
    and `recipe`, and may extend `finish_report`, `measuring`, `method_lines`, `count_flops`."""

    timed_unit = "step"  # what trainer.steps counts for this scenario, in words
    measures_latency = False  # also time units one at a time, synchronized: a request's latency (latency/*)

    def __init__(self, cfg: Config, ctx: WorkerContext):
        self.cfg, self.ctx = cfg, ctx
        self.device = ctx.device
        self.precision = Precision(cfg.precision)
        self.spec = cfg.model.input
        self.work = cfg.scenario.work(cfg)
        self.batch_size = cfg.trainer.batch_size  # samples per step (a subclass may differ)
        self.warmup, self.measured = cfg.trainer.warmup_steps, cfg.trainer.measured_steps
        # the host check's bursts, before timed rounds: benchmark.host_check_s over the first look's rounds
        self.host = HostCheck(burst_s=0.0)
        self.host.spread_over(cfg.benchmark.host_check_s, 2 * cfg.benchmark.rounds + 1)
        self.timer = Timer(
            device=self.device, progress=ctx.progress, measured_total=self.measured, host=self.host
        )
        self.round_units = 1  # units per timed round, sized once the variants have warmed up
        self.info: dict[str, Any] = {}
        self.head: nn.Module | None = None  # what turns the model's outputs into the unit's result; prepare()
        self.ranks = Ranks.from_env() if cfg.parallel.distributed else Ranks()  # rank 0 of 1 otherwise
        self.gate = MeasureGate.from_env()  # benchmark.overlap: one job measures on the device at a time

    # ----------------------------------------------------------------------------- to implement
    def prepare(self) -> nn.Module:
        """Build what every variant shares (the loss, or an output head); returns it."""
        raise NotImplementedError

    def recipe(self) -> Recipe:
        """What the scenario's variant is made of (its step, its timed unit); variant.py applies the axes."""
        raise NotImplementedError

    def make_variant(self, name: str, settings: CompileConfig) -> tuple[Variant, Compiled]:
        return build_variant(self, name, settings, self.recipe())

    def measuring(self) -> contextlib.AbstractContextManager[Any]:
        """The context every unit runs in (warm-up, measurement, diagnostics alike): inference_mode unless
        the scenario trains, so compiled code sees one grad mode (a switch would recompile)."""
        return contextlib.nullcontext() if self.cfg.scenario.trains else torch.inference_mode()

    def finish_report(self, report: UnitReport, measured: Measured) -> None:
        """Add the scenario's own figures (losses, output parity, ...) to the report."""

    def count_flops(self) -> int | None:
        return None

    def method_lines(self) -> list[str]:
        """What this scenario runs, in words, before the protocol's own lines."""
        return []

    def paired_losses(self, measured: Measured) -> tuple[list[float], list[float]] | None:
        """Compiled and eager loss curves to judge parity on (training only): the losses each variant's
        steps returned; None (no parity check) where a scenario's variants record none."""
        main, eager = measured.main, measured.eager
        if not self.cfg.scenario.trains or not (
            isinstance(main, StepVariant) and isinstance(eager, StepVariant)
        ):
            return None
        compiled, eager_losses = main.recorded_outputs(), eager.recorded_outputs()
        both = min(len(compiled), len(eager_losses))  # the compiled variant ran its solo round more
        return (compiled[:both], eager_losses[:both]) if both else None

    # ----------------------------------------------------------------------------- phases
    def method(self) -> str:
        """How this job is measured, in words (the run's description)."""
        protocol = describe_method(
            self.cfg,
            device=self.device,
            world_size=self.ranks.world_size,
            unit=self.timed_unit,
            worker_start=self.ctx.worker_start,
            overlap_cpus=os.environ.get("PIPELINE_CPUS", "") if self.gate.active else "",
        )
        return "\n".join([*self.method_lines(), protocol])

    def run(self) -> UnitReport:
        timeline = self.ctx.timeline
        self.info["precision_flags"] = self.precision.apply_backend_flags()
        get_method(self.cfg.model._target_)  # the model's library (timm, transformers) alone, timed apart
        timeline.mark("model_library")
        try:
            with CompileLogRecorder(verbose=self.cfg.verbose) as recorder, self.measuring():
                self.head = self.prepare()
                timeline.mark("build")
                flops = self.count_flops()
                timeline.mark("flops")
                if self.cfg.diagnose.explain:
                    self.explain()
                    recorder.clear()  # forget the analysis' own log records
                    timeline.mark("explain")
                measured = self.measure()
                timeline.mark("variants_warmup_and_rounds")
                report = self.report(measured, recorder.summary(), flops)
                self.diagnose_units(measured.main, report)
        finally:
            self.gate.release()  # held since the main variant's compilation: the device is this job's no more
            if self.gate.active:
                self.info["measure_gate"] = self.gate.record()
        timeline.mark("diagnostics")
        self.ctx.progress(measured.main.name, "done", 1, 1)
        return report

    def fresh_model(self, dtype: torch.dtype | None = None) -> nn.Module:
        """The model built on the device from the job's seed (in `dtype` from the start when given): every
        call gives the same initial weights, so paired variants start equal."""
        torch.manual_seed(self.cfg.trainer.seed)
        previous = torch.get_default_dtype()
        if dtype is not None:
            torch.set_default_dtype(dtype)
        try:
            with torch.device(self.device):
                model = build_model(self.cfg.model)
        finally:
            torch.set_default_dtype(previous)
        self.info["parameters"] = sum(p.numel() for p in model.parameters())
        return model

    def batches(self, batch_size: int | None = None, *, num_batches: int | None = None) -> Any:
        data = self.cfg.data
        if num_batches is not None:
            data = dataclasses.replace(data, loader=False, num_batches=num_batches)
        return make_batches(
            data,
            self.spec,
            batch_size or self.batch_size,
            device=self.device,
            float_dtype=self.precision.input_dtype,
            seed=self.cfg.trainer.seed + self.ranks.rank,  # each rank its own data
        )

    def measure(self) -> Measured:
        timer, eager_settings = self.timer, self.cfg.compile.as_eager()
        probe = leak = None
        if self.cfg.paired:
            baseline = timer.memory.allocated()
            with self.gate.hold("eager memory probe"):
                probe, _ = self.make_variant("eager", eager_settings)
                timer.solo_phase(
                    probe, warmup=self.warmup, units=lambda: self.size_rounds(probe.unit_s()), show=False
                )
                leak = timer.release(probe, baseline)
        main_name = "compiled" if self.cfg.compile.compiled else "eager"
        main, compiled = self.make_variant(main_name, self.cfg.compile)
        eager_unit_s = probe.unit_s() if probe is not None else None
        # compiled in its first unit; from then on the device is this job's alone (benchmark.overlap)
        timer.solo_phase(
            main,
            warmup=self.warmup,
            units=lambda: self.size_rounds(main.unit_s(), eager_unit_s),
            after_first=lambda: self.gate.acquire("measure"),
        )
        if self.measures_latency:  # the solo round is the main variant's first: its requests' latency too
            timer.latency_round(main, self.round_units)
        # as the units run: every flag that differs from the worker's start is recorded
        now = settings.snapshot()
        self.info["settings"] = now
        self.info["settings_changed"] = settings.changed(self.ctx.settings_at_start, now)
        measured = Measured(
            main=main,
            compiled=compiled,
            probe=probe,
            probe_leak_bytes=leak,
            stats_after_warmup=CompileStats.now() if self.cfg.compile.compiled else None,
            nvml_gib=nvml_process_memory_gib(self.device),
        )
        if self.cfg.paired:
            eager, _ = self.make_variant("eager", eager_settings)
            timer.warm_up(eager, self.warmup)
            measured.eager = eager
        measured.stop = self.measure_rounds(main, measured.eager, probe)
        self.info["measure_stop"] = measured.stop.words()
        self.info["measure_brief"] = measured.stop.brief()
        if self.cfg.parallel.distributed:  # after the measured loop: the slowest rank's step times
            measured.own_p50_ms = slowest_rank_steps(main, self.device)
            if measured.eager is not None:
                measured.eager_own_p50_ms = slowest_rank_steps(measured.eager, self.device)
        return measured

    def size_rounds(self, unit_s: float, other_unit_s: float | None = None) -> int:
        """Units per timed round: about `benchmark.round_s` of the variants' mean unit time as their
        warm-up saw it, the same on every rank."""
        mean_s = unit_s if other_unit_s is None else (unit_s + other_unit_s) / 2
        self.round_units = int(agree(units_per_round(self.cfg.benchmark.round_s, mean_s), self.device))
        self.info["round_units"] = self.round_units
        return self.round_units

    @property
    def figure_label(self) -> str | None:
        """The laps the job's question is about: the latency of synchronized calls, or the headline's."""
        return LATENCY if self.measures_latency else None

    def measure_rounds(self, main: Variant, eager: Variant | None, probe: Variant | None) -> Stop:
        """Timed rounds, alternating C E | E C ... when paired (the compiled solo round opens the first pair),
        until a look answers the job's question or the budget is spent; every rank stops where rank 0 does.
        The looks are planned from the solo rounds' times: as many as the budget holds."""
        bench, units = self.cfg.benchmark, self.round_units
        variants = (main,) if eager is None else (eager, main)
        unit_ms = sum(statistics.median(v.step_ms) for v in (main, probe) if v is not None and v.step_ms)
        # every variant's round: its units back to back (then one at a time, for latency), and its lead-in
        timed = units * (2 if self.measures_latency else 1)
        per_round_s = (timed + self.timer.lead_in_units(main)) * unit_ms / 1000
        first = max(bench.rounds, math.ceil(self.measured / units))
        rounds_s = bench.budget_s - bench.host_check_s  # the host check's bursts come out of the budget
        most = int(rounds_s / per_round_s) if bench.budget_s > 0 and per_round_s > 0 else first
        looks = agreed_looks(first, most, self.device)
        rule = StopRule(
            min_effect_pct=self.cfg.sweep.min_effect_pct, target_pct=bench.target_pct, budget_s=bench.budget_s
        )
        measuring = Measuring(looks, rule, paired=eager is not None)
        self.info["looks"] = list(looks.counts)
        # benchmark.host_check_s in all, over the rounds to the last look
        self.host.spread_over(bench.host_check_s, len(variants) * looks.counts[-1])
        started = time.perf_counter()
        align_ranks(self.device)  # a distributed job's ranks start their rounds together
        if eager is not None:  # the first pair: the compiled variant's solo round, then the eager copy's
            self.timed_round(eager, units)
        rounds = 1
        while True:
            if measuring.due(rounds):
                self.timer.flush()  # the rounds since the last look: one sync
                stop = None
                if self.ranks.rank == 0:
                    low, estimate, high = self.question(main, eager, looks.confidence)
                    stop = measuring.look(rounds, time.perf_counter() - started, low, estimate, high)
                stop = agree(stop, self.device, broadcast=True)
                if stop is not None:
                    return stop
                measuring.advance()
                align_ranks(self.device)  # the look synced every rank's device: they go on together
                continue
            self.timer.measured_total = measuring.next_count * units
            for variant in variants if rounds % 2 == 1 else variants[::-1]:  # C E | E C | C E ...
                self.timed_round(variant, units)
            rounds += 1

    def timed_round(self, variant: Variant, units: int) -> None:
        """One round of a variant: its units back to back, then (scenarios that time a request's latency)
        as many units one at a time, synchronized."""
        self.timer.timed_round(variant, units)
        if self.measures_latency:
            self.timer.latency_round(variant, units)

    def question(self, main: Variant, eager: Variant | None, confidence: float) -> tuple[float, float, float]:
        """(low, estimate, high) of what the job asks at a look: the paired speedup, or the lone figure."""
        label = self.figure_label
        if eager is not None:
            return speedup_interval(pair_log_ratios(main, eager, label), confidence)
        figure = main.latency(label, confidence)
        return figure.ci95_low, figure.p50, figure.ci95_high

    # ----------------------------------------------------------------------------- results
    def report(self, measured: Measured, logged: dict[str, Any], flops: int | None) -> UnitReport:
        cfg, main, eager, work = self.cfg, measured.main, measured.eager, self.work
        cuda = self.device.type == "cuda"
        confidence = measured.stop.confidence if measured.stop is not None else 0.95
        step = main.latency(confidence=confidence)
        self.info.update(
            compiled=measured.compiled.description,
            compile_kwargs=measured.compiled.kwargs or {},
            compiled_regions=measured.compiled.regions,
            work=dataclasses.asdict(work),
        )
        if measured.probe_leak_bytes is not None:
            self.info["eager_probe_leak_bytes"] = measured.probe_leak_bytes
        report = UnitReport(
            step=step,
            throughput=Throughput.of(step, work.samples, work.tokens),
            warmup=Warmup.from_steps(main.warmup_s or [0.0], main.unit_ms()),
            noise=Noise(
                spread_pct=step.spread_pct,
                cpu_steal_pct=main.cpu_steal_pct,
                cpu_wait_pct=main.cpu_wait_pct,
                others_cpu_pct=main.others_cpu_pct,
                limit_pct=cfg.benchmark.noisy_spread_pct,
                round_drift_pct=round_drift_pct(main.block_p50_ms()),
                eager_round_drift_pct=round_drift_pct(eager.block_p50_ms()) if eager else None,
                host_spread_pct=self.host.spread_pct,
                cuda=cuda,
                compute_threads=1 if cuda else torch.get_num_threads(),
            ),
            host=self.host,
            cpu_rss_peak_gib=cpu_rss_peak_gib(),
            stop=measured.stop,
            info=self.info,
        )
        report.series = {"curve/step_ms": main.step_ms}
        if cfg.compile.compiled:
            report.compile_time = CompileTime(setup_s=main.setup_s, warmup_excess_s=report.warmup.excess_s)
            assert measured.stats_after_warmup is not None
            report.compile = CompileDiagnosis.collect(
                after_warmup=measured.stats_after_warmup, logged=logged, applies=self.compile_applies()
            )
            report.diagnostics.update(report.compile.diagnostics())
            self.info["inductor_cache"] = report.compile.cache.state
        if cuda:
            report.memory, report.nvml_gib = main.peaks, measured.nvml_gib
        if eager is not None:
            report.paired = compare(
                main,
                eager,
                measured.probe,
                cuda=cuda,
                losses=self.paired_losses(measured),
                loss_rtol=cfg.benchmark.loss_rtol,
                parity_steps=cfg.benchmark.parity_steps,
                label=self.figure_label,  # speedup/vs_eager: the objective's
                eager_prefix="eager/latency_" if self.measures_latency else "eager/",
                confidence=confidence,
            )
            report.series["curve/eager_step_ms"] = eager.step_ms
        if flops:
            report.mfu = Mfu.of(
                flops=flops,
                step_time_ms=step.p50,
                gpu_name=torch.cuda.get_device_name(self.device) if cuda else None,
                precision=cfg.precision,
            )
            self.info["mfu_note"] = report.mfu.note
        self.finish_report(report, measured)
        if cfg.parallel.distributed:
            assert measured.own_p50_ms is not None
            report.parallel = ParallelFigures.collect(
                own_p50_ms=measured.own_p50_ms,
                eager_p50_ms=measured.eager_own_p50_ms,
                metrics=report.metrics(),
                device=self.device,
            )
            report.series.update(report.parallel.series())
            self.info["parallel"] = {"strategy": cfg.parallel.strategy, "world_size": self.ranks.world_size}
        if report.noise.note:
            self.info["measurement_note"] = report.noise.note
        return report

    def compile_applies(self) -> set[str]:
        """What compilation can involve for this device, backend and settings
        (pipeline.diagnose.compile_stats)."""
        settings, parallel, cuda = self.cfg.compile, self.cfg.parallel, self.device.type == "cuda"
        inductor = settings.backend == "inductor"
        applies = {
            "inductor": inductor,
            "aot_autograd": settings.backend != "eager",  # Dynamo alone hands its graphs to no AOTAutograd
            "triton": cuda and inductor,
            "autotune": inductor and settings.mode.startswith("max-autotune"),
            "cudagraphs": cuda and settings.uses_cudagraphs,
            "compiled_autograd": parallel.distributed and parallel.optimize_ddp == "compiled_autograd",
        }
        return {name for name, holds in applies.items() if holds}

    def explain(self) -> None:
        """`torch._dynamo.explain` on a throwaway copy, before anything real is compiled; its compile
        state is then forgotten so the job's own statistics start from zero."""
        assert self.head is not None
        model = placed_model(self, self.recipe())
        batch = next(self.batches(num_batches=1))
        with self.precision.autocast(self.device.type):
            text = explain_mod.explain(ModelWithLoss(model, self.head), batch)
        JobDir(self.ctx.out_dir).explain.write_text(text)
        del model, batch
        reset_compile_state()

    def diagnose_units(self, main: Variant, report: UnitReport) -> None:
        """Extra, unmeasured units: host-device syncs in one unit; a profiler trace when asked."""
        unit = functools.partial(main.run_unit, None, record=False)
        if self.cfg.diagnose.sync_check:
            found = syncs.count_syncs(unit, self.device)
            report.diagnostics["host_syncs"] = found
            if "count" in found:
                report.host_syncs_per_step = found["count"]
        if self.cfg.profile:
            profiler.profile_steps(unit, self.device, JobDir(self.ctx.out_dir).profile)
        if self.cfg.parallel.distributed and self.cfg.diagnose.comm:  # where a step's time goes on the wire
            try:
                figures = comm.diagnose(unit, self.device, JobDir(self.ctx.out_dir).comm)
            except comm.CommNotRead as why:
                self.info["comm_note"] = f"communication not diagnosed: {why}"
            else:
                report.records.append(figures)
                report.series.update(figures.series())
