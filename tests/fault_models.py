"""Model factories that fail for real, for fault-injection tests (used through `model._target_`)."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import Any

import torch
from torch import nn


class _Linear(nn.Module):
    """A small classifier whose forward misbehaves from call `at_call` on."""

    def __init__(self, input_spec: dict[str, Any], at_call: int, fault: str, marker: str = ""):
        super().__init__()
        features = input_spec["channels"] * input_spec["height"] * input_spec["width"]
        self.fc = nn.Linear(features, input_spec["num_classes"])
        self.calls, self.at_call, self.fault, self.marker = 0, at_call, fault, marker

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fault == "none":  # no Python state changes: compiles once
            return self.fc(x.flatten(1))
        self.calls += 1
        if self.calls >= self.at_call:
            if self.fault == "segfault":
                ctypes.string_at(0)  # a real SIGSEGV in this process
            if self.fault == "oom":
                torch.empty(2**43, dtype=torch.uint8, device=x.device)  # 8 TiB: the allocator refuses
            if self.fault == "slow":
                while os.path.exists(self.marker):
                    time.sleep(0.2)
            if self.fault == "sleep":  # a step that takes a known time, however fast the host
                time.sleep(0.3)
            if self.fault == "nan":
                return self.fc(x.flatten(1)) * float("nan")  # the logits, and so the loss, are NaN
        return self.fc(x.flatten(1))


def segfault(input_spec: dict[str, Any], at_call: int = 2) -> nn.Module:
    return _Linear(input_spec, at_call, "segfault")


def out_of_memory(input_spec: dict[str, Any], at_call: int = 2) -> nn.Module:
    return _Linear(input_spec, at_call, "oom")


def nan_output(input_spec: dict[str, Any], at_call: int = 2) -> nn.Module:
    """Its outputs are NaN from call `at_call` on (a model whose numerics break)."""
    return _Linear(input_spec, at_call, "nan")


def slow_while(input_spec: dict[str, Any], marker: str) -> nn.Module:
    """Its calls wait while the file `marker` exists: a job that runs for as long as a test wants, its
    config the same before and after (a sweep resumed with its own command)."""
    return _Linear(input_spec, 1, "slow", marker)


def sleepy(input_spec: dict[str, Any], **_: Any) -> nn.Module:
    """Each call takes 0.3 s more: a job that outlasts a timeout of a second whether its worker was
    spawned or forked from a template. The model's other arguments (vit_tiny's, its config replaced
    by this one) are not its."""
    return _Linear(input_spec, 1, "sleep")


def with_secret(input_spec: dict[str, Any], **kwargs: Any) -> nn.Module:
    """Accepts any keyword (e.g. an access token a real factory would use) and builds a linear model."""
    return _Linear(input_spec, at_call=10**9, fault="none")


class _RankFault(nn.Module):
    """Two repeated linear blocks (so FSDP2 can shard them); on rank `rank` (torchrun's RANK) the
    forward raises or SIGKILLs its own process from call `at_call` on. Other ranks run normally."""

    def __init__(self, input_spec: dict[str, Any], rank: int, at_call: int, fault: str):
        super().__init__()
        features = input_spec["channels"] * input_spec["height"] * input_spec["width"]
        self.blocks = nn.ModuleList([nn.Linear(features, features) for _ in range(2)])
        self.head = nn.Linear(features, input_spec["num_classes"])
        self.faulty = int(os.environ.get("RANK", "0")) == rank
        self.calls, self.at_call, self.fault = 0, at_call, fault

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.faulty and self.calls >= self.at_call:
            if self.fault == "raise":
                raise RuntimeError(f"injected fault on rank {os.environ.get('RANK')}")
            if self.fault == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.fault == "hang":
                time.sleep(3600)
        x = x.flatten(1)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def rank_fault(
    input_spec: dict[str, Any], rank: int = 1, at_call: int = 2, fault: str = "raise"
) -> nn.Module:
    return _RankFault(input_spec, rank, at_call, fault)


def flips_a_global_setting(input_spec: dict[str, Any]) -> nn.Module:
    """A factory that changes a process-wide setting as it builds (as a library might): the run records it."""
    torch.backends.cudnn.benchmark = True
    torch.set_num_threads(1)
    return _Linear(input_spec, 1, "none")
