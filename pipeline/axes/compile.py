"""`apply_compile`: the one place torch.compile is applied, for every `compile.scope` and scenario. Scopes:
`model` (the loss runs eager), `loss`, `model_and_loss` (one module), `regional` (each repeated block; blocks
of one class share code), `step` (the scenario's whole step as one function; training breaks it at backward()
and the optimizer). `compile.optimizer` also compiles `optimizer.step`. A scenario says how its step is made
from a forward function (`make_step`); this module decides what of it is compiled."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from pipeline.config.schema import CompileConfig

StepFn = Callable[[Any], torch.Tensor]
MakeStep = Callable[[nn.Module], StepFn]  # forward -> step


class ModelWithLoss(nn.Module):
    """Model and loss in one module (what `compile.scope=model_and_loss` compiles); `.model` stays the
    bare model."""

    def __init__(self, model: nn.Module, loss: nn.Module):
        super().__init__()
        self.model, self.loss = model, loss

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.loss(batch, self.model(batch["inputs"]))


@dataclass(frozen=True, kw_only=True)
class Compiled:
    step: StepFn
    forward: nn.Module  # what computes the step's output from a batch (for diagnostics such as explain)
    description: str  # what was compiled, for the run's notes
    regions: int = 0  # blocks compiled by the regional scope
    kwargs: dict[str, Any] | None = None  # the torch.compile arguments used


def compile_kwargs(settings: CompileConfig) -> dict[str, Any]:
    """Arguments for torch.compile. torch refuses `mode` and `options` together, so user options are
    merged over the mode's own inductor options and passed alone."""
    kwargs = dict(backend=settings.backend, fullgraph=settings.fullgraph, dynamic=settings.dynamic)
    options = settings.inductor_options()
    if options:
        if settings.backend == "inductor":
            from torch._inductor import list_mode_options

            options = {**list_mode_options(settings.mode), **options}
        kwargs["options"] = options
    elif settings.mode != "default":
        kwargs["mode"] = settings.mode
    return kwargs


def repeated_blocks(module: nn.Module) -> list[nn.Module]:
    """The innermost runs of same-class blocks (ViT `blocks`, ConvNeXt stage blocks, HF layers): a
    ModuleList or Sequential of two or more children, all of one class."""
    found: list[nn.Module] = []
    for child in module.children():
        kinds = [type(c) for c in child.children()]
        if isinstance(child, (nn.ModuleList, nn.Sequential)) and len(kinds) >= 2 and len(set(kinds)) == 1:
            inner = [block for c in child.children() for block in repeated_blocks(c)]
            found.extend(inner or list(child.children()))
        else:
            found.extend(repeated_blocks(child))
    return found


def compile_regions(model: nn.Module, kwargs: dict[str, Any]) -> int:
    blocks = repeated_blocks(model)
    if not blocks:
        raise ValueError(
            f"compile.scope=regional: {type(model).__name__} has no repeated blocks (no ModuleList/Sequential of same-class modules)"
        )
    for block in blocks:
        block.compile(**kwargs)  # in place: the compiled forward is shared by blocks of one class
    return len(blocks)


SCOPE_DESCRIPTIONS = {
    "model": "the model",
    "loss": "the loss",
    "model_and_loss": "model and loss together",
    "regional": "{regions} repeated blocks of the model",
    "step": "the whole step (one function; in training torch breaks it at backward and the optimizer)",
}


def marking_step_begin(step: StepFn) -> StepFn:
    """`step` preceded by CUDA graphs' step-begin mark, outside any compiled function: inside one (a
    decode step at `scope=step`) the mark is a graph break."""

    def marked(batch: Any) -> torch.Tensor:
        torch.compiler.cudagraph_mark_step_begin()
        return step(batch)

    return marked


def apply_compile(
    settings: CompileConfig,
    *,
    model: nn.Module,
    loss: nn.Module,
    make_step: MakeStep,
    optimizer: torch.optim.Optimizer | None = None,
) -> Compiled:
    """The scenario's step for `settings` (mode `eager` builds the plain eager step)."""
    if not settings.compiled:
        forward = ModelWithLoss(model, loss)
        return Compiled(step=make_step(forward), forward=forward, description="nothing (eager)")

    kwargs = compile_kwargs(settings)
    scope, regions = settings.scope, 0
    if scope not in SCOPE_DESCRIPTIONS:
        raise ValueError(f"compile.scope={scope!r} is not a scope")
    if scope == "regional":  # each repeated block compiled in place
        regions = compile_regions(model, kwargs)
    # `step`: the whole step is compiled below
    forward = ModelWithLoss(
        torch.compile(model, **kwargs) if scope == "model" else model,
        torch.compile(loss, **kwargs) if scope == "loss" else loss,
    )
    if scope == "model_and_loss":
        forward = torch.compile(forward, **kwargs)

    compile_optimizer = settings.optimizer and scope != "step" and optimizer is not None
    if compile_optimizer:
        optimizer.step = torch.compile(optimizer.step, **{**kwargs, "fullgraph": False})  # type: ignore[method-assign, union-attr]
    step = make_step(forward)
    if scope == "step":
        step = torch.compile(step, **kwargs)
    if settings.uses_cudagraphs:
        step = marking_step_begin(step)
    description = SCOPE_DESCRIPTIONS[scope].format(regions=regions)
    return Compiled(
        step=step,
        forward=forward,
        description=description + (" and optimizer.step" if compile_optimizer else ""),
        regions=regions,
        kwargs=kwargs,
    )
