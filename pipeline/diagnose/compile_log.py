"""torch's own graph-break, recompile and perf-hint (CUDA-graph skip) log records, collected while
compilation happens. Inductor's perf hints are for the compiler's developers: unless `verbose` they are
kept out of the job's output (still in diagnostics.json); graph breaks and recompiles still show."""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Any

_BREAK_AT = re.compile(r"Graph break.*? in user code at (?P<loc>\S+:\d+)")


class CompileLogRecorder(logging.Handler):
    """Collects torch's compile log records; torch also prints them to the worker log (perf hints only
    when `verbose`)."""

    def __init__(self, *, verbose: bool = False) -> None:
        super().__init__(level=logging.DEBUG)
        self.verbose = verbose
        self._quieted: list[logging.Handler] = []
        self.clear()

    def clear(self) -> None:
        """Forget the records so far (an analysis' own, before the job compiles for real)."""
        self.breaks: list[dict[str, str]] = []
        self.recompiles: list[str] = []
        self.perf_hints: list[str] = []

    def __enter__(self) -> CompileLogRecorder:
        import torch._logging

        torch._logging.set_logs(graph_breaks=True, recompiles=True, perf_hints=True)
        for name in LOGGERS:
            logger = logging.getLogger(name)
            if not self.verbose:  # torch's own console handlers: not its perf hints
                for handler in logger.handlers:
                    handler.addFilter(not_a_perf_hint)
                    self._quieted.append(handler)
            logger.addHandler(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        for name in LOGGERS:
            logging.getLogger(name).removeHandler(self)
        for handler in self._quieted:
            handler.removeFilter(not_a_perf_hint)
        self._quieted = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:
            return
        if record.name.endswith("__graph_breaks"):
            match = _BREAK_AT.search(message)
            lines = [
                ln.strip() for ln in message.split("Graph Break Reason:", 1)[-1].splitlines() if ln.strip()
            ]
            if lines and lines[0].startswith("Encountered graph break when attempting to trace"):
                lines = lines[1:]  # generic; the next lines say what failed and why
            text = " ".join(ln for ln in lines[:2] if not ln.startswith(("User code", "For more details")))
            self.breaks.append({"location": match.group("loc") if match else "?", "reason": text[:400]})
        elif record.name.endswith("__recompiles"):
            self.recompiles.append(message.strip()[:600])
        elif record.name.endswith("__perf_hints"):
            self.perf_hints.append(message.strip()[:400])

    def summary(self) -> dict[str, Any]:
        distinct = Counter((b["location"], b["reason"]) for b in self.breaks)
        return {
            "graph_breaks": [
                {"location": loc, "reason": reason, "count": n} for (loc, reason), n in distinct.most_common()
            ],
            "recompiles": self.recompiles,
            "cudagraph_skips": [h for h in self.perf_hints if "cudagraph" in h.lower()],
            "perf_hints": list(dict.fromkeys(self.perf_hints)),
        }


LOGGERS = ("torch._dynamo", "torch._inductor")  # torch's compile loggers (they do not propagate to `torch`)


def not_a_perf_hint(record: logging.LogRecord) -> bool:
    """A console handler's filter: every record but inductor's perf hints."""
    return not record.name.endswith("__perf_hints")
