"""Is a measurement to be trusted to a few percent? Its steps' spread, its timed rounds' drift beside the
paired eager copy's, the host's CPU steal and speed, and whether its threads waited for a CPU. A
launch-bound step follows the host's speed, so the note says when a figure is the host's."""

from __future__ import annotations

from dataclasses import dataclass

# Threads waiting for a CPU over this share of the time they wanted one: a multi-threaded job's steps can
# then stall many times over while looking quiet (quiet jobs wait a few percent).
CONTENDED_WAIT_PCT = 10.0
# ...unless other processes used under this share of its CPUs: its own processes held them, a cost of
# its configuration that separate jobs may compare.
OTHERS_CPU_PCT = 10.0


def waited(cpu_wait_pct: float | None) -> bool:
    """The worker's threads waited for a CPU beyond CONTENDED_WAIT_PCT of the time they wanted one."""
    return cpu_wait_pct is not None and cpu_wait_pct > CONTENDED_WAIT_PCT


def crowded(cpu_others_pct: float | None) -> bool:
    """Other processes kept the worker's CPUs busy beyond OTHERS_CPU_PCT of their time while it measured:
    they can slow every step alike (a busy sibling hyperthread, a shared cache) with no wait for a CPU."""
    return cpu_others_pct is not None and cpu_others_pct > OTHERS_CPU_PCT


@dataclass(frozen=True, kw_only=True)
class Noise:
    spread_pct: float  # (p90 - p10) / p50 of the measured steps
    cpu_steal_pct: float | None  # None where /proc/stat is not there
    limit_pct: float  # benchmark.noisy_spread_pct
    round_drift_pct: float | None = None  # max / min of the timed rounds' medians, - 1 (two rounds or more)
    eager_round_drift_pct: float | None = None  # the paired eager copy's, alongside
    host_spread_pct: float | None = None  # the host check's p10-p90 spread (pipeline/measure/host.py)
    cpu_wait_pct: float | None = None  # the worker's threads: time waiting for a CPU / time wanting one
    cuda: bool = True  # the step's device is a GPU (CUDA graphs can take the host out of its step)
    compute_threads: int = 1  # threads the unit's own work runs on (torch's intra-op threads; 1 on a GPU)
    others_cpu_pct: float | None = None  # other processes' share of the worker's CPUs' time

    @property
    def noisy(self) -> bool:
        return self.spread_pct > self.limit_pct

    @property
    def contended(self) -> bool:
        """Other processes held the cores its several compute threads wanted: a whole job can stall."""
        return (
            waited(self.cpu_wait_pct)
            and self.compute_threads > 1
            and (self.others_cpu_pct is None or crowded(self.others_cpu_pct))
        )

    @property
    def host_bound(self) -> bool:
        """The rounds drifted beyond the limit while the device-bound eager copy's did not (half as much)."""
        drift, eager = self.round_drift_pct, self.eager_round_drift_pct
        return drift is not None and eager is not None and drift > self.limit_pct and drift > 2 * eager

    @property
    def speedup_follows_host(self) -> bool:
        """On a GPU, a host-bound compiled step beside a device-bound eager copy: the paired speedup holds for
        this process's host speed only (objective.paired_speedup). On a CPU the pairing cancels it."""
        return self.host_bound and self.cuda

    @property
    def note(self) -> str | None:
        """Why the step times should not be trusted to a few percent, or None when they can."""
        if not self.noisy and not self.contended:
            return None
        if self.noisy:
            head = (
                f"noisy: p10-p90 of the measured steps spans {self.spread_pct:.0f}% of the median "
                f"(benchmark.noisy_spread_pct={self.limit_pct:g})"
            )
        else:
            head = "contended: the measured steps held steady"
        if self.cpu_steal_pct is not None:
            head += f", host CPU steal {self.cpu_steal_pct:.1f}%"
        if self.cpu_wait_pct is not None and self.cpu_wait_pct >= 1:
            head += f", its threads waited for a CPU {self.cpu_wait_pct:.0f}% of the time they wanted one"
            others = self.others_cpu_pct
            # waited beyond the limit while other processes hardly used its CPUs: its own held them
            if waited(self.cpu_wait_pct) and others is not None and not crowded(others):
                head += (
                    f" while other processes used {others:.0f}% of its CPUs: its own processes "
                    "(DataLoader workers, threads) held them, a cost of the configuration"
                )
            elif self.contended and others is not None:
                head += f", other processes using {others:.0f}% of its CPUs"
        if self.contended:
            head += (
                f" while its work ran on {self.compute_threads} threads, which then wait on each other: a whole job "
                "can run in such a stall looking quiet (fewer threads than free cores, OMP_NUM_THREADS, avoid it)"
            )
        parts = [head]
        if self.host_spread_pct is not None and self.host_spread_pct > self.limit_pct:
            parts.append(
                f"the host's own CPU speed moved {self.host_spread_pct:.0f}% (p10-p90 of a torch-free reference "
                "workload timed before each round: host/reference_spread_pct), so a step the host launches cannot be "
                "steadier than that here"
            )
        if self.host_bound:
            graphs = (
                " (CUDA graphs, compile.mode=reduce-overhead, take the host out of the step)"
                if self.cuda
                else ""
            )
            parts.append(
                f"its timed rounds drifted {self.round_drift_pct:.0f}% apart while the paired eager copy's held within "
                f"{self.eager_round_drift_pct:.0f}%: the step waits on the host launching its kernels and follows the "
                f"host's speed{graphs}"
            )
        if self.speedup_follows_host:
            parts.append(
                "its paired speedup follows the host too (the eager copy waits on the device): it holds for this "
                "process's host speed, and the sweep's verdict allows it its steps' spread (step/host_bound)"
            )
        else:
            parts.append("compare configurations on paired speedups, or rerun")
        return "; ".join(parts)

    def metrics(self) -> dict[str, float]:
        m = {"step/spread_pct": self.spread_pct, "step/noisy": float(self.noisy)}
        if self.cpu_wait_pct is not None:
            m["step/cpu_contended"] = float(self.contended)
        read = {
            "step/cpu_steal_pct": self.cpu_steal_pct,
            "step/cpu_wait_pct": self.cpu_wait_pct,
            "step/cpu_others_pct": self.others_cpu_pct,
            "step/round_drift_pct": self.round_drift_pct,
            "eager/round_drift_pct": self.eager_round_drift_pct,
        }
        m.update({name: value for name, value in read.items() if value is not None})
        if self.eager_round_drift_pct is not None and self.cuda:
            m["step/host_bound"] = float(self.speedup_follows_host)
        return m


def round_drift_pct(round_p50_ms: list[float]) -> float | None:
    """How far a variant's timed rounds drifted apart: max / min of their medians, - 1, in %."""
    if len(round_p50_ms) < 2 or min(round_p50_ms) <= 0:
        return None
    return 100 * (max(round_p50_ms) / min(round_p50_ms) - 1)
