"""The torch.compile article's training loop, kept as the article wrote it (../shared/seeds/000_*):
timm's VisionTransformer() (ViT-B/16), a FakeDataset whose DataLoader workers make a random 3x224x224
image per sample, batch 64, 4 workers, a host-to-device copy every step, Adam, cross-entropy, bf16
autocast (`--amp`), optional torch.compile (`--compile`).

Timing: the article averages per-step perf_counter deltas after step 10 without a device sync; that
figure is printed as `article_step_ms`. The honest figure, `step_time_ms_mean`, synchronizes the device
before and after the measured steps (the pageable host-to-device copy already serializes most steps).

    python benchmarks/seed_loop.py --amp --steps 100 --warmup 10
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch.utils.data import DataLoader, Dataset


class FakeDataset(Dataset):
    def __len__(self) -> int:
        return 1000000

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        rand_image = torch.randn([3, 224, 224], dtype=torch.float32)
        label = torch.tensor(data=[index % 1000], dtype=torch.int64)
        return rand_image, label


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--amp", action="store_true")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()

    from timm.models.vision_transformer import VisionTransformer

    device = torch.cuda.current_device()
    model = VisionTransformer()
    if args.compile:
        model = torch.compile(model)
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters())
    loader = DataLoader(FakeDataset(), batch_size=args.batch_size, num_workers=args.workers)
    loss_function = torch.nn.CrossEntropyLoss()

    article_sum, article_count = 0.0, 0
    t0 = time.perf_counter()
    for idx, (inputs, target) in enumerate(loader, start=1):
        if idx == args.warmup + 1:
            torch.cuda.synchronize()
            measured_start = time.perf_counter()
            t0 = measured_start
        inputs = inputs.to(device)
        targets = torch.squeeze(target.to(device), -1)
        optimizer.zero_grad()
        with torch.autocast("cuda", enabled=args.amp, dtype=torch.bfloat16):
            outputs = model(inputs)
            loss = loss_function(outputs, targets)
        loss.backward()
        optimizer.step()
        batch_time = time.perf_counter() - t0
        if idx > args.warmup:
            article_sum += batch_time
            article_count += 1
        t0 = time.perf_counter()
        if idx >= args.steps:
            break
    torch.cuda.synchronize()
    measured = args.steps - args.warmup
    print(
        json.dumps(
            {
                "config": f"seed loop, {'amp' if args.amp else 'fp32'}, {'compiled' if args.compile else 'eager'}",
                "step_time_ms_mean": (time.perf_counter() - measured_start) * 1000 / measured,
                "article_step_ms": article_sum / article_count * 1000,
                "measured_steps": measured,
                "gpu": torch.cuda.get_device_name(),
                "torch": torch.__version__,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
