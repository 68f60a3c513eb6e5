"""Progress on long work, both ends of it: the worker's progress events (`@@progress {json}` lines on
its stdout), the parent's per-job step bar, and the sweep-level line (jobs done / total, failures, ETA).

On a terminal the job bar is a rich progress bar; otherwise (logs, CI, SLURM) plain lines at phase
changes and every 10% of a phase, so log files stay readable.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from pipeline.job.result import RESULT_FILE
from pipeline.status import FINISHED, SKIPPED

PROGRESS_PREFIX = "@@progress "


class Progress:
    """The worker's side: progress events for the parent, at most a few per second (and always the
    last step of a phase)."""

    def __init__(self, min_interval_s: float = 0.25):
        self.min_interval_s, self.last = min_interval_s, 0.0

    def __call__(self, variant: str, phase: str, done: int, total: int, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= self.min_interval_s or done == total:
            self.last = now
            event = {"variant": variant, "phase": phase, "done": done, "total": total}
            print(PROGRESS_PREFIX + json.dumps(event), flush=True)


def parse_progress(line: str) -> dict[str, Any] | None:
    """The event of a worker's progress line, or None for any other line."""
    if not line.startswith(PROGRESS_PREFIX):
        return None
    try:
        return json.loads(line[len(PROGRESS_PREFIX) :])
    except ValueError:
        return None


def is_terminal() -> bool:
    return sys.stdout.isatty()


class JobProgress:
    """Shows one job's warm-up and measured steps, and forwards the worker's own output lines."""

    def __init__(self, label: str, terminal: bool | None = None):
        self.label = label
        self.terminal = is_terminal() if terminal is None else terminal
        self._last_decile: dict[tuple[str, str], int] = {}
        self._bar: Any = None
        self._tasks: dict[tuple[str, str], Any] = {}
        if self.terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                transient=False,
            )
            self._bar.start()

    def update(self, event: dict[str, Any]) -> None:
        variant, phase, done, total = event["variant"], event["phase"], event["done"], event["total"]
        if phase == "done":
            return
        key = (variant, phase)
        if self._bar is not None:
            if key not in self._tasks:
                self._tasks[key] = self._bar.add_task(f"{self.label} {variant} {phase}", total=total)
            self._bar.update(self._tasks[key], completed=done, total=total)
            return
        decile = int(10 * done / total) if total > 0 else 0
        if self._last_decile.get(key) != decile:
            self._last_decile[key] = decile
            print(f"[{self.label}] {variant} {phase} {done}/{total}", flush=True)

    def line(self, text: str) -> None:
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False)
        else:
            print(text, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def sweep_status(sweep_dir: Path, total_jobs: int | None) -> str:
    """`sweep: 3/8 jobs done, 1 failed, ETA 4m10s`, read from the job result files in the sweep dir
    (so it is right whichever launcher ran the jobs). Jobs a resumed sweep skipped count as done; the
    ETA is the mean of the jobs that ran."""
    walls, done, failed = [], 0, 0
    for path in sweep_dir.glob(f"*/{RESULT_FILE}"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        done += 1
        if data.get("status") == SKIPPED:
            continue
        metrics = data.get("metrics", {})
        walls.append(float(metrics.get("job/wall_s") or metrics.get("job/worker_wall_s") or 0.0))
        failed += data.get("status") != FINISHED
    text = f"sweep: {done}/{total_jobs if total_jobs else '?'} jobs done, {failed} failed"
    if total_jobs and walls and done < total_jobs:
        eta = (sum(walls) / len(walls)) * (total_jobs - done)
        text += f", ETA {format_duration(eta)}"
    return text


def format_duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
