"""The optimizer axis (`trainer.optimizer`): the optimizer a training variant steps, built from config."""

from __future__ import annotations

from typing import Any

import torch
from hydra.utils import get_class

from pipeline.config.schema import OptimizerConfig


def build_optimizer(
    params: Any, cfg: OptimizerConfig, *, tensor_lr: bool, device: torch.device
) -> torch.optim.Optimizer:
    """The optimizer from `trainer.optimizer`. With `tensor_lr` the learning rate is a tensor, so a
    compiled step does not guard on (and recompile for) its value."""
    kwargs = dict(cfg.kwargs)
    kwargs.update({key: getattr(cfg, key) for key in ("fused", "foreach") if getattr(cfg, key) is not None})
    lr: float | torch.Tensor = cfg.lr
    if tensor_lr:
        lr = torch.tensor(lr, device=device if kwargs.get("fused") or device.type == "cuda" else "cpu")
        if device.type == "cuda" and not kwargs.get("fused"):
            kwargs.setdefault("capturable", True)
    return get_class(cfg._target_)(params, lr=lr, **kwargs)
