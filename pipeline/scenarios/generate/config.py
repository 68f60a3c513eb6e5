"""`scenario=generate`, torch-free: a prefill of `prompt_len` tokens (time to first token), then greedy
decode with a static KV cache, for causal LMs that list it in their config's `scenarios`. A unit of its
headline figure is one decode step: one new token for each of the batch's sequences."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pipeline.config.errors import ConfigError
from pipeline.config.fields import doc
from pipeline.scenarios.base import ScenarioConfig

if TYPE_CHECKING:
    from pipeline.config.schema import Config

HF_FACTORY = "models.hf.create"  # a generation needs an HF causal LM (its cache, its generate-style call)


@dataclass(kw_only=True)
class GenerateConfig(ScenarioConfig):
    batch_size: int | None = doc(None, "sequences per generation; null: trainer.batch_size", gt=0)
    prompt_len: int = doc(128, "prompt tokens, processed by the prefill", gt=0)
    new_tokens: int = doc(64, "tokens per generation (the first from the prefill, the rest decoded)", gt=1)
    parity_tokens: int = doc(
        8, "the first this many greedy tokens of compiled and eager decode must agree", gt=0
    )

    name: ClassVar[str] = "generate"
    runner: ClassVar[str] = "pipeline.scenarios.generate.scenario:GenerateScenario"
    unit: ClassVar[str] = "decode step"
    opt_in: ClassVar[bool] = True

    def check(self, at: str) -> Iterator[ConfigError]:
        if self.parity_tokens > self.new_tokens:
            yield ConfigError(
                f"{at}.parity_tokens", self.parity_tokens, f"must be <= scenario.new_tokens={self.new_tokens}"
            )

    def fits(self, cfg: Config) -> Iterator[ConfigError]:
        errors = list(super().fits(cfg))
        yield from errors
        if errors:
            return
        if cfg.precision.autocast_dtype is not None:
            yield ConfigError(
                "precision.autocast_dtype",
                cfg.precision.autocast_dtype,
                "a generation runs in the weights' dtype (its KV cache takes one dtype): precision=bf16, fp16 or fp32",
            )
        if cfg.model._target_ != HF_FACTORY or cfg.model.input.target != "next_token":
            yield ConfigError(
                "scenario",
                self.name,
                f"needs a causal LM built by {HF_FACTORY} (model.input.target=next_token)",
            )
        need = self.prompt_len + self.new_tokens
        if need > cfg.model.input.seq_len:
            yield ConfigError(
                "scenario.new_tokens",
                self.new_tokens,
                f"prompt_len + new_tokens = {need} must be <= model.input.seq_len={cfg.model.input.seq_len} (the KV cache's length)",
            )

    def samples_per_unit(self, cfg: Config) -> float:
        return float(self.batch_size or cfg.trainer.batch_size)

    def tokens_per_sample(self, cfg: Config) -> int | None:
        return 1  # a decode step makes one token of each sequence
