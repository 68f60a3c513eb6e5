"""The training step: zero-grad, forward under autocast, loss, backward, optimizer step (and grad
scaler). No timing, no logging: the hot loop in one screen."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from hydra.utils import get_class
from torch import nn

from pipeline.axes.compile import StepFn
from pipeline.axes.data import Batch
from pipeline.axes.precision import Precision
from pipeline.config.schema import OptimizerConfig


def build_optimizer(
    params: Any, cfg: OptimizerConfig, *, tensor_lr: bool, device: torch.device
) -> torch.optim.Optimizer:
    """The optimizer from `trainer.optimizer`. With `tensor_lr` the learning rate is a tensor, so a
    compiled step does not guard on (and recompile for) its value."""
    kwargs = dict(cfg.kwargs)
    for key in ("fused", "foreach"):
        if getattr(cfg, key) is not None:
            kwargs[key] = getattr(cfg, key)
    lr: float | torch.Tensor = cfg.lr
    if tensor_lr:
        lr = torch.tensor(lr, device=device if kwargs.get("fused") or device.type == "cuda" else "cpu")
        if device.type == "cuda" and not kwargs.get("fused"):
            kwargs.setdefault("capturable", True)
    return get_class(cfg._target_)(params, lr=lr, **kwargs)


def train_step_factory(
    *,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
    precision: Precision,
    device_type: str,
) -> Callable[..., StepFn]:
    """`make_step(forward_loss, *, mark_cudagraph_step)` for :func:`pipeline.axes.compile.apply_compile`:
    one training step on one batch, returning the detached loss (still on the device)."""

    def make_step(forward_loss: nn.Module, *, mark_cudagraph_step: bool) -> StepFn:
        def train_step(batch: Batch) -> torch.Tensor:
            if mark_cudagraph_step:
                torch.compiler.cudagraph_mark_step_begin()
            optimizer.zero_grad(set_to_none=True)
            with precision.autocast(device_type):
                loss = forward_loss(batch)
            if scaler is None:
                loss.backward()
                optimizer.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            return loss.detach()

        return train_step

    return make_step
