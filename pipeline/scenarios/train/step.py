"""The training step: zero-grad, forward under autocast, loss, backward, optimizer step (and grad
scaler). No timing, no logging: the hot loop in one screen."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from pipeline.axes.compile import StepFn
from pipeline.axes.data import Batch
from pipeline.axes.precision import Precision


def train_step_factory(
    *, optimizer: torch.optim.Optimizer, precision: Precision, device_type: str
) -> Callable[..., StepFn]:
    """`make_step(forward_loss, *, mark_cudagraph_step)` for :func:`pipeline.axes.compile.apply_compile`:
    one training step on one batch, returning the detached loss (still on the device)."""
    scaler = precision.make_scaler(device_type)

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
