"""Fake data following a model's input spec: by default `data.num_batches` batches drawn once on the device
and rotated (a step never waits for the host); with `data.loader` a DataLoader whose workers make CPU tensors,
copied to the device every step. A seeded job draws the same batches in the same order, so paired variants
see the same data."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, Dataset

from pipeline.config.schema import DataConfig, InputSpec

Batch = dict[str, torch.Tensor]


def make_device_batch(
    spec: InputSpec,
    batch_size: int | None,
    *,
    generator: torch.Generator,
    device: torch.device | None = None,
    float_dtype: torch.dtype = torch.float32,
) -> Batch:
    """One batch drawn on `device` (no host work, no copy), the same for the same seeded generator;
    `batch_size=None` draws one sample, without the batch dimension (a DataLoader worker's, on the CPU)."""
    draw = {"generator": generator, "device": device}
    batch = () if batch_size is None else (batch_size,)
    if spec.kind == "image":
        inputs = torch.randn((*batch, spec.channels, spec.height, spec.width), **draw).to(float_dtype)
        return {"inputs": inputs, "targets": torch.randint(spec.num_classes, batch, **draw)}
    tokens = torch.randint(spec.vocab_size, (*batch, spec.seq_len), **draw)
    if spec.target == "next_token":
        targets = tokens.clone()
    elif spec.target == "masked_token":
        targets = torch.where(torch.rand(tokens.shape, **draw) < 0.15, tokens, torch.full_like(tokens, -100))
    else:
        targets = torch.randint(spec.num_classes, batch, **draw)
    return {"inputs": tokens, "targets": targets}


class DeviceBatches(Iterator[Batch]):
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
        draw = {"device": device, "float_dtype": float_dtype, "generator": generator}
        self.batches = itertools.cycle(
            [make_device_batch(spec, batch_size, **draw) for _ in range(num_batches)]
        )

    def __next__(self) -> Batch:
        return next(self.batches)


def cycles(streams: list[DeviceBatches]) -> Iterator[tuple[Batch, ...]]:
    """A batch of each stream in turn, as one unit's input (batches of different sizes: the dynamic-batch
    case), so that every unit holds the same work."""
    while True:
        yield tuple(next(stream) for stream in streams)


class FakeDataset(Dataset):
    """Random samples made by the DataLoader's workers, as in the seed loop; deterministic per index."""

    def __init__(self, spec: InputSpec, seed: int, length: int = 1_000_000):
        self.spec, self.seed, self.length = spec, seed, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> Batch:
        return make_device_batch(
            self.spec, None, generator=torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        )


class LoaderBatches(Iterator[Batch]):
    """A DataLoader over :class:`FakeDataset`; every batch is copied to the device when it is taken."""

    def __init__(
        self,
        data: DataConfig,
        spec: InputSpec,
        batch_size: int,
        *,
        device: torch.device,
        float_dtype: torch.dtype,
        seed: int,
    ):
        self.loader = DataLoader(
            FakeDataset(spec, seed),
            batch_size=batch_size,
            num_workers=data.num_workers,
            pin_memory=data.pin_memory and device.type == "cuda",
            persistent_workers=data.num_workers > 0,
        )
        self.iterator = iter(self.loader)
        self.device, self.float_dtype, self.non_blocking = device, float_dtype, data.non_blocking

    def to_device(self, value: torch.Tensor) -> torch.Tensor:
        value = value.to(self.device, non_blocking=self.non_blocking)
        return value.to(self.float_dtype) if value.is_floating_point() else value

    def __next__(self) -> Batch:
        return {key: self.to_device(value) for key, value in next(self.iterator).items()}


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
    where = {"device": device, "float_dtype": float_dtype, "seed": seed}
    if data.loader:
        return LoaderBatches(data, spec, batch_size, **where)
    return DeviceBatches(spec, batch_size, num_batches=data.num_batches, **where)
