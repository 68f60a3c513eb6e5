"""NVML (nvidia-ml-py), opened for one question and shut after it: what the GPUs are, without CUDA."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import ModuleType


@contextlib.contextmanager
def nvml() -> Iterator[ModuleType]:
    """pynvml, initialized for the block; raises where NVML is missing (each caller has a fallback)."""
    import pynvml

    pynvml.nvmlInit()
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()
