"""A model whose speed the test sets, for tests of how long a job measures (used through `model._target_`)."""

from __future__ import annotations

import random
import time
from typing import Any

import torch
from torch import nn

_jitter = random.Random(0)


@torch.compiler.disable
def _wait(base_ms: float, jitter_ms: float, jitter_p: float) -> None:
    """`base_ms` of waiting, and sometimes a stall of up to `jitter_ms` more: runs eagerly in the compiled
    variant too (a graph break). A sleep takes the same time whatever else the host runs."""
    stall = jitter_ms * _jitter.random() if jitter_p and _jitter.random() < jitter_p else 0.0
    time.sleep((base_ms + stall) / 1000)


class SlowInEager(nn.Module):
    """A linear classifier whose forward waits `base_ms`, and in eager mode `eager_ms` more (the branch is
    traced away in the compiled graph): a speedup of (base + eager) / base that the host's load hardly
    moves. `jitter_ms`, `jitter_p`: a stall of up to `jitter_ms` in a `jitter_p` share of either variant's
    calls."""

    def __init__(
        self, input_spec: dict[str, Any], base_ms: float, eager_ms: float, jitter_ms: float, jitter_p: float
    ):
        super().__init__()
        features = input_spec["channels"] * input_spec["height"] * input_spec["width"]
        self.fc = nn.Linear(features, input_spec["num_classes"])
        self.base_ms, self.eager_ms, self.jitter_ms, self.jitter_p = base_ms, eager_ms, jitter_ms, jitter_p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.compiler.is_compiling():
            time.sleep(self.eager_ms / 1000)
        _wait(self.base_ms, self.jitter_ms, self.jitter_p)
        return self.fc(x.flatten(1))


def slow_in_eager(
    input_spec: dict[str, Any],
    base_ms: float = 10.0,
    eager_ms: float = 5.0,
    jitter_ms: float = 0.0,
    jitter_p: float = 0.0,
) -> nn.Module:
    return SlowInEager(input_spec, base_ms, eager_ms, jitter_ms, jitter_p)
