"""The training scenario (`scenario=train`, the default): a fixed number of training steps on fake data,
measured by the one protocol (:mod:`pipeline.scenarios.protocol`: solo memory phases, paired eager
rounds, diagnostics); this module supplies the training step (:mod:`.step`), the loss and the loss
curves."""

from __future__ import annotations

import time

import torch
from torch import nn

from losses import build_loss
from pipeline.axes.compile import Compiled, apply_compile
from pipeline.axes.parallel import parallelize
from pipeline.config.schema import CompileConfig
from pipeline.diagnose.flops import count_flops
from pipeline.measure.timing import StepVariant
from pipeline.scenarios.protocol import Measured, Scenario, UnitReport
from pipeline.scenarios.train.step import build_optimizer, train_step_factory


class TrainScenario(Scenario):
    """One training job inside the worker: build from the config, warm up, measure, diagnose."""

    timed_unit = "step"

    def prepare(self) -> nn.Module:
        """The loss, shared by every variant (a distillation teacher is built and initialized on the device)."""
        torch.manual_seed(self.cfg.trainer.seed + 1)
        with torch.device(self.device):
            return build_loss(self.cfg.loss, self.spec).to(dtype=self.precision.param_dtype).train()

    def make_variant(self, name: str, settings: CompileConfig) -> tuple[StepVariant, Compiled]:
        trainer, device, precision = self.cfg.trainer, self.device, self.precision
        assert self.head is not None
        net = precision.convert(self.fresh_model().to(device=device, dtype=precision.param_dtype).train())
        net = parallelize(
            net, self.cfg.parallel, device
        )  # DDP or FSDP2, before the optimizer sees its parameters
        optimizer = build_optimizer(
            net.parameters(), trainer.optimizer, tensor_lr=settings.compiles_optimizer, device=device
        )
        make_step = train_step_factory(
            optimizer=optimizer,
            scaler=precision.make_scaler(device.type),
            precision=precision,
            device_type=device.type,
        )
        started = time.perf_counter()
        compiled = apply_compile(
            settings, model=net, loss=self.head, make_step=make_step, optimizer=optimizer
        )
        setup_s = time.perf_counter() - started
        losses = torch.zeros(trainer.steps, device=device, dtype=torch.float32)  # grown between rounds
        variant = StepVariant(name, compiled.step, self.batches(), outputs=losses, setup_s=setup_s)
        return variant, compiled

    def paired_losses(self, measured: Measured) -> tuple[list[float], list[float]] | None:
        assert isinstance(measured.main, StepVariant) and isinstance(measured.eager, StepVariant)
        compiled, eager = measured.main.recorded_outputs(), measured.eager.recorded_outputs()
        both = min(len(compiled), len(eager))  # the compiled variant ran its solo round more
        return compiled[:both], eager[:both]

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
