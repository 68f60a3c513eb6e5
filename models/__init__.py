"""Model factories. Every model maps an input batch tensor to logits; its config declares its input
spec (pipeline.config.schema.InputSpec), which the fake data follows.

`build_model(cfg)` calls the factory named by `cfg._target_` with `name` (when set) and `cfg.kwargs`;
a factory that declares an `input_spec` parameter also receives the input spec, so a user's own
factory can read it or ignore it.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.config.schema import ModelConfig


def build_model(model: ModelConfig) -> Any:
    """Instantiate the model described by a `model` (or `loss.teacher`) config: the factory named by
    `_target_` (resolved as hydra.utils.instantiate does), called with the plain-data arguments."""
    from hydra.utils import get_method

    factory = get_method(model._target_)
    kwargs = dict(model.kwargs)
    if model.name is not None:
        kwargs["name"] = model.name
    if "input_spec" in inspect.signature(factory).parameters:
        kwargs["input_spec"] = dataclasses.asdict(model.input)
    return factory(**kwargs)
