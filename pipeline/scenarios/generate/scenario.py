"""The generation scenario (`scenario=generate`, causal LMs): a prefill of `scenario.prompt_len` tokens
(time to first token, laps `ttft`), then greedy decode with a static KV cache (laps `decode`, the headline
`step/*`). `compile.scope=step` compiles the decode step alone; `model` and `regional` the model for both.
Paired mode checks that the first `scenario.parity_tokens` greedy tokens agree, unless the decodes part at
a near-tie of eager's two best logits (with random weights, fused bf16 kernels may pick either)."""

from __future__ import annotations

import inspect
import statistics
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from pipeline.axes.compile import Compiled, StepFn
from pipeline.config.schema import Config
from pipeline.diagnose.flops import peak_bandwidth_gbs
from pipeline.measure.clocks import Laps, synchronize
from pipeline.measure.memory import gib
from pipeline.measure.stats import Latency
from pipeline.measure.timing import Variant
from pipeline.scenarios.protocol import Measured, Scenario, UnitReport, WorkerContext
from pipeline.scenarios.variant import Recipe

TIE_RTOL = 0.01  # two logits this close (relative to the largest) are a tie at bf16 precision
TTFT, DECODE = "ttft", "decode"


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


def decode_step(forward: nn.Module, lm: nn.Module, optimizer: Any) -> StepFn:
    """The recipe's step: one decode step, the forward alone (a function: `scope=step` compiles it)."""

    def decode(batch: dict[str, Any]) -> torch.Tensor:
        return forward(batch)

    return decode


class GenerationVariant(Variant):
    """One variant: a model with its static KV cache (room for the prompt and the new tokens); a unit
    prefills the prompt and decodes one token at a time."""

    primary = DECODE
    starts_idle = True  # a timed unit syncs before its prompt: no lead-in needed (Timer.lead_in_units)

    def __init__(
        self,
        name: str,
        *,
        lm: nn.Module,
        compiled: Compiled,
        prompt: torch.Tensor,
        new_tokens: int,
        setup_s: float,
    ):
        from transformers import StaticCache

        super().__init__(name, setup_s=setup_s)
        lm.config.use_cache = True
        self.cache = StaticCache(config=lm.config, max_cache_len=prompt.shape[1] + new_tokens)
        self.lm, self.compiled, self.prompt, self.new_tokens = lm, compiled, prompt, new_tokens
        # transformers 5.x takes the KV cache as `cache` (the old keyword warns that it is deprecated)
        self.cache_arg = "cache" if "cache" in inspect.signature(lm.forward).parameters else "past_key_values"
        # the unit's start, the prefill, the decode's start, each decode step
        self.marks_per_unit = new_tokens + 2
        self.tokens: torch.Tensor | None = None  # the greedy tokens of the last recorded generation

    def run_unit(self, laps: Laps | None, *, record: bool = True) -> None:
        prompt, device = self.prompt, self.prompt.device
        batch, length = prompt.shape
        self.cache.reset()
        positions = torch.arange(length, device=device).expand(batch, length)
        mark = laps.mark if laps is not None else lambda label: None  # warm-up and diagnostics mark nothing
        if laps is not None:  # a request's time to first token: from an idle device, its launch included
            synchronize(device)
        mark(None)
        token = self.compiled.forward(
            {"inputs": {"input_ids": prompt, "position_ids": positions, self.cache_arg: self.cache}}
        )
        mark(TTFT)
        tokens = [token.clone()]
        position = torch.full((batch, 1), length, dtype=torch.long, device=device)
        mark(None)
        for _ in range(self.new_tokens - 1):
            inputs = {"input_ids": token, "position_ids": position, self.cache_arg: self.cache}
            token = self.compiled.step({"inputs": inputs}).clone()  # a CUDA-graph replay reuses its output
            position += 1  # in place: the same input tensor, no recompile
            mark(DECODE)
            tokens.append(token)
        if record:
            self.tokens = torch.cat(tokens, dim=1)
            self.done += 1

    def release(self) -> None:
        self.lm = self.compiled = self.cache = None  # type: ignore[assignment]


@dataclass(frozen=True, kw_only=True)
class Prefill:
    """Time to first token (the prefill) of the measured generations, and the paired eager copy's."""

    ttft: Latency
    eager_ttft: Latency | None
    prompt_tokens: int
    new_tokens: int

    def metrics(self) -> dict[str, float]:
        m = {
            "generate/ttft_p50_ms": self.ttft.p50,
            "generate/ttft_p90_ms": self.ttft.p90,
            "generate/ttft_ci95_low_ms": self.ttft.ci95_low,
            "generate/ttft_ci95_high_ms": self.ttft.ci95_high,
            "generate/prompt_tokens": float(self.prompt_tokens),
            "generate/new_tokens": float(self.new_tokens),
        }
        if self.eager_ttft is not None:
            m["eager/ttft_p50_ms"] = self.eager_ttft.p50
            m["speedup/ttft_vs_eager"] = self.eager_ttft.p50 / self.ttft.p50
        return m


@dataclass(frozen=True, kw_only=True)
class TokenParity:
    """Do the compiled and the eager decode choose the same greedy tokens?"""

    agree: int  # leading tokens equal in every sequence
    near_tie: bool  # they part where eager's two best next tokens are a near-tie
    required: int  # scenario.parity_tokens

    def metrics(self) -> dict[str, float]:
        return {
            "parity/tokens_agree": float(self.agree),
            "parity/near_tie": float(self.near_tie),
            "parity/ok": float(self.agree >= self.required or self.near_tie),
        }


class GenerateScenario(Scenario):
    timed_unit = "generation"

    def __init__(self, cfg: Config, ctx: WorkerContext):
        super().__init__(cfg, ctx)
        scenario = cfg.scenario.resolved(cfg)  # prompt and new tokens fitted to the model where null
        self.batch_size = int(scenario.samples_per_unit(cfg))
        self.prompt_len, self.new_tokens = scenario.prompt_len, scenario.new_tokens
        self.parity_tokens = scenario.parity_tokens
        self.info["batch_size"] = self.batch_size

    def method_lines(self) -> list[str]:
        scope = self.cfg.compile.scope
        lines = [
            f"Generation: batch {self.batch_size}, a {self.prompt_len}-token prompt, {self.new_tokens} new tokens (greedy, static KV cache); "
            "a timed unit below is one generation.",
            "Decode step time (the headline step/* figures): a lap at every token boundary, no host sync inside the decode loop; "
            "time to first token as a request sees it: the device synchronized before the prefill, then a lap around it (its launch included).",
            f"What is compiled: compile.scope={scope} ({'the decode step; the prefill runs eager' if scope == 'step' else 'the model, for prefill and decode'}).",
        ]
        if self.cfg.paired:
            lines.append(
                f"Token parity: the first {self.parity_tokens} greedy tokens of the compiled and the eager copy must agree."
            )
        return lines

    def prepare(self) -> nn.Module:
        return NextToken()

    def prompt(self) -> torch.Tensor:
        generator = torch.Generator(device=self.device).manual_seed(self.cfg.trainer.seed)
        shape = (self.batch_size, self.prompt_len)
        return torch.randint(self.spec.vocab_size, shape, generator=generator, device=self.device)

    def recipe(self) -> Recipe:
        def unit(name: str, compiled: Compiled, lm: nn.Module, setup_s: float) -> GenerationVariant:
            return GenerationVariant(
                name,
                lm=lm,
                compiled=compiled,
                prompt=self.prompt(),
                new_tokens=self.new_tokens,
                setup_s=setup_s,
            )

        return Recipe(
            step=decode_step,
            unit=unit,
            adapt=lambda built: built.model,  # the HF causal LM inside LogitsOnly
            compiles=Decoder,
            build_in_dtype=True,  # no float32 copy of a 7B model first
        )

    def explain(self) -> None:
        self.info["explain_note"] = (
            "diagnose.explain is not run for generations (a decode step needs its cache)"
        )

    def finish_report(self, report: UnitReport, measured: Measured) -> None:
        main, eager = measured.main, measured.eager
        assert isinstance(main, GenerationVariant)
        ttft = main.latency(TTFT)
        eager_ttft = eager.latency(TTFT) if isinstance(eager, GenerationVariant) else None
        report.records.append(
            Prefill(
                ttft=ttft, eager_ttft=eager_ttft, prompt_tokens=self.prompt_len, new_tokens=self.new_tokens
            )
        )
        if self.device.type == "cuda":
            self.info["weights_gib"] = gib(self.info["parameters"] * self.precision.param_dtype.itemsize)
            per_step, how = decode_bytes(
                main.lm, batch=self.batch_size, cache_len=self.prompt_len + self.new_tokens
            )
            bandwidth = DecodeBandwidth.of(
                bytes_per_step=per_step,
                step_time_ms=report.step.p50,
                gpu_name=torch.cuda.get_device_name(self.device),
            )
            report.records.append(bandwidth)
            self.info["decode_bandwidth_note"] = f"{how}; {bandwidth.note}"
        if isinstance(eager, GenerationVariant):
            assert main.tokens is not None and eager.tokens is not None
            agree = leading_agreement(main.tokens, eager.tokens)
            tie = agree < self.new_tokens and self.parts_at_a_tie(eager.lm, eager.tokens, agree)
            report.records.append(TokenParity(agree=agree, near_tie=tie, required=self.parity_tokens))
        self.info["ttft_ms"] = [round(ms, 4) for ms in main.laps[TTFT]]
        per_generation = self.new_tokens - 1
        decode = main.laps[DECODE]
        self.info["decode_p50_ms_per_generation"] = [
            round(statistics.median(decode[i : i + per_generation]), 4)
            for i in range(0, len(decode), per_generation)
        ]

    def parts_at_a_tie(self, lm: nn.Module, tokens: torch.Tensor, agree: int) -> bool:
        """Eager's logits where the two decodes part: the prompt and the tokens both chose, run once more."""
        sequence = torch.cat([self.prompt(), tokens[:, :agree]], dim=1)
        logits = lm(input_ids=sequence, use_cache=False).logits[:, -1]
        tie = near_tie(logits)
        self.info["tokens_part_at"] = {"index": agree, "near_tie": tie}
        return tie


@dataclass(frozen=True, kw_only=True)
class DecodeBandwidth:
    """A decode step reads every weight once and the whole static KV cache: bytes over time per step is
    the memory bandwidth it achieved, which bounds decode speed."""

    bytes_per_step: float
    achieved_gbs: float
    utilization: float | None  # of the GPU's peak; None where none is known (note says why)
    note: str

    @classmethod
    def of(cls, *, bytes_per_step: float, step_time_ms: float, gpu_name: str | None) -> DecodeBandwidth:
        achieved = bytes_per_step / (step_time_ms / 1000) / 1e9
        peak, note = peak_bandwidth_gbs(gpu_name)
        return cls(
            bytes_per_step=bytes_per_step,
            achieved_gbs=achieved,
            utilization=achieved / peak if peak else None,
            note=note,
        )

    def metrics(self) -> dict[str, float]:
        m = {"generate/decode_bandwidth_gbs": self.achieved_gbs}
        if self.utilization is not None:
            m["generate/decode_bandwidth_util"] = self.utilization
        return m


def decode_bytes(lm: torch.nn.Module, *, batch: int, cache_len: int) -> tuple[float, str]:
    """Bytes one decode step reads: the weights (the input embedding only a row per token, unless the
    LM head shares it) and the K and V of every layer over the whole static cache (attention reads all
    of it, masked), for every sequence of the batch; and how they were counted."""
    params = sum(p.numel() * p.element_size() for p in lm.parameters())
    embedding = lm.get_input_embeddings().weight
    head = lm.get_output_embeddings()
    tied = head is not None and head.weight is embedding
    weights = params - (0 if tied else embedding.numel() * embedding.element_size())
    c = lm.config
    layers = getattr(c, "num_hidden_layers", None) or c.n_layer
    heads = getattr(c, "num_attention_heads", None) or c.n_head
    hidden = getattr(c, "hidden_size", None) or c.n_embd
    kv_heads = getattr(c, "num_key_value_heads", None) or heads
    head_dim = getattr(c, "head_dim", None) or hidden // heads
    kv = 2 * layers * kv_heads * head_dim * cache_len * batch * embedding.element_size()
    how = (
        f"bytes per decode step: weights {weights / 1e9:.3f} GB (input embedding {'shared with the head' if tied else 'left out'}) "
        f"+ KV cache {kv / 1e9:.3f} GB ({layers} layers x 2 x {kv_heads} heads x {head_dim} x {cache_len} positions x batch {batch})"
    )
    return float(weights + kv), how


def leading_agreement(a: torch.Tensor, b: torch.Tensor) -> int:
    """How many leading tokens agree in every sequence of the batch."""
    equal = (a == b).all(dim=0).tolist()
    return next((i for i, same in enumerate(equal) if not same), len(equal))
