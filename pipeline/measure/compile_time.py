"""Compile time: the torch.compile call itself plus the warm-up's wall time in excess of the
steady-state median, i.e. everything from asking for compilation to compiled code at full speed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Warmup:
    """A variant's warm-up steps, each synced and wall-clocked."""

    first_step_s: float
    total_s: float
    excess_s: float  # beyond the steady-state median: compilation, autotuning, CUDA-graph recording

    @classmethod
    def from_steps(cls, warmup_s: list[float], steady_ms: float) -> Warmup:
        excess_s = sum(max(0.0, w - steady_ms / 1000) for w in warmup_s)  # beyond as many steady-state steps
        return cls(first_step_s=warmup_s[0], total_s=sum(warmup_s), excess_s=excess_s)

    def metrics(self) -> dict[str, float]:
        return {
            "warmup/first_step_s": self.first_step_s,
            "warmup/total_s": self.total_s,
            "warmup/excess_s": self.excess_s,
        }


@dataclass(frozen=True, kw_only=True)
class CompileTime:
    setup_s: float  # the torch.compile call(s): backend imports and set-up, before any step
    warmup_excess_s: float

    def metrics(self) -> dict[str, float]:
        return {"compile/setup_s": self.setup_s, "compile/total_s": self.setup_s + self.warmup_excess_s}
