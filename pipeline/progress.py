"""Progress events, both ends (torch-free): a worker prints `@@progress {json}` lines (:class:`Progress`),
its job's parent parses them (:func:`parse_progress`) and shows them (:mod:`pipeline.job.progress`)."""

from __future__ import annotations

import json
import time
from typing import Any

PROGRESS_PREFIX = "@@progress "


class Progress:
    """The worker's side: at most a few events per second, and always a phase's last unit."""

    def __init__(self, min_interval_s: float = 0.25):
        self.min_interval_s, self.last = min_interval_s, 0.0

    def __call__(self, variant: str, phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last >= self.min_interval_s or done == total:
            self.last = now
            event = {"variant": variant, "phase": phase, "done": done, "total": total}
            print(PROGRESS_PREFIX + json.dumps(event), flush=True)


def quiet(*args: Any, **kwargs: Any) -> None:
    """Progress that shows nothing (a distributed job's ranks other than 0; the eager memory probe)."""


def parse_progress(line: str) -> dict[str, Any] | None:
    if not line.startswith(PROGRESS_PREFIX):
        return None
    try:
        return json.loads(line[len(PROGRESS_PREFIX) :])
    except ValueError:
        return None


def format_duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
