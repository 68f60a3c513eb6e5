"""Fake data following a model's input spec.

Two paths, chosen by `data.loader`:

* on-device (default): `data.num_batches` distinct batches are drawn once on the device (from a
  seeded device generator) and rotated, so a step never waits for the host and never reuses one batch;
* loader: the classic hand-written path of the torch.compile article: a DataLoader whose workers make
  random CPU tensors, copied to the device every step (the copy is part of the measured step).

Either way a seeded job draws the same batches in the same order, so two variants of a paired
measurement see the same data.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, Dataset

from pipeline.config.schema import DataConfig, InputSpec

Batch = dict[str, torch.Tensor]


def make_sample(spec: InputSpec, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One (input, target) pair on the CPU."""
    if spec.kind == "image":
        image = torch.randn((spec.channels, spec.height, spec.width), generator=generator)
        label = torch.randint(spec.num_classes, (), generator=generator)
        return image, label
    tokens = torch.randint(spec.vocab_size, (spec.seq_len,), generator=generator)
    target = spec.target
    if target == "next_token":
        return tokens, tokens.clone()
    if target == "masked_token":
        labels = torch.full_like(tokens, -100)
        masked = torch.rand(tokens.shape, generator=generator) < 0.15
        labels[masked] = tokens[masked]
        return tokens, labels
    return tokens, torch.randint(spec.num_classes, (), generator=generator)


def to_device(
    batch: Batch, device: torch.device, float_dtype: torch.dtype, non_blocking: bool = False
) -> Batch:
    out = {}
    for key, value in batch.items():
        value = value.to(device, non_blocking=non_blocking)
        out[key] = value.to(float_dtype) if value.is_floating_point() else value
    return out


def make_device_batch(
    spec: InputSpec,
    batch_size: int,
    *,
    device: torch.device,
    float_dtype: torch.dtype,
    generator: torch.Generator,
) -> Batch:
    """One batch drawn directly on the device (no host work, no copy), deterministic for a seeded
    generator: two variants of a paired measurement draw the same batches."""
    draw = {"generator": generator, "device": device}
    if spec.kind == "image":
        inputs = torch.randn((batch_size, spec.channels, spec.height, spec.width), **draw).to(float_dtype)
        return {"inputs": inputs, "targets": torch.randint(spec.num_classes, (batch_size,), **draw)}
    tokens = torch.randint(spec.vocab_size, (batch_size, spec.seq_len), **draw)
    if spec.target == "next_token":
        targets = tokens.clone()
    elif spec.target == "masked_token":
        targets = torch.where(torch.rand(tokens.shape, **draw) < 0.15, tokens, torch.full_like(tokens, -100))
    else:
        targets = torch.randint(spec.num_classes, (batch_size,), **draw)
    return {"inputs": tokens, "targets": targets}


class DeviceBatches:
    """`num_batches` batches generated once on the device, served round-robin."""

    def __init__(
        self,
        spec: InputSpec,
        batch_size: int,
        *,
        num_batches: int,
        device: torch.device,
        float_dtype: torch.dtype,
        seed: int,
    ):
        generator = torch.Generator(device=device).manual_seed(seed)
        self.batches = [
            make_device_batch(spec, batch_size, device=device, float_dtype=float_dtype, generator=generator)
            for _ in range(num_batches)
        ]
        self.index = 0

    def __next__(self) -> Batch:
        batch = self.batches[self.index % len(self.batches)]
        self.index += 1
        return batch

    def __iter__(self) -> Iterator[Batch]:
        return self

    def close(self) -> None:
        self.batches.clear()


class Interleaved:
    """Several batch streams served in turn (batches of different sizes: the dynamic-batch case)."""

    def __init__(self, streams: list[DeviceBatches]):
        self.streams, self.index = streams, 0

    def __next__(self) -> Batch:
        stream = self.streams[self.index % len(self.streams)]
        self.index += 1
        return next(stream)

    def __iter__(self) -> Iterator[Batch]:
        return self


class FakeDataset(Dataset):
    """Random samples made by the DataLoader's workers, as in the seed loop; deterministic per index."""

    def __init__(self, spec: InputSpec, seed: int, length: int = 1_000_000):
        self.spec, self.seed, self.length = spec, seed, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return make_sample(self.spec, torch.Generator().manual_seed(self.seed * 1_000_003 + index))


class LoaderBatches:
    """A DataLoader over :class:`FakeDataset`; every batch is copied to the device when it is taken."""

    def __init__(
        self,
        spec: InputSpec,
        batch_size: int,
        *,
        device: torch.device,
        float_dtype: torch.dtype,
        seed: int,
        num_workers: int,
        pin_memory: bool,
        non_blocking: bool,
    ):
        self.loader = DataLoader(
            FakeDataset(spec, seed),
            batch_size=batch_size,
            num_workers=num_workers,
            pin_memory=pin_memory and device.type == "cuda",
            persistent_workers=num_workers > 0,
        )
        self.iterator = iter(self.loader)
        self.device, self.float_dtype, self.non_blocking = device, float_dtype, non_blocking

    def __next__(self) -> Batch:
        inputs, targets = next(self.iterator)
        return to_device(
            {"inputs": inputs, "targets": targets}, self.device, self.float_dtype, self.non_blocking
        )

    def __iter__(self) -> Iterator[Batch]:
        return self

    def close(self) -> None:
        del self.iterator


def make_batches(
    data: DataConfig,
    spec: InputSpec,
    batch_size: int,
    *,
    device: torch.device,
    float_dtype: torch.dtype,
    seed: int,
) -> DeviceBatches | LoaderBatches:
    """The batch stream `data` asks for; the same seed gives the same batches in the same order."""
    if data.loader:
        return LoaderBatches(
            spec,
            batch_size,
            device=device,
            float_dtype=float_dtype,
            seed=seed,
            num_workers=data.num_workers,
            pin_memory=data.pin_memory,
            non_blocking=data.non_blocking,
        )
    return DeviceBatches(
        spec, batch_size, num_batches=data.num_batches, device=device, float_dtype=float_dtype, seed=seed
    )
