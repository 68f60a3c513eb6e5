"""Memory: the CUDA caching allocator's peaks, NVML's per-process figure, the worker's CPU peak RSS."""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

import torch

from pipeline.nvml import nvml

GIB = 1024**3


def gib(n_bytes: float) -> float:
    return n_bytes / GIB


class Memory:
    """The CUDA caching allocator's counters (nothing on the CPU, where these metrics are not logged)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.device = device

    def reset_peak(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)

    def allocated(self) -> int:
        return torch.cuda.memory_allocated(self.device) if self.cuda else 0

    def peak_allocated(self) -> int:
        return torch.cuda.max_memory_allocated(self.device) if self.cuda else 0

    def peak_reserved(self) -> int:
        return torch.cuda.max_memory_reserved(self.device) if self.cuda else 0


@dataclass(kw_only=True)
class MemoryPeaks:
    """A variant's allocator peaks, in bytes: over its measured steps, and over its whole life so far
    (warm-up and compilation included: `job_*`)."""

    allocated: int = 0
    reserved: int = 0
    job_allocated: int = 0
    job_reserved: int = 0

    def metrics(self) -> dict[str, float]:
        return {
            "memory/peak_allocated_gib": gib(self.allocated),
            "memory/peak_reserved_gib": gib(self.reserved),
            "memory/job_peak_allocated_gib": gib(self.job_allocated),
            "memory/job_peak_reserved_gib": gib(self.job_reserved),
        }


def cpu_rss_peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB  # ru_maxrss is in KiB on Linux


def pci_bus_id(device: torch.device) -> str:
    props = torch.cuda.get_device_properties(device)
    return f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"


def nvml_process_memory_gib(device: torch.device) -> float | None:
    """This process's GPU memory as NVML sees it, or None where NVML is not available."""
    if device.type != "cuda":
        return None
    try:
        with nvml() as n:
            handle = n.nvmlDeviceGetHandleByPciBusId(pci_bus_id(device))
            for proc in n.nvmlDeviceGetComputeRunningProcesses(handle):
                if proc.pid == os.getpid() and proc.usedGpuMemory is not None:
                    return gib(proc.usedGpuMemory)
    except Exception:
        return None
    return None
