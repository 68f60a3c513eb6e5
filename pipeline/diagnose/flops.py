"""Figures beside the GPU's datasheet peaks: a training step's FLOPs (counted on tensors without data)
and MFU; the peak memory bandwidth a decode step's achieved bandwidth is read against."""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from pipeline.config.schema import LossConfig, ModelConfig, PrecisionConfig

# Dense peak TFLOP/s from the vendors' datasheets (no sparsity), by precision. An unknown GPU gets no MFU.
PEAK_TFLOPS: list[tuple[str, dict[str, float]]] = [
    (r"H100.*PCIe", {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.2}),
    (r"H100 NVL", {}),
    (r"GH200|H200|H100", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}),
    (r"A100", {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}),
    (r"L40S", {"bf16": 362.05, "fp16": 362.05, "tf32": 183.0, "fp32": 91.6}),
    (r"\bL4\b", {"bf16": 121.0, "fp16": 121.0, "tf32": 60.0, "fp32": 30.3}),
    (r"V100", {"fp16": 125.0, "fp32": 15.7}),
]


# Peak memory bandwidth in GB/s from the vendors' datasheets, by GPU (the first pattern that matches).
PEAK_BANDWIDTH_GBS: list[tuple[str, float]] = [
    (r"H100.*PCIe", 2000.0),
    (r"H100 NVL", 3900.0),
    (r"H200", 4800.0),
    (r"GH200", 4000.0),
    (r"H100", 3350.0),
    (r"A100.*80GB", 2039.0),
    (r"A100", 1555.0),
    (r"L40S", 864.0),
    (r"\bL4\b", 300.0),
    (r"V100", 900.0),
]


def peak_bandwidth_gbs(gpu_name: str | None) -> tuple[float | None, str]:
    """(peak GB/s, note)."""
    if not gpu_name:
        return None, "no bandwidth share: not a GPU run"
    for pattern, peak in PEAK_BANDWIDTH_GBS:
        if re.search(pattern, gpu_name):
            return peak, f"peak {peak:g} GB/s (datasheet) for {gpu_name}"
    return (
        None,
        f"no bandwidth share: {gpu_name} is not in the table (pipeline/diagnose/flops.py PEAK_BANDWIDTH_GBS)",
    )


def peak_tflops(gpu_name: str | None, precision: PrecisionConfig) -> tuple[float | None, str]:
    """(peak TFLOP/s, note). The note says why there is no peak when there is none."""
    # Which peak applies: the dtype the matmuls run in.
    dtypes = {precision.autocast_dtype, precision.param_dtype}
    if "float16" in dtypes:
        key = "fp16"
    elif "bfloat16" in dtypes:
        key = "bf16"
    else:
        key = "tf32" if precision.tf32 else "fp32"
    if not gpu_name:
        return None, "no MFU: not a GPU run"
    for pattern, peaks in PEAK_TFLOPS:
        if re.search(pattern, gpu_name):
            if key in peaks:
                return peaks[key], f"peak {peaks[key]} TFLOP/s ({key}, dense, datasheet) for {gpu_name}"
            return None, f"no MFU: no {key} peak known for {gpu_name}"
    return None, f"no MFU: {gpu_name} is not in the peak table (pipeline/diagnose/flops.py PEAK_TFLOPS)"


def count_flops(model: ModelConfig, loss: LossConfig, batch_size: int) -> int:
    """FLOPs of one training step's forward and backward (teacher included), counted on tensors without
    data. Meta tensors first (timm's models read values while building); where model code asks a tensor
    for a value (HF's causal mask), fake tensors, for which such code skips its data checks."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    try:
        with torch.device("meta"):
            return _count_step_flops(model, loss, batch_size)
    except RuntimeError as meta_error:
        try:
            with FakeTensorMode(allow_non_fake_inputs=True):
                return _count_step_flops(model, loss, batch_size)
        except Exception as fake_error:
            raise RuntimeError(f"meta: {meta_error}; fake: {fake_error}") from fake_error


def _count_step_flops(model_cfg: ModelConfig, loss_cfg: LossConfig, batch_size: int) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    from losses import build_loss
    from models import build_model

    spec = model_cfg.input
    model = build_model(model_cfg).train()
    loss = build_loss(loss_cfg, spec)
    if spec.kind == "image":
        inputs = torch.randn(batch_size, spec.channels, spec.height, spec.width)
    else:
        inputs = torch.randint(spec.vocab_size, (batch_size, spec.seq_len))
    if spec.kind == "image" or spec.target == "class":
        targets = torch.randint(spec.num_classes, (batch_size,))
    else:
        targets = torch.randint(spec.vocab_size, (batch_size, spec.seq_len))
    with FlopCounterMode(display=False) as counter:
        loss({"inputs": inputs, "targets": targets}, model(inputs)).backward()
    return int(counter.get_total_flops())


@dataclass(frozen=True, kw_only=True)
class Mfu:
    """Model FLOPs utilization of one step: its FLOPs, the rate achieved, and the share of the peak."""

    flops_per_step: int
    achieved_tflops: float
    mfu: float | None  # None where no peak is known (note says why)
    note: str

    @classmethod
    def of(cls, *, flops: int, step_time_ms: float, gpu_name: str | None, precision: PrecisionConfig) -> Mfu:
        achieved = flops / (step_time_ms / 1000) / 1e12
        peak, note = peak_tflops(gpu_name, precision)
        return cls(
            flops_per_step=flops, achieved_tflops=achieved, mfu=achieved / peak if peak else None, note=note
        )

    def metrics(self) -> dict[str, float]:
        m = {"flops/per_step": float(self.flops_per_step), "flops/achieved_tflops": self.achieved_tflops}
        if self.mfu is not None:
            m["flops/mfu"] = self.mfu
        return m
