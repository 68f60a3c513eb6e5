"""The training scenario (`scenario=train`, the default): training steps on fake data, measured by the one
protocol (:mod:`pipeline.scenarios.protocol`); this module supplies the loss, the step (:mod:`.step`) and the
loss curves."""

from __future__ import annotations

import functools

import torch
from torch import nn

from losses import build_loss
from pipeline.axes.compile import Compiled
from pipeline.diagnose.flops import count_flops
from pipeline.measure.timing import StepVariant
from pipeline.scenarios.protocol import Measured, Scenario, UnitReport
from pipeline.scenarios.train.step import make_train_step
from pipeline.scenarios.variant import Recipe


class TrainScenario(Scenario):
    def prepare(self) -> nn.Module:
        """The loss, shared by every variant (a distillation teacher is built and initialized on the device)."""
        torch.manual_seed(self.cfg.trainer.seed + 1)
        with torch.device(self.device):
            return build_loss(self.cfg.loss, self.spec).to(dtype=self.precision.param_dtype).train()

    def recipe(self) -> Recipe:
        def unit(name: str, compiled: Compiled, model: nn.Module, setup_s: float) -> StepVariant:
            # grown between rounds
            losses = torch.zeros(self.cfg.trainer.steps, device=self.device, dtype=torch.float32)
            return StepVariant(name, compiled.step, self.batches(), outputs=losses, setup_s=setup_s)

        step = functools.partial(make_train_step, precision=self.precision, device_type=self.device.type)
        return Recipe(step=step, unit=unit)

    def finish_report(self, report: UnitReport, measured: Measured) -> None:
        main = measured.main
        assert isinstance(main, StepVariant)
        losses = main.recorded_outputs()
        report.series["curve/loss"] = losses
        report.extra.update({"loss/first": losses[0], "loss/final": losses[-1]})
        if isinstance(measured.eager, StepVariant):
            report.series["curve/eager_loss"] = measured.eager.recorded_outputs()

    def count_flops(self) -> int | None:
        if not self.cfg.diagnose.flops:
            return None
        try:
            return count_flops(self.cfg.model, self.cfg.loss, self.batch_size)
        except Exception as exc:  # a model that cannot run on the meta device: say so, measure anyway
            self.info["flops_note"] = f"FLOPs not counted: {type(exc).__name__}: {exc}"[:400]
            return None
