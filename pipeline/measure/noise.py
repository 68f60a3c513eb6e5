"""Is a measurement to be trusted to a few percent? The spread of its steady-state steps and the host's
CPU steal while they ran."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Noise:
    spread_pct: float  # (p90 - p10) / p50 of the measured steps
    cpu_steal_pct: float | None  # None where /proc/stat is not there
    limit_pct: float  # benchmark.noisy_spread_pct

    @property
    def noisy(self) -> bool:
        return self.spread_pct > self.limit_pct

    @property
    def note(self) -> str | None:
        """Why the step times should not be trusted to a few percent, or None when they can."""
        if not self.noisy:
            return None
        steal = f", host CPU steal {self.cpu_steal_pct:.1f}%" if self.cpu_steal_pct is not None else ""
        return (
            f"noisy: p10-p90 of the measured steps spans {self.spread_pct:.0f}% of the median "
            f"(benchmark.noisy_spread_pct={self.limit_pct:g}){steal}; compare configurations on paired speedups, or rerun"
        )

    def metrics(self) -> dict[str, float]:
        m = {"step/spread_pct": self.spread_pct, "step/noisy": float(self.noisy)}
        if self.cpu_steal_pct is not None:
            m["step/cpu_steal_pct"] = self.cpu_steal_pct
        return m
