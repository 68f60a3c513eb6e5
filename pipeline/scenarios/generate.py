"""The generation scenario (`scenario=generate`, causal LMs): a prefill of `scenario.prompt_len` tokens
(time to first token), then greedy decode of the rest of `scenario.new_tokens` with a static KV cache,
as transformers' static cache and gpt-fast do. A step is one decode step: `step/*` are per-token
decode latencies, `throughput/tokens_per_s` is decode tokens/s (batch x 1000 / p50).

What is compiled follows `compile.scope` through `apply_compile`: `step` (the default for generate)
compiles the one-token decode step alone and runs the prefill eager; `model` and `regional` compile the
model for the prefill and the decode. Decode steps are timed with CUDA events at every token boundary,
the prefill with events around it; every figure is from measured generations only, after
`trainer.warmup_steps` warm-up generations (compilation happens there). Recompiles across decode steps
show as `diagnose/recompiles_after_warmup`.

Paired mode: an eager copy with the same weights generates from the same prompt, generation by
generation alternating with the compiled one; the first `scenario.parity_tokens` greedy tokens of the
two must agree, unless they part where eager's two best next tokens are a near-tie (within TIE_RTOL of
its largest logit): with random weights the logits are nearly flat, and a rounding difference of fused
bf16 kernels then picks the other of two equal candidates (`parity/near_tie`).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from models import build_model
from pipeline.axes.compile import Compiled, StepFn, apply_compile, uses_cudagraphs
from pipeline.axes.precision import Precision
from pipeline.config.schema import CompileConfig, Config
from pipeline.diagnose.compile_log import CompileLogRecorder
from pipeline.diagnose.compile_stats import CompileDiagnosis, CompileStats
from pipeline.measure.clocks import StepClock, synchronize
from pipeline.measure.compile_time import CompileTime, Warmup
from pipeline.measure.memory import Memory, MemoryPeaks, cpu_rss_peak_gib, gib, nvml_process_memory_gib
from pipeline.measure.noise import Noise
from pipeline.measure.paired import speedup_interval
from pipeline.measure.stats import Latency, Throughput
from pipeline.scenarios.base import ScenarioReport, WorkerContext
from pipeline.scenarios.stepped import import_model_library

TIE_RTOL = 0.01  # two logits this close (relative to the largest) are a tie at bf16 precision


def near_tie(logits: torch.Tensor, rtol: float = TIE_RTOL) -> bool:
    """Whether the two best next tokens are within `rtol` of the largest logit, in any sequence."""
    logits = logits.float()
    top2 = logits.topk(2, dim=-1).values
    return bool(((top2[..., 0] - top2[..., 1]) <= rtol * logits.abs().amax(dim=-1)).any())


class Decoder(nn.Module):
    """A causal LM called with its cache: `inputs` holds input_ids, position_ids and the cache."""

    def __init__(self, lm: nn.Module):
        super().__init__()
        self.lm = lm

    def forward(self, inputs: dict[str, Any]) -> torch.Tensor:
        return self.lm(**inputs, use_cache=True).logits


class NextToken(nn.Module):
    """The generation "head": the greedy next token of each sequence."""

    def forward(self, batch: dict[str, Any], logits: torch.Tensor) -> torch.Tensor:
        return logits[:, -1].argmax(-1, keepdim=True)


def decode_step_factory():
    def make_step(forward: nn.Module, *, mark_cudagraph_step: bool) -> StepFn:
        def decode(batch: dict[str, Any]) -> torch.Tensor:
            if mark_cudagraph_step:
                torch.compiler.cudagraph_mark_step_begin()
            return forward(batch)

        return decode

    return make_step


@dataclass(kw_only=True)
class Generation:
    ttft_ms: float
    decode_ms: list[float]
    tokens: torch.Tensor  # batch x new_tokens


@dataclass(kw_only=True)
class Generator:
    """One variant: a model with its cache, prefilled and decoded one token at a time."""

    name: str
    lm: nn.Module
    compiled: Compiled
    cache: Any
    setup_s: float
    warmup_s: list[float] = field(default_factory=list)
    generations: list[Generation] = field(default_factory=list)
    peaks: MemoryPeaks = field(default_factory=MemoryPeaks)

    def generate(self, prompt: torch.Tensor, new_tokens: int, device: torch.device) -> Generation:
        batch, length = prompt.shape
        self.cache.reset()
        positions = torch.arange(length, device=device).expand(batch, length)
        prefill = StepClock(device, 1)
        prefill.mark()
        token = self.compiled.forward(
            {"inputs": {"input_ids": prompt, "position_ids": positions, "past_key_values": self.cache}}
        )
        prefill.mark()
        tokens = [token.clone()]
        position = torch.full((batch, 1), length, dtype=torch.long, device=device)
        clock = StepClock(device, new_tokens - 1)
        clock.mark()
        for _ in range(new_tokens - 1):
            inputs = {"input_ids": token, "position_ids": position, "past_key_values": self.cache}
            token = self.compiled.step({"inputs": inputs}).clone()  # a CUDA-graph replay reuses its output
            position += 1  # in place: the same input tensor, no recompile
            clock.mark()
            tokens.append(token)
        return Generation(
            ttft_ms=prefill.durations_ms()[0], decode_ms=clock.durations_ms(), tokens=torch.cat(tokens, dim=1)
        )

    def decode_ms(self) -> list[float]:
        return [ms for g in self.generations for ms in g.decode_ms]


@dataclass(kw_only=True)
class GenerateReport(ScenarioReport):
    step: Latency  # decode steps
    ttft: Latency
    throughput: Throughput
    warmup: Warmup
    noise: Noise
    prompt_tokens: int
    new_tokens: int
    compile_time: CompileTime | None = None
    compile: CompileDiagnosis | None = None
    memory: MemoryPeaks | None = None
    nvml_gib: float | None = None
    eager: tuple[Latency, Latency] | None = None  # the paired eager copy's (decode, ttft)
    speedup_ci95: tuple[float, float] | None = None
    tokens_agree: int | None = None
    near_tie: bool = False  # the first disagreement is a near-tie of eager's logits
    parity_tokens: int = 0
    cpu_rss_peak_gib: float = 0.0

    def metrics(self) -> dict[str, float]:
        m = {
            **self.step.metrics(),
            "step/count": float(self.step.count),
            **self.noise.metrics(),
            **self.throughput.metrics(),
            **self.warmup.metrics(),
            "generate/ttft_p50_ms": self.ttft.p50,
            "generate/ttft_p90_ms": self.ttft.p90,
            "generate/ttft_ci95_low_ms": self.ttft.ci95_low,
            "generate/ttft_ci95_high_ms": self.ttft.ci95_high,
            "generate/prompt_tokens": float(self.prompt_tokens),
            "generate/new_tokens": float(self.new_tokens),
            "memory/cpu_rss_peak_gib": self.cpu_rss_peak_gib,
        }
        for record in (self.compile_time, self.memory, self.compile):
            if record is not None:
                m.update(record.metrics())
        if self.nvml_gib is not None:
            m["memory/nvml_process_gib"] = self.nvml_gib
        if self.eager is not None and self.speedup_ci95 is not None:
            decode, ttft = self.eager
            m.update(
                {
                    "eager/p50_ms": decode.p50,
                    "eager/p10_ms": decode.p10,
                    "eager/p90_ms": decode.p90,
                    "eager/p50_ci95_low_ms": decode.ci95_low,
                    "eager/p50_ci95_high_ms": decode.ci95_high,
                    "eager/ttft_p50_ms": ttft.p50,
                    "speedup/vs_eager": decode.p50 / self.step.p50,
                    "speedup/ci95_low": self.speedup_ci95[0],
                    "speedup/ci95_high": self.speedup_ci95[1],
                    "speedup/ttft_vs_eager": ttft.p50 / self.ttft.p50,
                }
            )
        if self.tokens_agree is not None:
            m["parity/tokens_agree"] = float(self.tokens_agree)
            m["parity/near_tie"] = float(self.near_tie)
            m["parity/ok"] = float(self.tokens_agree >= self.parity_tokens or self.near_tie)
        return m


class GenerateScenario:
    def __init__(self, cfg: Config, ctx: WorkerContext):
        self.cfg, self.ctx = cfg, ctx
        self.device = ctx.device
        self.precision = Precision.from_config(cfg.precision)
        scenario = cfg.scenario
        self.batch_size = scenario.batch_size or cfg.trainer.batch_size
        self.prompt_len, self.new_tokens = scenario.prompt_len, scenario.new_tokens
        self.warmup, self.measured = cfg.trainer.warmup_steps, cfg.trainer.measured_steps
        self.memory = Memory(self.device)
        self.info: dict[str, Any] = {"batch_size": self.batch_size}

    def method(self) -> str:
        clock = "CUDA events" if self.device.type == "cuda" else "time.perf_counter"
        lines = [
            f"Generation: batch {self.batch_size}, a {self.prompt_len}-token prompt, {self.new_tokens} new tokens (greedy, static KV cache); "
            f"{self.warmup} warm-up generations, then {self.measured} measured ones.",
            f"Decode step time: {clock} at every token boundary, no host sync inside the decode loop; time to first token: {clock} around the prefill.",
            f"What is compiled: compile.scope={self.cfg.compile.scope} ({'the decode step; the prefill runs eager' if self.cfg.compile.scope == 'step' else 'the model, for prefill and decode'}).",
            "Statistics: median, p10, p90, p99 of the decode steps with a 95% interval that counts their effective number (they are autocorrelated).",
        ]
        if self.cfg.paired:
            lines.append(
                "Paired eager baseline: an eager copy with the same weights generates from the same prompt, alternating with the compiled one "
                f"generation by generation; the first {self.cfg.scenario.parity_tokens} greedy tokens must agree."
            )
        return "\n".join(lines)

    # ----------------------------------------------------------------------------- phases
    def run(self) -> GenerateReport:
        timeline = self.ctx.timeline
        self.info["precision_flags"] = self.precision.apply_backend_flags()
        import_model_library(self.cfg.model._target_)
        timeline.mark("model_library")
        with CompileLogRecorder() as recorder, torch.inference_mode():
            prompt = self.prompt()
            main = self.make_generator("compiled" if self.cfg.compile.compiled else "eager", self.cfg.compile)
            timeline.mark("build")
            self.solo_phase(main, prompt)
            stats = CompileStats.now() if self.cfg.compile.compiled else None
            nvml = nvml_process_memory_gib(self.device)
            eager = None
            if self.cfg.paired:
                eager = self.paired_rounds(main, prompt)
            else:
                for _ in range(self.measured - 1):
                    self.measure_one(main, prompt)
            timeline.mark("variants_warmup_and_rounds")
        report = self.report(main, eager, stats, recorder.summary(), nvml)
        self.ctx.progress(main.name, "done", 1, 1, force=True)
        return report

    def prompt(self) -> torch.Tensor:
        generator = torch.Generator(device=self.device).manual_seed(self.cfg.trainer.seed)
        vocab = self.cfg.model.input.vocab_size
        return torch.randint(
            vocab, (self.batch_size, self.prompt_len), generator=generator, device=self.device
        )

    def make_generator(self, name: str, settings: CompileConfig) -> Generator:
        from transformers import StaticCache

        torch.manual_seed(self.cfg.trainer.seed)
        dtype = self.precision.param_dtype
        previous = torch.get_default_dtype()
        torch.set_default_dtype(dtype)  # built in its own dtype: no float32 copy of a 7B model first
        try:
            with torch.device(self.device):
                lm = build_model(self.cfg.model).model  # the HF causal LM inside LogitsOnly
        finally:
            torch.set_default_dtype(previous)
        lm = lm.to(device=self.device, dtype=dtype).eval().requires_grad_(False)
        lm.config.use_cache = True
        self.info["parameters"] = sum(p.numel() for p in lm.parameters())
        cache = StaticCache(config=lm.config, max_cache_len=self.prompt_len + self.new_tokens)
        started = time.perf_counter()
        compiled = apply_compile(
            settings, model=Decoder(lm), loss=NextToken(), make_step=decode_step_factory()
        )
        return Generator(
            name=name, lm=lm, compiled=compiled, cache=cache, setup_s=time.perf_counter() - started
        )

    def solo_phase(self, main: Generator, prompt: torch.Tensor) -> None:
        """Warm-up generations (each synced and wall-clocked: compilation happens here), then the first
        measured one, with the variant alone on the device (its memory peaks are its own)."""
        self.memory.reset_peak()
        for i in range(self.warmup):
            started = time.perf_counter()
            main.generate(prompt, self.new_tokens, self.device)
            synchronize(self.device)
            main.warmup_s.append(time.perf_counter() - started)
            self.ctx.progress(main.name, "warmup", i + 1, self.warmup)
        main.peaks.job_allocated, main.peaks.job_reserved = (
            self.memory.peak_allocated(),
            self.memory.peak_reserved(),
        )
        self.memory.reset_peak()
        self.measure_one(main, prompt)
        main.peaks.allocated, main.peaks.reserved = self.memory.peak_allocated(), self.memory.peak_reserved()

    def measure_one(self, generator: Generator, prompt: torch.Tensor) -> None:
        generator.generations.append(generator.generate(prompt, self.new_tokens, self.device))
        self.ctx.progress(generator.name, "measure", len(generator.generations), self.measured)

    def paired_rounds(self, main: Generator, prompt: torch.Tensor) -> Generator:
        eager = self.make_generator("eager", self.cfg.compile.as_eager())
        for _ in range(self.warmup):
            eager.generate(prompt, self.new_tokens, self.device)
        self.measure_one(eager, prompt)
        for _ in range(self.measured - 1):
            self.measure_one(main, prompt)
            self.measure_one(eager, prompt)
        return eager

    def parts_at_a_tie(self, lm: nn.Module, tokens: torch.Tensor, agree: int) -> bool:
        """Eager's logits where the two decodes part: the prompt and the tokens both chose, run once more."""
        with torch.inference_mode():
            sequence = torch.cat([self.prompt(), tokens[:, :agree]], dim=1)
            logits = lm(input_ids=sequence, use_cache=False).logits[:, -1]
        tie = near_tie(logits)
        self.info["tokens_part_at"] = {"index": agree, "near_tie": tie}
        return tie

    # ----------------------------------------------------------------------------- results
    def report(
        self,
        main: Generator,
        eager: Generator | None,
        stats: CompileStats | None,
        logged: dict[str, Any],
        nvml: float | None,
    ) -> GenerateReport:
        step = Latency.from_values(main.decode_ms())
        ttft = Latency.from_values([g.ttft_ms for g in main.generations])
        steady_generation_ms = ttft.p50 + (self.new_tokens - 1) * step.p50
        report = GenerateReport(
            step=step,
            ttft=ttft,
            throughput=Throughput.of(step, self.batch_size, 1),
            warmup=Warmup.from_steps(main.warmup_s or [0.0], steady_generation_ms),
            noise=Noise(
                spread_pct=step.spread_pct, cpu_steal_pct=None, limit_pct=self.cfg.benchmark.noisy_spread_pct
            ),
            prompt_tokens=self.prompt_len,
            new_tokens=self.new_tokens,
            parity_tokens=self.cfg.scenario.parity_tokens,
            cpu_rss_peak_gib=cpu_rss_peak_gib(),
            info=self.info,
        )
        report.series = {"curve/step_ms": main.decode_ms()}
        if stats is not None:
            report.compile_time = CompileTime(setup_s=main.setup_s, warmup_excess_s=report.warmup.excess_s)
            inductor, cuda = self.cfg.compile.backend == "inductor", self.device.type == "cuda"
            applies = {"inductor"} if inductor else set()
            if inductor and cuda:
                applies.add("triton")
            if cuda and uses_cudagraphs(self.cfg.compile):
                applies.add("cudagraphs")
            report.compile = CompileDiagnosis.collect(after_warmup=stats, logged=logged, applies=applies)
            report.diagnostics.update(report.compile.diagnostics())
        if self.device.type == "cuda":
            report.memory, report.nvml_gib = main.peaks, nvml
            self.info["weights_gib"] = gib(self.info["parameters"] * self.precision.param_dtype.itemsize)
        if eager is not None:
            report.eager = (
                Latency.from_values(eager.decode_ms()),
                Latency.from_values([g.ttft_ms for g in eager.generations]),
            )
            rounds = [self.new_tokens - 1] * self.measured
            speedup = report.eager[0].p50 / step.p50
            report.speedup_ci95 = speedup_interval(main.decode_ms(), eager.decode_ms(), rounds, speedup)
            first_main, first_eager = main.generations[0].tokens, eager.generations[0].tokens
            report.tokens_agree = leading_agreement(first_main, first_eager)
            if report.tokens_agree < self.new_tokens:
                report.near_tie = self.parts_at_a_tie(eager.lm, first_eager, report.tokens_agree)
            report.series["curve/eager_step_ms"] = eager.decode_ms()
        if report.noise.note:
            self.info["measurement_note"] = report.noise.note
        self.info["ttft_ms"] = [round(g.ttft_ms, 4) for g in main.generations]
        self.info["decode_p50_ms_per_generation"] = [
            round(statistics.median(g.decode_ms), 4) for g in main.generations
        ]
        return report


def leading_agreement(a: torch.Tensor, b: torch.Tensor) -> int:
    """How many leading tokens agree in every sequence of the batch."""
    equal = (a == b).all(dim=0).tolist()
    return next((i for i, same in enumerate(equal) if not same), len(equal))
