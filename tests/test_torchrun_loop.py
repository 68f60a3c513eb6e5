"""benchmarks/torchrun_loop.py, the plain torchrun loop a distributed job's figures are checked against:
it runs under torchrun on 2 gloo ranks, reports the job's figures as its slowest rank's, and trains what a
pipeline job trains (the same first loss from the same weights, batch and loss)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT, compose


def pipeline_first_loss() -> float:
    """The first training step's loss of `model=vit_tiny device=cpu compile.mode=eager` on rank 0, made by
    the pipeline's own pieces: the model from the job's seed, rank 0's first on-device batch, the loss."""
    from losses import build_loss
    from models import build_model
    from pipeline.axes.data import make_batches
    from pipeline.axes.precision import Precision
    from pipeline.job.preflight import validate

    cfg = validate(compose(["model=vit_tiny", "device=cpu", "compile.mode=eager"]))
    precision = Precision(cfg.precision)
    torch.manual_seed(cfg.trainer.seed)
    model = build_model(cfg.model).train()
    batches = make_batches(
        cfg.data,
        cfg.model.input,
        cfg.trainer.batch_size,
        device=torch.device("cpu"),
        float_dtype=precision.input_dtype,
        seed=cfg.trainer.seed,
    )
    batch = next(batches)
    loss = build_loss(cfg.loss, cfg.model.input)
    with torch.no_grad(), precision.autocast("cpu"):
        return float(loss(batch, model(batch["inputs"])))


@pytest.mark.slow  # the default suite's 5 minutes (CI runs it: make test-all)
def test_the_plain_loop_runs_ddp_on_two_gloo_ranks_and_trains_what_a_pipeline_job_trains(tmp_path: Path):
    out = tmp_path / "loop.jsonl"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    command += [
        "benchmarks/torchrun_loop.py",
        "--model",
        "vit_tiny",
        "--parallel",
        "ddp",
        "--compile",
        "eager",
    ]
    command += ["--device", "cpu", "--steps", "5", "--warmup", "2", "--out", str(out)]
    command += ["--profile-dir", str(tmp_path / "profile")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert (row["world_size"], row["batch_per_rank"], row["global_batch"], row["measured_steps"]) == (
        2,
        8,
        16,
        3,
    )
    assert [r["mean_ms"] > 0 for r in row["ranks"]] == [True, True]
    # the job's step is its slowest rank's; samples/s count both ranks' batches
    assert row["step_ms_mean"] == max(r["mean_ms"] for r in row["ranks"])
    assert row["step_ms_p50"] == max(r["p50_ms"] for r in row["ranks"])
    assert row["samples_per_s_mean"] == pytest.approx(16 * 1000 / row["step_ms_mean"])
    assert row["nvls"] == {
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
    }
    # rank 0's first step, before any all-reduce: the pipeline's model, batch and loss give the same loss
    assert row["loss_first"] == pytest.approx(pipeline_first_loss(), rel=1e-6)
    # each rank's trace of 3 more steps, read per step as benchmarks/trace_summary.py reads a job's: DDP's
    # all-reduces are there, and what of them no compute hid is at most their time
    traces = sorted((tmp_path / "profile" / "eager").glob("trace.rank*.json.gz"))
    assert [t.name for t in traces] == ["trace.rank0.json.gz", "trace.rank1.json.gz"]
    summary = subprocess.run(
        [sys.executable, "benchmarks/trace_summary.py", "--steps", "3", *map(str, traces)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    for line in summary.stdout.splitlines():
        ranks = json.loads(line)
        assert ranks["steps"] == 3, ranks
        assert 0 < ranks["exposed_comm_ms_per_step"] <= ranks["collective_ms_per_step"] + 1e-9, ranks
    assert len(summary.stdout.splitlines()) == 2, summary.stderr[-2000:]
    # gloo's all-reduce by name in each rank's trace (among the top CPU ops it drops out on a busy host)
    for trace in traces:
        events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
        assert any(e.get("name") == "gloo:all_reduce" for e in events), trace
