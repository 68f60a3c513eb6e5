"""This machine's collective bandwidth on its own: the probe a distributed pipeline job runs once per machine
(pipeline/diagnose/comm_probe.py: all-reduce, all-gather and reduce-scatter over message sizes, nccl-tests'
bus bandwidth), measured now and printed as a table.

    torchrun --standalone --nproc-per-node=2 benchmarks/comm_probe.py [--out probe.json] [--cached]

`--cached` takes the machine's cached probe where there is one (what the jobs read); by default it measures
afresh and replaces the cache. With NCCL_DEBUG=INFO, NCCL's own lines say which transport the ranks use
(P2P over NVLink, SHM through the host, ...). NVLink multicast stays off (set here unless already set).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

for _key, _value in {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}.items():
    os.environ.setdefault(_key, _value)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402 - after the environment NCCL reads
import torch.distributed as dist  # noqa: E402

from pipeline.diagnose.comm_probe import ensure  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default=None, help="also write the probe (JSON) here")
    parser.add_argument("--cached", action="store_true", help="the machine's cached probe where there is one")
    parser.add_argument("--device", default="auto", help="auto, cuda or cpu")
    args = parser.parse_args(argv)
    if "WORLD_SIZE" not in os.environ:
        print("comm_probe: run it under torchrun (one process per GPU)", file=sys.stderr)
        return 2
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if cuda:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    probe = ensure(device, Path(args.out) if args.out else None, force=not args.cached)
    if dist.get_rank() == 0 and probe is not None:
        print(f"comm probe: {json.dumps(probe.machine)}, {probe.seconds:.1f} s", flush=True)
        print(probe.table(), flush=True)
        for kind in ("all_reduce", "all_gather", "reduce_scatter"):
            print(f"peak busbw {kind}: {probe.peak_busbw(kind):.2f} GB/s", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
