"""A scenario added with one config file (tests/conf/scenario/fwd_bwd.yaml) and this one module: forward
and backward without an optimizer step. It names its step and its timed unit (`recipe`); the axes
(weights' dtype, precision, parallel wrap, compilation and the compile call's time) are applied by
pipeline/scenarios/variant.py, and the protocol (pipeline/scenarios/protocol.py) gives it everything
else: warm-up, paired eager rounds and loss parity, compile time, memory, noise, the report.

The built-in scenarios keep their config class apart from their implementation (config.py, scenario.py)
so that a job's parent never imports torch; a scenario of one's own may be one module, as this one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from losses import build_loss
from pipeline.axes.compile import Compiled, StepFn
from pipeline.measure.timing import StepVariant
from pipeline.scenarios.base import ScenarioConfig
from pipeline.scenarios.protocol import Scenario
from pipeline.scenarios.variant import Recipe


@dataclass(kw_only=True)
class FwdBwdConfig(ScenarioConfig):
    name: ClassVar[str] = "fwd_bwd"
    runner: ClassVar[str] = "tests.scenario_fwd_bwd:FwdBwdScenario"
    unit: ClassVar[str] = "forward and backward"
    trains: ClassVar[bool] = True  # it has a loss (and gradients), so every compile scope applies


class FwdBwdScenario(Scenario):
    def prepare(self) -> nn.Module:
        with torch.device(self.device):
            return build_loss(self.cfg.loss, self.spec)

    def recipe(self) -> Recipe:
        def step(forward_loss: nn.Module, net: nn.Module, optimizer: Any) -> StepFn:
            def fwd_bwd(batch: dict[str, torch.Tensor]) -> torch.Tensor:
                for p in net.parameters():
                    p.grad = None
                with self.precision.autocast(self.device.type):
                    loss = forward_loss(batch)
                loss.backward()
                return loss.detach()

            return fwd_bwd

        def unit(name: str, compiled: Compiled, net: nn.Module, setup_s: float) -> StepVariant:
            losses = torch.zeros(self.cfg.trainer.steps, device=self.device)
            return StepVariant(name, compiled.step, self.batches(), outputs=losses, setup_s=setup_s)

        return Recipe(step=step, unit=unit)
