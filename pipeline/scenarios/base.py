"""What every scenario shares: the worker's context it runs in, and the report it returns.

A scenario owns its step and its figures (built from the typed config, warmed up, measured,
diagnosed); the worker around it owns everything common: the device, the environment, progress, the
phase timeline, error handling and the result file.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from pipeline.config.schema import Config
from pipeline.job.progress import Progress


class Timeline:
    """Seconds spent in each phase of the worker, for the job-cost breakdown (info `timeline`)."""

    def __init__(self, started: float | None = None) -> None:
        self.phases: dict[str, float] = {}
        self.last = time.time() if started is None else started

    def mark(self, phase: str) -> None:
        now = time.time()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self.last
        self.last = now


@dataclass(frozen=True, kw_only=True)
class WorkerContext:
    device: torch.device
    progress: Progress
    out_dir: Path  # the job's folder (explain.txt, profile/ go here)
    timeline: Timeline


@dataclass(kw_only=True)
class ScenarioReport:
    """A scenario's figures. `metrics()` gives them under the registry's names."""

    series: dict[str, list[float]] = field(default_factory=dict)  # per-step curves
    diagnostics: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)  # effective settings and notes

    def metrics(self) -> dict[str, float]:
        raise NotImplementedError


class Scenario(Protocol):
    def __init__(self, cfg: Config, ctx: WorkerContext) -> None: ...

    def method(self) -> str:
        """How this job is measured, in words (the run's description)."""
        ...

    def run(self) -> ScenarioReport: ...
