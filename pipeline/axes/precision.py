"""The precision axis (`precision=`): autocast and weight dtypes, TF32 and the grad scaler, from one node."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from pipeline.config.schema import PrecisionConfig

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class Precision:
    """A `precision` node with its dtype names as torch dtypes."""

    def __init__(self, cfg: PrecisionConfig):
        self.autocast_dtype = _DTYPES[cfg.autocast_dtype] if cfg.autocast_dtype else None
        self.param_dtype = _DTYPES[cfg.param_dtype]
        self.tf32, self.grad_scaler, self.float8 = cfg.tf32, cfg.grad_scaler, cfg.float8

    def convert(self, model: torch.nn.Module) -> torch.nn.Module:
        """With float8 (precision=fp8): the model's linear layers whose sizes allow it swapped for torchao's
        float8 training layers (the config checks refused fp8 without torchao or a float8-capable GPU)."""
        if not self.float8:
            return model
        from torchao.float8 import convert_to_float8_training  # the checks made sure it is installed

        return convert_to_float8_training(model, module_filter_fn=float8_eligible)

    def apply_backend_flags(self) -> dict[str, str]:
        """Set TF32 for float32 matmuls and convolutions explicitly (never torch's defaults, which
        differ between the two) and return the settings as read back from torch."""
        mode = "tf32" if self.tf32 else "ieee"
        torch.backends.cuda.matmul.fp32_precision = mode
        torch.backends.cudnn.conv.fp32_precision = mode
        return {
            "matmul_fp32_precision": str(torch.backends.cuda.matmul.fp32_precision),
            "cudnn_conv_fp32_precision": str(torch.backends.cudnn.conv.fp32_precision),
        }

    @contextlib.contextmanager
    def autocast(self, device_type: str) -> Iterator[None]:
        if self.autocast_dtype is None:
            yield
            return
        with torch.autocast(device_type=device_type, dtype=self.autocast_dtype):
            yield

    @property
    def input_dtype(self) -> torch.dtype:
        """Floating-point inputs follow the weights."""
        return self.param_dtype


def float8_eligible(module: torch.nn.Module, fqn: str) -> bool:
    """torchao's float8 matmuls need both sizes of a linear layer to be multiples of 16."""
    return (
        isinstance(module, torch.nn.Linear) and module.in_features % 16 == 0 and module.out_features % 16 == 0
    )
