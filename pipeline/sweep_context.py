"""What a job knows of its sweep: `sweep.json` in the sweep folder, written by the multirun callback and
read by jobs that may run on other machines. Torch-free and free of the sweep's own machinery."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from pipeline.jobdir import SweepDir
from pipeline.redaction import write_atomic


@dataclass(kw_only=True)
class SweepContext:
    sweep_id: str
    parent_run_id: str
    sweep_dir: str
    tracking_uri: str
    experiment: str
    total_jobs: int | None = None
    resume: bool = False
    name: str | None = None
    command: str = ""  # the command that runs this session (shell-quoted, secrets masked): resumption hints
    axes: list[str] = field(default_factory=list)  # the swept keys, e.g. ["compile.mode", "trainer.seed"]
    objective: str | None = None  # sweep.objective: the metric the sweep is judged on, if it names one
    min_effect_pct: float = 1.0  # the verdict's smallest difference (sweep.min_effect_pct)
    kind: str | None = None  # sweep.kind (`suite`: per model, no model ranked); None: an older file
    started_at: float = 0.0  # when this driver started the sweep (epoch seconds)
    prior_wall_s: float = 0.0  # wall time of the sweep's earlier sessions (resumed: not the gap between)
    finished: bool = False  # the summary is published and the parent run closed
    ended_wall_s: float | None = None  # the sweep's wall time its end published
    # each planned job's compile mode, by job number, for the ETA; empty for a search
    job_modes: list[str] = field(default_factory=list)

    def wall_s(self) -> float:
        """The sweep's wall time so far: its earlier sessions' plus this one's."""
        return self.prior_wall_s + time.time() - self.started_at

    def save(self) -> None:
        write_atomic(SweepDir(Path(self.sweep_dir)).sweep_file, json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, sweep_dir: str | Path) -> SweepContext | None:
        path = SweepDir(Path(sweep_dir)).sweep_file
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def new_sweep_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)
