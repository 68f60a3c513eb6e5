"""Host-device syncs in one training step, each with the source line that caused it (CUDA only)."""

from __future__ import annotations

import contextlib
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch


def _user_frame(stack: list[traceback.FrameSummary]) -> str:
    """Where a sync comes from: the innermost frame of the user's code (not stdlib, an installed package
    or this harness); failing that, the innermost library frame, never the warnings machinery."""
    import sysconfig

    paths = sysconfig.get_paths()
    stdlib = (paths["stdlib"], paths.get("platstdlib", paths["stdlib"]), "<frozen")
    libraries = tuple(
        {paths["purelib"], paths["platlib"], str(Path(torch.__file__).parent), str(Path(__file__).parents[1])}
    )
    outside_stdlib = [f for f in stack if not f.filename.startswith(stdlib)]
    user = [f for f in outside_stdlib if not f.filename.startswith(libraries)]
    frame = (user or outside_stdlib or stack)[-1]
    return f"{frame.filename}:{frame.lineno}: {(frame.line or '').strip()}"


# What c10 warns on every host-device sync under `set_sync_debug_mode("warn")`. Only this counts: the
# mode's own one-time notice ("... does not yet detect all synchronizing operations") is not a sync.
SYNC_WARNING = "called a synchronizing CUDA operation"


@contextlib.contextmanager
def recording_sync_warnings() -> Iterator[list[str]]:
    """The source line of every sync warning in the block, appended to the yielded list; other
    warnings pass on as usual."""
    locations: list[str] = []
    previous = warnings.showwarning

    def record(
        message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
    ) -> None:
        if SYNC_WARNING in str(message):
            locations.append(_user_frame(traceback.extract_stack()[:-1]))
        else:
            previous(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        try:
            yield locations
        finally:
            warnings.showwarning = previous


def count_syncs(run_step: Callable[[], None], device: torch.device) -> dict[str, Any]:
    """Host-device syncs during one training step, from `torch.cuda.set_sync_debug_mode('warn')`, with
    the source line of each. CUDA only: on the CPU there is no device to wait for."""
    if device.type != "cuda":
        return {"note": "host-device syncs are counted on CUDA devices only"}
    torch.cuda.synchronize(device)
    with warnings.catch_warnings(), recording_sync_warnings() as locations:
        # torch says the debug mode is a prototype each time it is set: the job's output is not the place
        warnings.filterwarnings("ignore", message="Synchronization debug mode is a prototype feature")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            run_step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize(device)
    return {"count": len(locations), "locations": dict(Counter(locations).most_common())}
