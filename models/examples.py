"""Small example factories: what `conf/model/custom.yaml` points at, and a template for your own.

A factory is any callable returning an `nn.Module` that maps the batch's `inputs` tensor to logits.
It receives `model.kwargs` as keyword arguments, `model.name` as `name` when that is set, and the
input spec as `input_spec` when it declares that parameter.
"""

from __future__ import annotations

from typing import Any

from torch import nn


def mlp_classifier(input_spec: dict[str, Any], hidden: int = 64, depth: int = 2) -> nn.Module:
    """An MLP image classifier: flatten C*H*W, `depth` hidden layers of width `hidden` with GELU, then
    one logit per class."""
    from pipeline.config.errors import ConfigError

    if input_spec["kind"] != "image":
        raise ConfigError("model.input.kind", input_spec["kind"], "mlp_classifier takes `image` inputs")
    width = input_spec["channels"] * input_spec["height"] * input_spec["width"]
    layers: list[nn.Module] = [nn.Flatten()]
    for _ in range(depth):
        layers += [nn.Linear(width, hidden), nn.GELU()]
        width = hidden
    layers.append(nn.Linear(width, input_spec["num_classes"]))
    return nn.Sequential(*layers)
