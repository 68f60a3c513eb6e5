"""`scenario=inference`, torch-free: forward calls only, the model in eval mode under
torch.inference_mode. A unit is one call; its samples are the call's batch. Where `batch_sizes` cycles
several, a unit is one call of each size in turn (a `call cycle`), its samples their sum."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pipeline.config.errors import ConfigError
from pipeline.config.fields import doc
from pipeline.measure.objective import Work
from pipeline.scenarios.base import ScenarioConfig

if TYPE_CHECKING:
    from pipeline.config.schema import Config


CYCLE = "call cycle"  # the unit where batch sizes cycle: one call of each


@dataclass(kw_only=True)
class InferenceConfig(ScenarioConfig):
    batch_size: int | None = doc(None, "samples per call; null: trainer.batch_size", gt=0)
    batch_sizes: list[int] = doc(
        [],
        "cycle these batch sizes through warm-up and measurement, a unit being one call of each (the "
        "dynamic-batch case: with compile.dynamic=true one graph serves them all); empty: scenario.batch_size only",
    )
    topk: int = doc(5, "output parity compares the top-k classes of compiled and eager logits", gt=0)

    name: ClassVar[str] = "inference"
    runner: ClassVar[str] = "pipeline.scenarios.inference.scenario:InferenceScenario"
    unit: ClassVar[str] = "forward call"

    def check(self, at: str) -> Iterator[ConfigError]:
        if any(not isinstance(b, int) or b < 1 for b in self.batch_sizes):
            yield ConfigError(
                f"{at}.batch_sizes", list(self.batch_sizes), "positive batch sizes, e.g. [2,3,4,5]"
            )

    def sizes(self, cfg: Config) -> list[int]:
        """The batch sizes the calls take, in turn."""
        return list(self.batch_sizes) or [self.batch_size or cfg.trainer.batch_size]

    def samples_per_unit(self, cfg: Config) -> float:
        return sum(self.sizes(cfg))

    def resolved(self, cfg: Config) -> InferenceConfig:
        """The batch of a call where one size serves them all (cycling sizes say theirs)."""
        if self.batch_sizes or self.batch_size is not None:
            return self
        return dataclasses.replace(self, batch_size=cfg.trainer.batch_size)

    def work(self, cfg: Config) -> Work:
        """Judged on the latency one call takes as a request (`sweep.objective` can pick throughput)."""
        unit = CYCLE if len(self.sizes(cfg)) > 1 else self.unit
        return dataclasses.replace(super().work(cfg), unit=unit, objective="latency/p50_ms")
