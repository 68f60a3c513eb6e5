"""The small convolutional classifier of the profiling article: 8 blocks of 3x3 convolution (padding 1),
ReLU and 2x2 max-pool, widening 3 -> 8 -> 12 -> ... -> 32 channels, the last convolution producing one
channel per class. Eight pools divide each side by 256, so a 256x256 image ends as a 1x1 map per class
and the flattened output is B x num_classes.

One flat `nn.Sequential` of layers of different classes (class `ConvNet`, so errors name it): it has no
repeated blocks, so `compile.scope=regional` has nothing to compile in it (and says so).
"""

from __future__ import annotations

import itertools
from typing import Any

from torch import nn

CHANNELS = (8, 12, 16, 20, 24, 28, 32)  # the widths between the input and the class channels


class ConvNet(nn.Sequential):
    """conv-ReLU-pool x 8, then flatten."""


def create(input_spec: dict[str, Any], channels: list[int] | tuple[int, ...] = CHANNELS) -> nn.Module:
    """The article's network for `input_spec` (image channels, num_classes); height and width must
    come out of the pools as 1 (256 to 511 px with 8 pools)."""
    from pipeline.config.errors import ConfigError

    widths = [input_spec["channels"], *channels, input_spec["num_classes"]]
    pools = len(widths) - 1
    for side in ("height", "width"):
        if input_spec[side] >> pools != 1:
            low, high = 2**pools, 2 ** (pools + 1) - 1
            raise ConfigError(
                f"model.input.{side}",
                input_spec[side],
                f"must be in [{low}, {high}]: {pools} 2x2 max-pools must leave a 1x1 map per class",
            )
    layers: list[nn.Module] = []
    for c_in, c_out in itertools.pairwise(widths):
        layers += [nn.Conv2d(c_in, c_out, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
    return ConvNet(*layers, nn.Flatten())
