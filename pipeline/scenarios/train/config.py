"""`scenario=train` (the default), torch-free: training steps (zero-grad, forward, loss, backward,
optimizer step) on fake data. Its work per unit is one training step of `trainer.batch_size` samples
per rank."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pipeline.config.errors import ConfigError
from pipeline.scenarios.base import ScenarioConfig

if TYPE_CHECKING:
    from pipeline.config.schema import Config


@dataclass(kw_only=True)
class TrainConfig(ScenarioConfig):
    """Training steps; no keys of its own (the step counts and batch are `trainer`'s)."""

    name: ClassVar[str] = "train"
    runner: ClassVar[str] = "pipeline.scenarios.train.scenario:TrainScenario"
    unit: ClassVar[str] = "training step"
    trains: ClassVar[bool] = True
    runs_distributed: ClassVar[bool] = True

    def fits(self, cfg: Config) -> Iterator[ConfigError]:
        yield from super().fits(cfg)
        if cfg.precision.param_dtype == "float16":
            yield ConfigError(
                "precision.param_dtype",
                "float16",
                "not for training (no master weights); use it with scenario=inference or generate",
            )
