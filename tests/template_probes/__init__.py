"""Modules a test asks the sweep's template to import, to put it in a state where forking is unsafe
(`python -m pipeline.job.template --imports ...`)."""

from __future__ import annotations

import threading

import torch

_stop = threading.Event()


def start_thread() -> threading.Thread:
    """A thread that outlives the import, as a library starting a pool at import would."""
    thread = threading.Thread(target=_stop.wait, daemon=True, name="probe")
    thread.start()
    return thread


def pretend_cuda_initialized() -> None:
    """What the template sees after something initialized CUDA (a CPU host has none to initialize)."""
    torch.cuda.is_initialized = lambda: True  # type: ignore[assignment]
