"""The torch.compile article's model with four common graph-break patterns in its forward: an assert on
a tensor, `.item()` stored in a dict, a loop over a numpy range, and a print. Use it to see how the
pipeline reports graph breaks (`model=graph_break_net`); recent torch versions trace some of these.
The print writes to a sink that keeps nothing: a print breaks the graph wherever it writes, and the
article's tensors, one per step, would flood the job's output."""

from __future__ import annotations

from typing import Any, TextIO

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class _Discard:
    """A file that keeps nothing (the print's target)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


DISCARD: TextIO = _Discard()  # type: ignore[assignment]


class GraphBreakNet(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.fc1 = nn.Linear(1176, num_classes)
        self.fc2 = nn.Linear(num_classes, num_classes)
        self.fc3 = nn.Linear(num_classes, num_classes)
        self.fc4 = nn.Linear(num_classes, num_classes)
        self.d: dict[str, float] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.conv1(x)))
        x = torch.flatten(x, 1)
        assert torch.all(x >= 0)  # graph break 1: an assert on a tensor
        x = self.fc1(x)
        self.d["fc1-out"] = x.sum().item()  # graph break 2: .item() into a dict
        x = self.fc2(x)
        for _ in np.arange(1):  # graph break 3: a loop over a numpy range
            x = self.fc3(x)
        print(x, file=DISCARD)  # graph break 4: a print
        return self.fc4(x)


def create(input_spec: dict[str, Any]) -> nn.Module:
    if (input_spec["channels"], input_spec["height"], input_spec["width"]) != (3, 32, 32):
        raise ValueError(
            "model=graph_break_net takes 3x32x32 images (fc1 expects 1176 = 6*14*14 features): set model.input to 3x32x32"
        )
    return GraphBreakNet(input_spec["num_classes"])
