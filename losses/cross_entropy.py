"""Cross-entropy for classification and language modelling."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class CrossEntropy(nn.Module):
    """Class labels, next-token prediction (logits and labels shifted by one here) or masked tokens
    (positions labelled -100 are ignored)."""

    def __init__(self, input_spec: dict[str, Any] | None = None):
        super().__init__()
        self.shift = bool(input_spec) and input_spec.get("target") == "next_token"

    def forward(self, batch: dict[str, torch.Tensor], outputs: torch.Tensor) -> torch.Tensor:
        return cross_entropy(outputs, batch["targets"], shift=self.shift)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, *, shift: bool) -> torch.Tensor:
    if shift:
        logits, targets = logits[:, :-1], targets[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-100)
