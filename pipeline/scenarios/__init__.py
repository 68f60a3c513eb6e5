"""Stage 4: what a job runs and measures. A scenario owns its step and its figures; the worker around it
is shared. `train` (the training step of `train_step`), `inference` (forward calls) and `generate`
(prefill and decode with a static KV cache); `stepped` holds what train and inference share."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.config.schema import Config
    from pipeline.scenarios.base import Scenario

# scenario name -> "module:class"; imported only in the worker (they import torch)
SCENARIOS = {
    "train": "pipeline.scenarios.train:TrainScenario",
    "inference": "pipeline.scenarios.inference:InferenceScenario",
    "generate": "pipeline.scenarios.generate:GenerateScenario",
}


def scenario_class(cfg: Config) -> type[Scenario]:
    module, _, name = SCENARIOS[cfg.scenario.name].partition(":")
    return getattr(import_module(module), name)
