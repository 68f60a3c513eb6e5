"""What a reader needs to reproduce or compare the figures (never the whole process environment), and the
device libraries' one-time set-up before anything is timed."""

from __future__ import annotations

import os
import platform
import socket
from importlib.metadata import version
from typing import Any

import torch

from pipeline.measure.memory import gib, pci_bus_id
from pipeline.nvml import nvml
from pipeline.provenance import git_commit


def _version(module: str) -> str | None:
    try:
        return version(module)
    except Exception:
        return None


def environment(device: torch.device) -> dict[str, Any]:
    """GPU, driver, library versions, commit and host, without the ones unknown here."""
    env: dict[str, Any] = {
        "device": str(device),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "timm": _version("timm"),
        "transformers": _version("transformers"),
        "triton": _version("triton"),
        "git_commit": git_commit(),
        "cpu_count": os.cpu_count(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "command": os.environ.get("PIPELINE_COMMAND"),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env |= {
            "gpu_name": props.name,
            "gpu_memory_gib": round(gib(props.total_memory), 2),
            "gpu_sm_count": props.multi_processor_count,
            "gpu_capability": f"{props.major}.{props.minor}",
            "gpu_index": torch.cuda.current_device(),
            "cuda_version": torch.version.cuda,
            "cudnn_version": torch.backends.cudnn.version(),
        }
        try:
            with nvml() as n:
                env["driver_version"] = n.nvmlSystemGetDriverVersion()
                handle = n.nvmlDeviceGetHandleByPciBusId(pci_bus_id(device))
                env["gpu_uuid"] = n.nvmlDeviceGetUUID(handle)
                env["gpu_physical_index"] = n.nvmlDeviceGetIndex(handle)
        except Exception as exc:  # NVML missing or not permitted: say so rather than guess
            env["nvml"] = f"unavailable: {type(exc).__name__}"
    return {k: v for k, v in env.items() if v is not None}


def init_device_libraries(device: torch.device) -> None:
    """Create the cuBLAS/cuBLASLt handles and workspaces and initialize cuDNN before anything is timed,
    so that one-time library set-up never shows up as compile time or as a slow first step."""
    if device.type != "cuda":
        return
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        a = torch.randn(64, 64, device=device, dtype=dtype, requires_grad=True)
        (a @ a).sum().backward()
        x = torch.randn(1, 3, 8, 8, device=device, dtype=dtype, requires_grad=True)
        torch.nn.functional.conv2d(x, torch.randn(4, 3, 3, 3, device=device, dtype=dtype)).sum().backward()
    torch.cuda.synchronize(device)
