"""Distillation from a frozen teacher, which this loss owns (so it moves, and compiles, with the loss).

`kind=mse`: mean squared error between student and teacher logits (the torch.compile article's
expensive loss). `kind=kl`: temperature-scaled KL divergence to the teacher's softened distribution,
mixed with hard-label cross-entropy: `alpha * T^2 * KL + (1 - alpha) * CE`.
The teacher runs under `no_grad` inside the step, so its time and memory are part of the step.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from losses.cross_entropy import cross_entropy
from models import build_model
from pipeline.config.schema import ModelConfig


class Distillation(nn.Module):
    def __init__(
        self,
        teacher: ModelConfig,
        kind: str = "mse",
        temperature: float = 2.0,
        alpha: float = 0.5,
        input_spec: dict[str, Any] | None = None,
    ):
        super().__init__()
        self.teacher = build_model(teacher).requires_grad_(False).eval()
        self.kind, self.temperature, self.alpha = kind, temperature, alpha
        self.shift = bool(input_spec) and input_spec.get("target") == "next_token"

    def train(self, mode: bool = True) -> Distillation:
        super().train(mode)
        self.teacher.eval()  # the teacher never trains (no dropout, frozen norms)
        return self

    def forward(self, batch: dict[str, torch.Tensor], outputs: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            teacher_logits = self.teacher(batch["inputs"])
        if self.kind == "mse":
            return F.mse_loss(outputs, teacher_logits)
        t = self.temperature
        student = F.log_softmax(outputs.reshape(-1, outputs.size(-1)) / t, dim=-1)
        target = F.log_softmax(teacher_logits.reshape(-1, teacher_logits.size(-1)) / t, dim=-1)
        kl = F.kl_div(student, target, log_target=True, reduction="batchmean") * (t * t)
        return self.alpha * kl + (1 - self.alpha) * cross_entropy(outputs, batch["targets"], shift=self.shift)
