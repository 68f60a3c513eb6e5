"""Losses behind one interface: `loss(batch, outputs) -> scalar tensor`.

`batch` is the dict the data yields (`inputs`, `targets`), `outputs` the model's logits. A loss is an
`nn.Module`, so whatever it owns (a distillation teacher) moves with it and can be compiled with it.
The training loop never branches on the kind of loss.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import TYPE_CHECKING

from torch import nn

if TYPE_CHECKING:
    from pipeline.config.schema import InputSpec, LossConfig


def build_loss(loss: LossConfig, input_spec: InputSpec) -> nn.Module:
    """Instantiate the loss named by `loss._target_` with those of its keys the class takes (a
    distillation teacher as its :class:`ModelConfig`); a loss class that declares an `input_spec`
    parameter receives the student's input spec as plain data."""
    from hydra.utils import get_class

    cls = get_class(loss._target_)
    params = inspect.signature(cls).parameters
    kwargs = {f.name: getattr(loss, f.name) for f in dataclasses.fields(loss) if f.name in params}
    if "input_spec" in params:
        kwargs["input_spec"] = dataclasses.asdict(input_spec)
    return cls(**kwargs)
