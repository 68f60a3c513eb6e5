"""The inference scenario (`scenario=inference`): forward calls only, the model in eval mode and every
call under `torch.inference_mode()`, measured by the shared protocol of
:mod:`pipeline.scenarios.stepped` (a step is one call; its latency statistics are `step/*`, p99
included). Compiled outputs are checked against the paired eager copy's on the same batch (max
absolute and relative logit error, top-1 and top-k agreement).

`scenario.batch_sizes=[2,3,4,5]` serves batches of those sizes in turn through warm-up and
measurement: with `compile.dynamic=true` one graph must serve them all (`diagnose/unique_graphs`,
`diagnose/recompiles_after_warmup`).
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn

from pipeline.axes.compile import Compiled, StepFn, apply_compile
from pipeline.axes.data import DeviceBatches, Interleaved
from pipeline.axes.precision import Precision
from pipeline.config.schema import CompileConfig, Config
from pipeline.measure.parity import output_parity
from pipeline.measure.timing import Variant
from pipeline.scenarios.base import WorkerContext
from pipeline.scenarios.stepped import Measured, SteppedScenario, StepReport


class Outputs(nn.Module):
    """The inference "head": the step's result is the model's output (there is no loss)."""

    def forward(self, batch: dict[str, torch.Tensor], outputs: torch.Tensor) -> torch.Tensor:
        return outputs


def inference_step_factory(*, precision: Precision, device_type: str):
    """`make_step(forward, *, mark_cudagraph_step)` for apply_compile: one forward call. The caller holds
    torch.inference_mode() around warm-up, measurement and diagnostics alike, so the compiled code sees
    one grad mode (a switch would recompile)."""

    def make_step(forward: nn.Module, *, mark_cudagraph_step: bool) -> StepFn:
        def infer(batch: dict[str, torch.Tensor]) -> torch.Tensor:
            if mark_cudagraph_step:
                torch.compiler.cudagraph_mark_step_begin()
            with precision.autocast(device_type):
                return forward(batch)

        return infer

    return make_step


class InferenceScenario(SteppedScenario):
    def __init__(self, cfg: Config, ctx: WorkerContext):
        super().__init__(cfg, ctx)
        scenario = cfg.scenario
        self.sizes = list(scenario.batch_sizes) or [scenario.batch_size or cfg.trainer.batch_size]
        self.batch_size = statistics.fmean(self.sizes)  # samples per call, for throughput
        self.info["batch_sizes"] = self.sizes

    def method(self) -> str:
        sizes = ", ".join(map(str, self.sizes))
        head = (
            f"Inference: forward calls only, the model in eval mode, every call under torch.inference_mode(), batch {sizes} "
            "(a step below is one call; its latency statistics include p99). Output parity: compiled and eager logits on one batch."
        )
        return head + "\n" + super().method()

    def prepare(self) -> nn.Module:
        return Outputs()

    def batch_stream(self) -> DeviceBatches | Interleaved:
        streams = [self.batches(size) for size in self.sizes]
        return streams[0] if len(streams) == 1 else Interleaved(streams)

    def make_variant(self, name: str, settings: CompileConfig) -> tuple[Variant, Compiled]:
        assert self.head is not None
        net = self.fresh_model().to(device=self.device, dtype=self.precision.param_dtype).eval()
        net.requires_grad_(False)
        make_step = inference_step_factory(precision=self.precision, device_type=self.device.type)
        started = time.perf_counter()
        compiled = apply_compile(settings, model=net, loss=self.head, make_step=make_step)
        setup_s = time.perf_counter() - started
        variant = Variant(
            name, compiled.step, self.batch_stream(), torch.zeros(0), setup_s=setup_s, keep_outputs=False
        )
        return variant, compiled

    def measure(self) -> Measured:
        with torch.inference_mode():
            return super().measure()

    def diagnose_steps(self, main: Variant, report: StepReport) -> None:
        with torch.inference_mode():
            super().diagnose_steps(main, report)

    def finish_report(self, report: StepReport, measured: Measured) -> None:
        """Output parity: compiled and eager on the same batch (their weights are equal: same seed,
        never trained)."""
        if measured.eager is None:
            return
        with (
            torch.inference_mode()
        ):  # made as the measured batches were, or the compiled code would recompile
            batch = next(self.batches(self.sizes[0], num_batches=1))
            compiled = measured.main.step(batch).clone()  # a CUDA-graph replay reuses its output
            eager = measured.eager.step(batch).clone()
        parity = output_parity(compiled, eager, k=self.cfg.scenario.topk, rtol=self.cfg.benchmark.loss_rtol)
        report.extra.update(parity.metrics())
