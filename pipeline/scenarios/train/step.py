"""The training step: zero-grad, forward under autocast, loss, backward, optimizer step (and grad
scaler). No timing, no logging: the hot loop in one screen."""

from __future__ import annotations

import torch
from torch import nn

from pipeline.axes.compile import StepFn
from pipeline.axes.data import Batch
from pipeline.axes.precision import Precision


def make_train_step(
    forward_loss: nn.Module,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None,
    *,
    precision: Precision,
    device_type: str,
) -> StepFn:
    """The recipe's step: one training step on one batch, returning the detached loss (still on the device)."""
    assert optimizer is not None
    scaler = torch.amp.GradScaler(device_type) if precision.grad_scaler else None

    def train_step(batch: Batch) -> torch.Tensor:
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
