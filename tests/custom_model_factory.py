"""A user's own model factory, defined outside models/, for `model._target_=tests.custom_model_factory.build`."""

from __future__ import annotations

from typing import Any

from torch import nn


class TinyConvClassifier(nn.Module):
    def __init__(self, channels: int, num_classes: int, width: int):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(channels, width, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(width, num_classes)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


def build(input_spec: dict[str, Any], width: int = 8) -> nn.Module:
    return TinyConvClassifier(input_spec["channels"], input_spec["num_classes"], width)


def parameter_count(channels: int, num_classes: int, width: int) -> int:
    return channels * width * 9 + width + width * num_classes + num_classes
