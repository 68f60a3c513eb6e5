"""NVML (nvidia-ml-py), opened for one question and shut after it: what the GPUs are, without CUDA (a job's
parent never initializes CUDA; a worker asks NVML what torch cannot say)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import ModuleType


@contextlib.contextmanager
def nvml() -> Iterator[ModuleType]:
    """pynvml, initialized for the block. Raises where NVML is missing or not permitted: each caller says
    what it falls back to."""
    import pynvml

    pynvml.nvmlInit()
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()
