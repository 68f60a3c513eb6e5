"""Progress, the parent's end: the job's bar of the worker's progress events (a rich bar on a terminal,
else a line every 10% of a phase), with torch's own log lines kept off the terminal unless `verbose`,
and the sweep's line (jobs done / total, failures, ETA)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from pipeline.job.result import JobResult
from pipeline.jobdir import RESULT
from pipeline.progress import format_duration
from pipeline.status import FINISHED, SKIPPED
from pipeline.sweep_context import SweepContext

# torch's log format (TorchLogsFormatter): `[rank0]:W1125 08:38:47.901000 9167 torch/_dynamo/x.py:1841] ...`
TORCH_LOG_LINE = re.compile(r"^(\[rank\d+\]:)?[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ \S+:\d+\]")
# inductor's autotuning report (max-autotune), written straight to stderr, not as log records:
# `AUTOTUNE mm(8192x768, 768x3072)`, `  triton_mm_12 0.1007 ms 63.8% ACC_TYPE=...`, `strides: ...`,
# `SingleProcess AUTOTUNE benchmarking takes 21.3 seconds and 0.0003 seconds precompiling for 21 choices`
AUTOTUNE_LINE = re.compile(
    r"^(AUTOTUNE \S+\(|(SingleProcess|SubProcess) AUTOTUNE |Autotune Choices Stats:|\{\"num_choices\": |"
    r"strides: \[|dtypes: |  \S+ \d+\.\d+ ms \d+\.\d+%( |$))"
)


class JobProgress:
    """Shows one job's warm-up and measured steps, and forwards the worker's own output lines."""

    def __init__(self, label: str, terminal: bool | None = None, *, verbose: bool = False):
        self.label, self.verbose = label, verbose
        self._bar: Any = None
        # by variant and phase: its bar's task, or the tenth of it last printed
        self._shown: dict[tuple[str, str], Any] = {}
        if sys.stdout.isatty() if terminal is None else terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
            )
            self._bar.start()

    def update(self, event: dict[str, Any]) -> None:
        variant, phase, done, total = event["variant"], event["phase"], event["done"], event["total"]
        if phase == "done":
            return
        key = (variant, phase)
        if self._bar is not None:
            if key not in self._shown:
                self._shown[key] = self._bar.add_task(f"{self.label} {variant} {phase}", total=total)
            self._bar.update(self._shown[key], completed=done, total=total)
            return
        decile = int(10 * done / total) if total > 0 else 0
        if self._shown.get(key) != decile:
            self._shown[key] = decile
            print(f"[{self.label}] {variant} {phase} {done}/{total}", flush=True)

    def worker_line(self, text: str) -> None:
        """A line the worker printed: torch's log records only when verbose (worker.log has them)."""
        if self.verbose or not (TORCH_LOG_LINE.match(text) or AUTOTUNE_LINE.match(text)):
            self.line(text)

    def line(self, text: str) -> None:
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False)
        else:
            print(text, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def sweep_status(sweep_dir: Path, total_jobs: int | None) -> str:
    """`sweep: 3/8 jobs done, 1 failed, ETA 4m10s`, from the result files in the sweep dir (whichever
    launcher ran the jobs; skipped jobs count as done). The ETA is the sweep's pace since this session
    started (sweep.json's `started_at`), so jobs running at once count as they pass, each job left
    weighed by `pace_weights`; without sweep.json, the jobs' mean wall time."""
    walls, done, failed, ran_since, last_end = [], 0, 0, 0, 0.0
    sweep = SweepContext.load(sweep_dir)
    started_at, modes = (sweep.started_at, sweep.job_modes) if sweep is not None else (0.0, [])
    ended: set[int | None] = set()  # the job numbers with a result (None: a folder not named by one)
    session_walls: dict[str, list[float]] = {}  # this session's jobs' wall times, by compile mode
    for path in sweep_dir.glob(f"*/{RESULT}"):
        try:
            result = JobResult.read(path)
            # the worker's own end where it says it (the file is written again once MLflow has the run)
            ended_at = result.info.get("worker_ended_at") or path.stat().st_mtime
        except (OSError, ValueError):  # not a job's result: --sync and report --results name it
            continue
        done += 1
        num = int(path.parent.name) if path.parent.name.isdigit() else None
        ended.add(num)
        if result.status == SKIPPED:
            continue
        wall = float(result.metrics.get("job/wall_s") or result.metrics.get("job/worker_wall_s") or 0.0)
        walls.append(wall)
        failed += result.status != FINISHED
        if started_at and ended_at >= started_at:
            ran_since += 1
            last_end = max(last_end, ended_at)
            if num is not None and num < len(modes) and wall > 0:
                session_walls.setdefault(modes[num], []).append(wall)
    text = f"sweep: {done}/{total_jobs if total_jobs else '?'} jobs done, {failed} failed"
    if total_jobs and done < total_jobs:
        left = [modes[n] for n in range(total_jobs) if n not in ended] if len(modes) == total_jobs else []
        weights = pace_weights(left, session_walls) if left else [1.0] * (total_jobs - done)
        if weights is None:
            kind = "compiled" if any(m != EAGER for m in left if m not in session_walls) else "eager"
            text += f", ETA once a {kind} job has ended"
        elif ran_since:  # the pace as of the last job's end: the line changes when a job ends, not every poll
            text += f", ETA {format_duration((last_end - started_at) / ran_since * sum(weights))}"
        elif walls and not started_at:
            text += f", ETA {format_duration(sum(walls) / len(walls) * (total_jobs - done))}"
    return text


EAGER = "eager"  # the compile mode of a job that does not compile


def pace_weights(left: list[str], walls: dict[str, list[float]]) -> list[float] | None:
    """Each job left (by its compile mode) as a share of an average job that ended: the mean wall time of
    the ended jobs of its mode, else of its kind (compiled or eager), over the mean of them all; None
    when no ended job is like one of those left (an eager job says nothing of a compiled one's time)."""
    every = [w for ws in walls.values() for w in ws]
    if not every:
        return [1.0] * len(left)
    mean = sum(every) / len(every)
    likes = [
        walls.get(mode) or [w for m, ws in walls.items() if (m == EAGER) == (mode == EAGER) for w in ws]
        for mode in left
    ]
    return [sum(like) / len(like) / mean for like in likes] if all(likes) else None
