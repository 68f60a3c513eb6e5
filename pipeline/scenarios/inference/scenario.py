"""The inference scenario (`scenario=inference`): forward calls in eval mode under `torch.inference_mode()`,
a unit being one call. Compiled outputs are checked against the paired eager copy's on one batch; with
`scenario.batch_sizes` a unit is one call of each size in turn, a cycle (with `compile.dynamic=true` one
graph serves them all)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from pipeline.axes.compile import Compiled, StepFn
from pipeline.axes.data import Batch, cycles
from pipeline.config.schema import Config
from pipeline.measure.parity import output_parity
from pipeline.measure.stats import PAIRED, Latency
from pipeline.measure.timing import LATENCY, StepVariant
from pipeline.scenarios.protocol import Measured, Scenario, UnitReport, WorkerContext
from pipeline.scenarios.variant import Recipe


class Outputs(nn.Module):
    """The inference "head": the call's result is the model's output (there is no loss)."""

    def forward(self, batch: dict[str, torch.Tensor], outputs: torch.Tensor) -> torch.Tensor:
        return outputs


@dataclass(frozen=True, kw_only=True)
class RequestLatency:
    """Calls one at a time, each synchronized before and after: the latency one request sees (its launch
    included), beside the back-to-back figure (`step/*`, what `throughput/*` is made of) and its speedup."""

    latency: Latency
    back_to_back: Latency | None  # on a GPU, the same calls issued back to back (step/*); a CPU has no queue
    eager_back_to_back: Latency | None  # the paired eager copy's back-to-back calls
    back_to_back_speedup: float | None

    @property
    def back_to_back_above(self) -> bool:
        """Calls back to back read slower than calls alone, beyond both medians' intervals: a queue is never
        slower per call than an idle device unless the host held the queued calls back."""
        return self.back_to_back is not None and self.back_to_back.ci95_low > self.latency.ci95_high

    def metrics(self) -> dict[str, float]:
        m = self.latency.metrics("latency/")
        if self.back_to_back is not None:
            m["step/above_latency"] = float(self.back_to_back_above)
        if self.eager_back_to_back is not None and self.back_to_back_speedup is not None:
            m.update(self.eager_back_to_back.metrics("eager/", PAIRED))
            m["speedup/back_to_back_vs_eager"] = self.back_to_back_speedup
        return m


class InferenceScenario(Scenario):
    timed_unit = "call"
    measures_latency = True

    def __init__(self, cfg: Config, ctx: WorkerContext):
        super().__init__(cfg, ctx)
        self.sizes = cfg.scenario.sizes(cfg)
        self.batch_size = self.sizes[0]
        self.cycling = len(self.sizes) > 1  # a unit is a call of each size: every unit holds the same work
        self.info["batch_sizes"] = self.sizes

    def method_lines(self) -> list[str]:
        sizes = ", ".join(map(str, self.sizes))
        cycle = (
            f" A unit is one call of each batch size in turn ({sizes}): every figure is of such a cycle."
            if self.cycling
            else ""
        )
        return [
            f"Inference: forward calls only, the model in eval mode, every call under torch.inference_mode(), batch {sizes}.{cycle} "
            "Two figures: the latency one request sees (latency/*: each call alone, synchronized before and after and timed by "
            "the host's clock, its launch included; the objective and speedup/vs_eager by default) and calls issued back to back "
            "(step/*, what throughput/* is made of; speedup/back_to_back_vs_eager). Output parity: compiled and eager logits on one batch."
        ]

    def prepare(self) -> nn.Module:
        return Outputs()

    def batch_stream(self) -> Iterator[Batch | tuple[Batch, ...]]:
        """A unit's input: a batch, or a batch of each size (a cycle)."""
        streams = [self.batches(size) for size in self.sizes]
        return cycles(streams) if self.cycling else streams[0]

    def recipe(self) -> Recipe:
        precision, device_type = self.precision, self.device.type

        def step(forward: nn.Module, model: nn.Module, optimizer: torch.optim.Optimizer | None) -> StepFn:
            """One forward call (the protocol holds inference_mode around it)."""

            def infer(batch: dict[str, torch.Tensor]) -> torch.Tensor:
                with precision.autocast(device_type):
                    return forward(batch)

            return infer

        def unit(name: str, compiled: Compiled, model: nn.Module, setup_s: float) -> StepVariant:
            call = compiled.step

            def cycle(batches: tuple[Batch, ...]) -> torch.Tensor:
                """One call of each size, back to back; the last call's output."""
                for batch in batches:
                    out = call(batch)
                return out

            return StepVariant(name, cycle if self.cycling else call, self.batch_stream(), setup_s=setup_s)

        return Recipe(step=step, unit=unit)

    def finish_report(self, report: UnitReport, measured: Measured) -> None:
        """The latency a request sees beside the back-to-back figure; output parity: compiled and eager on
        the same batch (their weights are equal: same seed, never trained)."""
        confidence = measured.stop.confidence if measured.stop is not None else 0.95
        eager = measured.eager.latency(confidence=confidence) if measured.eager is not None else None
        report.records.append(
            RequestLatency(
                latency=measured.main.latency(LATENCY, confidence),
                back_to_back=report.step if self.device.type == "cuda" else None,
                eager_back_to_back=eager,
                back_to_back_speedup=eager.p50 / report.step.p50 if eager is not None else None,
            )
        )
        if not isinstance(measured.eager, StepVariant):
            return
        main = measured.main
        assert isinstance(main, StepVariant)
        # a batch made as the measured ones, or it recompiles
        batch = next(self.batches(self.sizes[0], num_batches=1))
        unit = (batch,) if self.cycling else batch  # a one-call cycle
        compiled = main.step(unit).clone()  # a CUDA-graph replay reuses its output
        eager = measured.eager.step(unit).clone()
        parity = output_parity(compiled, eager, k=self.cfg.scenario.topk, rtol=self.cfg.benchmark.loss_rtol)
        report.extra.update(parity.metrics())
