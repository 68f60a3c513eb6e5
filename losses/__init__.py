"""Losses behind one interface: `loss(batch, outputs) -> scalar tensor`.

`batch` is the dict the data yields (`inputs`, `targets`), `outputs` the model's logits. A loss is an
`nn.Module`, so whatever it owns (a distillation teacher) moves with it and can be compiled with it.
The training loop never branches on the kind of loss.
"""

from __future__ import annotations

import inspect
from typing import Any

from torch import nn


def build_loss(loss_cfg: dict[str, Any], input_spec: dict[str, Any]) -> nn.Module:
    """Instantiate the loss named by `loss._target_` with its own keys; a loss class that declares an
    `input_spec` parameter receives the student's input spec."""
    from hydra.utils import get_class

    cls = get_class(loss_cfg["_target_"])
    params = inspect.signature(cls).parameters
    kwargs = {k: v for k, v in loss_cfg.items() if k in params}
    if "input_spec" in params:
        kwargs["input_spec"] = input_spec
    return cls(**kwargs)
