"""The training step: zero-grad, forward, loss, backward, optimizer step. No timing, no logging."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from hydra.utils import get_class
from torch import nn

from pipeline.data import Batch
from pipeline.precision import Precision

StepFn = Callable[[Batch], torch.Tensor]


class ModelWithLoss(nn.Module):
    """Model and loss in one module (what `compile.scope=model_and_loss` compiles); `.model` stays the
    bare model for inference."""

    def __init__(self, model: nn.Module, loss: nn.Module):
        super().__init__()
        self.model, self.loss = model, loss

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.loss(batch, self.model(batch["inputs"]))


@dataclass
class TrainParts:
    model: nn.Module
    loss: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler | None
    precision: Precision
    device: torch.device


def build_optimizer(
    params: Any, cfg: dict[str, Any], *, tensor_lr: bool, device: torch.device
) -> torch.optim.Optimizer:
    """The optimizer from `trainer.optimizer`. With `tensor_lr` the learning rate is a tensor, so a
    compiled step does not guard on (and recompile for) its value."""
    kwargs = dict(cfg.get("kwargs") or {})
    for key in ("fused", "foreach"):
        if cfg.get(key) is not None:
            kwargs[key] = cfg[key]
    lr: float | torch.Tensor = cfg["lr"]
    if tensor_lr:
        lr = torch.tensor(lr, device=device if kwargs.get("fused") or device.type == "cuda" else "cpu")
        if device.type == "cuda" and not kwargs.get("fused"):
            kwargs.setdefault("capturable", True)
    return get_class(cfg["_target_"])(params, lr=lr, **kwargs)


def make_train_step(
    parts: TrainParts, forward_loss: Callable[[Batch], torch.Tensor], *, mark_cudagraph_step: bool
) -> StepFn:
    """One training step on one batch; returns the detached loss (still on the device)."""
    optimizer, scaler, precision = parts.optimizer, parts.scaler, parts.precision
    device_type = parts.device.type

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
