"""Building a scenario's variant: one function applies the axes in one fixed order (model -> dtype -> mode ->
precision -> parallel -> optimizer -> compile, the compile call timed) to the ingredients a scenario names in
its :class:`Recipe`. A scenario never applies an axis itself (`tests/test_layout.py` checks it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from pipeline.axes.compile import Compiled, StepFn, apply_compile
from pipeline.axes.optimizer import build_optimizer
from pipeline.axes.parallel import parallelize
from pipeline.config.schema import CompileConfig
from pipeline.measure.timing import Variant

if TYPE_CHECKING:
    from pipeline.scenarios.protocol import Scenario


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """What a scenario's variant is made of."""

    # (the forward apply_compile made, the placed model, its optimizer or None) -> the step
    step: Callable[[nn.Module, nn.Module, torch.optim.Optimizer | None], StepFn]
    # (name, the compiled step, the model, the compile call's seconds) -> the timed variant
    unit: Callable[[str, Compiled, nn.Module, float], Variant]
    # what the scenario runs of the model the factory builds (generation: the HF causal LM inside)
    adapt: Callable[[nn.Module], nn.Module] = lambda model: model
    # what apply_compile compiles of it (generation: a decode step's module around the LM)
    compiles: Callable[[nn.Module], nn.Module] = lambda model: model
    # build the weights in the precision's dtype from the start (a 7B model: no float32 copy first)
    build_in_dtype: bool = False


def placed_model(scenario: Scenario, recipe: Recipe) -> nn.Module:
    """The model before compilation: built from the job's seed (paired variants start equal), adapted by the
    scenario, in the weights' dtype; in train mode converted by the precision (float8) when the scenario
    trains, else in eval mode without gradients."""
    precision, device = scenario.precision, scenario.device
    model = recipe.adapt(scenario.fresh_model(dtype=precision.param_dtype if recipe.build_in_dtype else None))
    model = model.to(device=device, dtype=precision.param_dtype)
    if scenario.cfg.scenario.trains:
        return precision.convert(model.train())
    return model.eval().requires_grad_(False)


def build_variant(
    scenario: Scenario, name: str, settings: CompileConfig, recipe: Recipe
) -> tuple[Variant, Compiled]:
    """The variant `name` under `settings`: the placed model (wrapped for its parallel strategy, with its
    optimizer, when the scenario trains), its step compiled (the call's time is `setup_s`) inside its unit."""
    model = placed_model(scenario, recipe)
    optimizer = None
    if scenario.cfg.scenario.trains:
        model = parallelize(model, scenario.cfg.parallel, scenario.device)  # before the optimizer sees it
        optimizer = build_optimizer(
            model.parameters(),
            scenario.cfg.trainer.optimizer,
            # optimizer.step runs compiled: the learning rate is a tensor (no recompiles)
            tensor_lr=settings.compiled and (settings.scope == "step" or settings.optimizer),
            device=scenario.device,
        )
    started = time.perf_counter()
    compiled = apply_compile(
        settings,
        model=recipe.compiles(model),
        loss=scenario.head,
        make_step=lambda forward: recipe.step(forward, model, optimizer),
        optimizer=optimizer,
    )
    setup_s = time.perf_counter() - started
    return recipe.unit(name, compiled, model, setup_s), compiled
