"""`apply_compile`: the one place torch.compile is applied, for every `compile.scope`.

Scopes:
  model           the model only; the loss runs eager
  loss            the loss (with its teacher) compiled on its own
  model_and_loss  one module holding model and loss, compiled together
  regional        each repeated block (timm blocks/stages, HF layers) compiled on its own; blocks of
                  one class share compiled code, the rest of the model runs eager
  step            the whole training step (forward, loss, backward, optimizer step) handed to
                  torch.compile as one function; torch still breaks it at backward() and in the
                  optimizer (expect ~4 graph breaks, and compile.fullgraph=true is refused)
`compile.optimizer=true` also compiles `optimizer.step` (any scope but `step`, which already has it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from pipeline.train import ModelWithLoss, StepFn, TrainParts, make_train_step

CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")


@dataclass
class CompiledStep:
    step: StepFn
    forward_loss: nn.Module | Any  # what computes the loss from a batch (for diagnostics)
    description: str  # what was compiled, for the run's notes
    regions: int = 0  # blocks compiled by the regional scope
    kwargs: dict[str, Any] | None = None  # the torch.compile arguments used


def needs_tensor_lr(compile_cfg: dict[str, Any]) -> bool:
    return compile_cfg["mode"] != "eager" and (
        compile_cfg["scope"] == "step" or bool(compile_cfg["optimizer"])
    )


def compile_kwargs(compile_cfg: dict[str, Any]) -> dict[str, Any]:
    """Arguments for torch.compile. torch refuses `mode` and `options` together, so user options are
    merged over the mode's own inductor options and passed alone."""
    kwargs: dict[str, Any] = {
        "backend": compile_cfg["backend"],
        "fullgraph": compile_cfg["fullgraph"],
        "dynamic": compile_cfg["dynamic"],
    }
    mode, options = compile_cfg["mode"], dict(compile_cfg.get("options") or {})
    if options:
        if compile_cfg["backend"] == "inductor":
            from torch._inductor import list_mode_options

            options = {**list_mode_options(mode), **options}
        kwargs["options"] = options
    elif mode != "default":
        kwargs["mode"] = mode
    return kwargs


def uses_cudagraphs(compile_cfg: dict[str, Any]) -> bool:
    options = compile_cfg.get("options") or {}
    return compile_cfg["mode"] in CUDAGRAPH_MODES or bool(options.get("triton.cudagraphs"))


def is_repeated(module: nn.Module) -> bool:
    children = list(module.children())
    return (
        isinstance(module, (nn.ModuleList, nn.Sequential))
        and len(children) >= 2
        and len({type(c) for c in children}) == 1
    )


def repeated_blocks(module: nn.Module) -> list[nn.Module]:
    """The innermost runs of same-class blocks (ViT `blocks`, ConvNeXt stage blocks, HF layers)."""
    found: list[nn.Module] = []
    for child in module.children():
        if is_repeated(child):
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


def apply_compile(compile_cfg: dict[str, Any], parts: TrainParts) -> CompiledStep:
    """Build the training step for `compile_cfg` (mode `eager` builds the plain eager step)."""
    cudagraphs = compile_cfg["mode"] != "eager" and uses_cudagraphs(compile_cfg)
    if compile_cfg["mode"] == "eager":
        forward_loss = ModelWithLoss(parts.model, parts.loss)
        return CompiledStep(
            make_train_step(parts, forward_loss, mark_cudagraph_step=False), forward_loss, "nothing (eager)"
        )

    kwargs = compile_kwargs(compile_cfg)
    scope, regions = compile_cfg["scope"], 0
    if scope == "model":
        forward_loss = ModelWithLoss(torch.compile(parts.model, **kwargs), parts.loss)
    elif scope == "loss":
        forward_loss = ModelWithLoss(parts.model, torch.compile(parts.loss, **kwargs))
    elif scope == "model_and_loss":
        forward_loss = torch.compile(ModelWithLoss(parts.model, parts.loss), **kwargs)
    elif scope == "regional":
        regions = compile_regions(parts.model, kwargs)
        forward_loss = ModelWithLoss(parts.model, parts.loss)
    elif scope == "step":
        forward_loss = ModelWithLoss(parts.model, parts.loss)
    else:
        raise ValueError(f"compile.scope={scope!r} is not a scope")

    compile_optimizer = bool(compile_cfg["optimizer"]) and scope != "step"
    if compile_optimizer:
        parts.optimizer.step = torch.compile(parts.optimizer.step, **{**kwargs, "fullgraph": False})  # type: ignore[method-assign]
    step = make_train_step(parts, forward_loss, mark_cudagraph_step=cudagraphs)
    if scope == "step":
        step = torch.compile(step, **kwargs)
    what = {
        "model": "the model",
        "loss": "the loss",
        "model_and_loss": "model and loss together",
        "regional": f"{regions} repeated blocks of the model",
        "step": "the whole training step (one function; torch breaks it at backward and the optimizer)",
    }[scope]
    description = what + (" and optimizer.step" if compile_optimizer else "")
    return CompiledStep(step, forward_loss, description, regions, kwargs)
