"""`scenario=generate`, torch-free: a prefill of `prompt_len` tokens, then greedy decode with a static KV
cache, for causal LMs that list it in `model.scenarios`; a unit of its headline is one decode step. Null
lengths fit the model's sequence (the cache's): 128 + 64 where it takes 192, else two thirds prompt and a
third new tokens (22 + 10 for 32); set ones must fit, and the error says what would."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pipeline.config.errors import ConfigError
from pipeline.config.fields import doc
from pipeline.scenarios.base import ScenarioConfig

if TYPE_CHECKING:
    from pipeline.config.schema import Config

HF_FACTORY = "models.hf.create"  # a generation needs an HF causal LM (its cache, its generate-style call)
PROMPT_LEN, NEW_TOKENS, PARITY_TOKENS = 128, 64, 8  # what null means, where the model's sequence takes them


@dataclass(kw_only=True)
class GenerateConfig(ScenarioConfig):
    batch_size: int | None = doc(None, "sequences per generation; null: trainer.batch_size", gt=0)
    prompt_len: int | None = doc(
        None,
        f"prompt tokens, processed by the prefill; null: {PROMPT_LEN}, or two thirds of model.input.seq_len "
        "when that is shorter than the prompt and the new tokens",
        gt=0,
    )
    new_tokens: int | None = doc(
        None,
        f"tokens per generation (the first from the prefill, the rest decoded); null: {NEW_TOKENS}, or what "
        "model.input.seq_len leaves after the prompt",
        gt=1,
    )
    parity_tokens: int | None = doc(
        None,
        f"the first this many greedy tokens of compiled and eager decode must agree; null: {PARITY_TOKENS}, or the new "
        "tokens when fewer",
        gt=0,
    )

    name: ClassVar[str] = "generate"
    runner: ClassVar[str] = "pipeline.scenarios.generate.scenario:GenerateScenario"
    unit: ClassVar[str] = "decode step"
    opt_in: ClassVar[bool] = True

    def check(self, at: str) -> Iterator[ConfigError]:
        if (
            self.parity_tokens is not None
            and self.new_tokens is not None
            and self.parity_tokens > self.new_tokens
        ):
            yield ConfigError(
                f"{at}.parity_tokens", self.parity_tokens, f"must be <= scenario.new_tokens={self.new_tokens}"
            )

    def lengths(self, cfg: Config) -> tuple[int, int]:
        """(prompt, new tokens) of a generation: as set, nulls fitted to the model (module docstring)."""
        seq, prompt, new = cfg.model.input.seq_len, self.prompt_len, self.new_tokens
        if prompt is None and new is None:
            if seq >= PROMPT_LEN + NEW_TOKENS:
                return PROMPT_LEN, NEW_TOKENS
            new = max(2, seq // 3)
            return max(1, seq - new), new
        if prompt is None:
            assert new is not None
            return max(1, min(PROMPT_LEN, seq - new)), new
        if new is None:
            return prompt, max(2, min(NEW_TOKENS, seq - prompt))
        return prompt, new

    def resolved(self, cfg: Config) -> GenerateConfig:
        prompt, new = self.lengths(cfg)
        parity = self.parity_tokens if self.parity_tokens is not None else min(PARITY_TOKENS, new)
        return dataclasses.replace(
            self,
            batch_size=int(self.samples_per_unit(cfg)),
            prompt_len=prompt,
            new_tokens=new,
            parity_tokens=parity,
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
        seq = cfg.model.input.seq_len
        prompt, new = self.lengths(cfg)
        if prompt + new > seq:
            key = "scenario.new_tokens" if self.new_tokens is not None else "scenario.prompt_len"
            yield ConfigError(
                key,
                self.new_tokens if self.new_tokens is not None else self.prompt_len,
                f"prompt_len + new_tokens = {prompt} + {new} must be <= model.input.seq_len={seq} (the KV "
                f"cache's length): {self.fitting(seq)}",
            )
            return
        parity = self.resolved(cfg).parity_tokens
        if parity is not None and parity > new:
            yield ConfigError(
                "scenario.parity_tokens", parity, f"must be <= the {new} new tokens of a generation"
            )

    def fitting(self, seq: int) -> str:
        """The overrides that make a generation fit a model of `seq` positions (for an error's end)."""
        if self.new_tokens is not None and self.new_tokens < seq:
            return f"e.g. scenario.prompt_len={seq - self.new_tokens}, or leave both null to fit the model"
        new = max(2, seq // 3)
        return (
            f"e.g. scenario.prompt_len={max(1, seq - new)} scenario.new_tokens={new}, or leave both null "
            "to fit the model"
        )

    def samples_per_unit(self, cfg: Config) -> float:
        return float(self.batch_size or cfg.trainer.batch_size)

    def tokens_per_sample(self, cfg: Config) -> int | None:
        return 1  # a decode step makes one token of each sequence
