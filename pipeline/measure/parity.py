"""Loss parity: do the compiled and the eager variant compute the same thing?"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import torch


@dataclass(frozen=True, kw_only=True)
class LossParity:
    max_rel: float  # largest relative gap over the judged steps
    final_rel: float | None  # gap between the means of the last 10% of steps (not judged)
    onset_step: int | None  # first step whose gap exceeds the tolerance, None if none (not judged)
    ok: bool

    def metrics(self) -> dict[str, float]:
        m = {"parity/max_rel": self.max_rel, "parity/ok": float(self.ok)}
        if self.final_rel is not None:
            m["parity/final_rel"] = self.final_rel
        if self.onset_step is not None:
            m["parity/onset_step"] = float(self.onset_step)
        return m


def loss_divergence(compiled: list[float], eager: list[float], rtol: float, parity_steps: int) -> LossParity:
    """Compare two loss curves from the same initial weights and batches. Parity is judged on the first
    `parity_steps` steps only: later, training amplifies any rounding difference chaotically (Adam's first
    updates are nearly sign(grad)), so where the curves part and their end gap are reported, not judged."""
    n = min(parity_steps, len(compiled))
    if any(math.isnan(x) or math.isinf(x) for x in compiled + eager):
        return LossParity(max_rel=math.inf, final_rel=None, onset_step=None, ok=False)
    gaps = [abs(c - e) / max(abs(e), 1e-12) for c, e in zip(compiled, eager, strict=True)]
    tail = max(1, len(compiled) // 10)
    end_c, end_e = statistics.fmean(compiled[-tail:]), statistics.fmean(eager[-tail:])
    worst = max(gaps[:n])
    return LossParity(
        max_rel=worst,
        final_rel=abs(end_c - end_e) / max(abs(end_e), 1e-12),
        onset_step=next((i for i, g in enumerate(gaps) if g > rtol), None),
        ok=worst <= rtol,
    )


@dataclass(frozen=True, kw_only=True)
class OutputParity:
    """Compiled against eager outputs on the same input and weights (inference)."""

    max_abs: float
    max_rel: float  # max |compiled - eager| / max |eager|
    top1_agree: float  # fraction of rows whose top class is the same
    topk_overlap: float  # mean share of the top-k classes both have
    ok: bool

    def metrics(self) -> dict[str, float]:
        return {
            "parity/logits_max_abs": self.max_abs,
            "parity/logits_max_rel": self.max_rel,
            "parity/top1_agree": self.top1_agree,
            "parity/topk_overlap": self.topk_overlap,
            "parity/ok": float(self.ok),
        }


def output_parity(compiled: torch.Tensor, eager: torch.Tensor, *, k: int, rtol: float) -> OutputParity:
    """Logits of the last dimension compared row by row; within `rtol` of eager's scale is parity."""
    c, e = compiled.float().flatten(0, -2), eager.float().flatten(0, -2)
    k = min(k, e.shape[-1])
    diff = (c - e).abs().max().item()
    scale = max(e.abs().max().item(), 1e-12)
    top_c, top_e = c.topk(k, dim=-1).indices, e.topk(k, dim=-1).indices
    overlap = (top_c.unsqueeze(-1) == top_e.unsqueeze(-2)).any(-1).float().mean().item()
    top1 = (top_c[:, 0] == top_e[:, 0]).float().mean().item()
    ok = math.isfinite(diff) and diff / scale <= rtol
    return OutputParity(max_abs=diff, max_rel=diff / scale, top1_agree=top1, topk_overlap=overlap, ok=ok)
