"""timm models, random-initialized (never downloads weights): any timm name works via `model.name`."""

from __future__ import annotations

from typing import Any

import timm
from torch import nn


def create(name: str, input_spec: dict[str, Any], **kwargs: Any) -> nn.Module:
    kwargs.setdefault("num_classes", input_spec["num_classes"])
    kwargs.setdefault("in_chans", input_spec["channels"])
    return timm.create_model(name, pretrained=False, **kwargs)


def model_exists(name: str) -> bool:
    return timm.is_model(name)
