"""Modules a test asks the sweep's template to import, to put it in a state where forking is unsafe
(`python -m pipeline.job.template --imports ...`)."""

from __future__ import annotations

import ctypes
import threading

import torch

_stop = threading.Event()


def _named_wait() -> None:
    ctypes.CDLL(None).prctl(
        15, b"probe", 0, 0, 0
    )  # PR_SET_NAME: what the kernel lists, as C libraries name theirs
    _stop.wait()


def start_thread() -> threading.Thread:
    """A thread that outlives the import, as a library starting a pool at import would."""
    thread = threading.Thread(target=_named_wait, daemon=True, name="probe")
    thread.start()
    return thread


def pretend_cuda_initialized() -> None:
    """What the template sees after something initialized CUDA (a CPU host has none to initialize)."""
    torch.cuda.is_initialized = lambda: True  # type: ignore[assignment]


def pretend_bad_fork() -> None:
    """What a child forked after torch queried the CUDA runtime reports (a CPU build never does)."""
    torch.cuda._is_in_bad_fork = lambda: True  # type: ignore[assignment]
