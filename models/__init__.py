"""Model factories. Every model maps an input batch tensor to logits; its config declares its input
spec (pipeline.schema.InputSpec), which the fake data follows.

`build_model(cfg)` calls the factory named by `cfg._target_` with `name` (when set) and `cfg.kwargs`;
a factory that declares an `input_spec` parameter also receives the input spec, so a user's own
factory can read it or ignore it.
"""

from __future__ import annotations

import inspect
from typing import Any

from models._compat import ensure_torchvision_importable


def build_model(model_cfg: Any) -> Any:
    """Instantiate the model described by a `model` (or `loss.teacher`) config node."""
    from hydra.utils import get_method

    ensure_torchvision_importable()
    factory = get_method(model_cfg["_target_"])
    kwargs = dict(model_cfg.get("kwargs") or {})
    if model_cfg.get("name") is not None:
        kwargs["name"] = model_cfg["name"]
    if "input_spec" in inspect.signature(factory).parameters:
        kwargs["input_spec"] = dict(model_cfg["input"])
    return factory(**kwargs)
