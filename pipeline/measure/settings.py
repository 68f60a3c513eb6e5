"""The process-wide settings that change how a unit of work runs (torch's backend flags, threads, dtype,
grad mode, compiler config, the garbage collector, torch's environment variables), as a snapshot: the
worker records what differs between its start and its measurement (`run_info.json`: `settings_changed`)."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable

import torch

ENV_PREFIXES = (
    "TORCH",
    "PYTORCH",
    "CUDA",
    "CUBLAS",
    "CUDNN",
    "NCCL",
    "TRITON",
    "NVIDIA_TF32",
    "OMP_",
    "MKL_",
    "KMP_",
)


def _flags() -> dict[str, Callable[[], object]]:
    b = torch.backends
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
        "num_threads": torch.get_num_threads,
        "num_interop_threads": torch.get_num_interop_threads,
        "default_dtype": torch.get_default_dtype,
        "grad_enabled": torch.is_grad_enabled,
        "inference_mode": torch.is_inference_mode_enabled,
        "cudnn.enabled": lambda: b.cudnn.enabled,
        "cudnn.benchmark": lambda: b.cudnn.benchmark,
        "cudnn.deterministic": lambda: b.cudnn.deterministic,
        "cudnn.allow_tf32": lambda: b.cudnn.allow_tf32,
        "cuda.matmul.allow_tf32": lambda: b.cuda.matmul.allow_tf32,
        "cuda.matmul.allow_fp16_reduced_precision_reduction": lambda: (
            b.cuda.matmul.allow_fp16_reduced_precision_reduction
        ),
        "cuda.matmul.allow_bf16_reduced_precision_reduction": lambda: (
            b.cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "cuda.flash_sdp": b.cuda.flash_sdp_enabled,
        "cuda.mem_efficient_sdp": b.cuda.mem_efficient_sdp_enabled,
        "cuda.math_sdp": b.cuda.math_sdp_enabled,
        "mkldnn.enabled": lambda: b.mkldnn.enabled,
        "gc.enabled": gc.isenabled,
        "gc.threshold": gc.get_threshold,
        "switch_interval_s": sys.getswitchinterval,
        # torch >= 2.9 (absent ones read as None)
        "fp32_precision": lambda: b.fp32_precision,
        "cuda.matmul.fp32_precision": lambda: b.cuda.matmul.fp32_precision,
        "cudnn.conv.fp32_precision": lambda: b.cudnn.conv.fp32_precision,
        "cudnn.rnn.fp32_precision": lambda: b.cudnn.rnn.fp32_precision,
        "mkldnn.matmul.fp32_precision": lambda: b.mkldnn.matmul.fp32_precision,
        "mkldnn.conv.fp32_precision": lambda: b.mkldnn.conv.fp32_precision,
    }


def snapshot() -> dict[str, str]:
    out: dict[str, str] = {}
    for name, read in _flags().items():
        try:
            out[name] = str(read())
        except Exception:
            out[name] = "None"
    # Compiler settings that differ from their defaults (only for modules already imported: a snapshot
    # imports nothing).
    for prefix, module_name in (
        ("inductor", "torch._inductor.config"),
        ("dynamo", "torch._dynamo.config"),
        ("functorch", "torch._functorch.config"),
    ):
        module = sys.modules.get(module_name)
        if module is None:
            continue
        try:
            copy = module.get_config_copy()
            out.update({f"{prefix}.{k}": repr(copy[k]) for k in copy if not module._is_default(k)})
        except Exception as exc:  # a torch whose config module reads differently: say so
            out[f"{prefix}.?"] = f"unreadable: {type(exc).__name__}"
    out.update({f"env.{k}": v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)})
    return out


def changed(before: dict[str, str], after: dict[str, str]) -> dict[str, str]:
    """What `after` has that `before` did not, as `old -> new` (`unset` where absent), and every
    environment variable of the list (whatever set it: the job's parent, the user)."""
    out = {}
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key, "unset"), after.get(key, "unset")
        if old != new:
            out[key] = f"{old} -> {new}"
        elif key.startswith("env."):
            out[key] = new
    return out
