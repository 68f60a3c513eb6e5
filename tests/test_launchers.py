"""Several jobs at once on one machine: the GPU pool gives each job its own GPU; the local launcher
runs jobs concurrently and survives a job that dies without a result."""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path

import pytest

from pipeline.job.gpu_pool import gpu_slot
from tests.conftest import TINY, output, run_cli, runs


def test_gpu_pool_hands_out_distinct_gpus_and_waits_when_all_are_taken(tmp_path: Path):
    held: list[tuple[str, float, float]] = []
    waits: list[str] = []

    def job(hold_s: float) -> None:
        with gpu_slot([0, 1], tmp_path, poll_s=0.05, on_wait=waits.append) as env:
            start = time.monotonic()
            time.sleep(hold_s)
            held.append((env["CUDA_VISIBLE_DEVICES"], start, time.monotonic()))
            assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"

    threads = [threading.Thread(target=job, args=(0.5,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted({gpu for gpu, _, _ in held}) == ["0", "1"]
    for (a, s1, e1), (b, s2, e2) in itertools.combinations(held, 2):
        assert a != b or e1 <= s2 or e2 <= s1  # one GPU is never held by two jobs at once
    assert waits and "all taken" in waits[0]  # the third job waited


def test_gpu_pool_leases_a_distributed_jobs_gpus_all_at_once(tmp_path: Path):
    """parallel.nproc=2 on a pool of 3: a job holds two GPUs; a second such job waits (never holding
    the one free GPU meanwhile) until two are free."""
    held: list[tuple[str, float, float]] = []
    waits: list[str] = []

    def job() -> None:
        with gpu_slot([0, 1, 2], tmp_path, poll_s=0.05, on_wait=waits.append, count=2) as env:
            start = time.monotonic()
            time.sleep(0.5)
            held.append((env["CUDA_VISIBLE_DEVICES"], start, time.monotonic()))

    threads = [threading.Thread(target=job) for _ in range(2)]
    for t in threads:
        t.start()
        time.sleep(0.1)
    for t in threads:
        t.join()
    (first, _, e1), (second, s2, _) = sorted(held, key=lambda h: h[1])
    assert first == "0,1" and len(second.split(",")) == 2 and e1 <= s2  # the second waited for two
    assert waits and "2 free GPU(s)" in waits[0]
    with pytest.raises(ValueError, match="holds 3"), gpu_slot([0, 1, 2], tmp_path, count=4):
        pass


@pytest.mark.slow
def test_local_gpus_launcher_runs_jobs_at_once_one_gpu_each(tmp_path: Path, store: str):
    """hydra/launcher=local_gpus on the CPU: the pool still hands out indices (the workers run on the
    CPU), so the launcher's concurrency and the pool's exclusivity are checked for real."""
    args = [
        *TINY,
        "compile.mode=eager",
        "device=cpu",
        "gpu_pool=[0,1]",
        "trainer.steps=30",
        "hydra/launcher=local_gpus",
        "trainer.seed=0,1,2,3",
    ]
    proc = run_cli(
        args, tmp_path, store, multirun=True, env={"PIPELINE_GPU_LOCK_DIR": str(tmp_path / "locks")}
    )
    assert proc.returncode == 0, output(proc)
    assert sorted(p.name for p in (tmp_path / "locks").iterdir()) == ["gpu0.lock", "gpu1.lock"]
    kids = [r for r in runs(store) if r.data.tags.get("sweep_parent") != "true"]
    assert len(kids) == 4 and all(r.info.status == "FINISHED" for r in kids)
    results = [json.loads(p.read_text()) for p in (tmp_path / "multirun").glob("*/result.json")]
    spans = [
        (r["info"]["gpu_pool_index"], r["info"]["worker_started_at"], r["info"]["worker_ended_at"])
        for r in results
    ]
    assert {gpu for gpu, _, _ in spans} == {0, 1}
    for (a, s1, e1), (b, s2, e2) in itertools.combinations(spans, 2):
        assert a != b or e1 <= s2 or e2 <= s1
    # Jobs ran concurrently: some pair of workers overlapped in time (on different GPUs).
    assert any(s1 < e2 and s2 < e1 for (_, s1, e1), (_, s2, e2) in itertools.combinations(spans, 2))
    assert {r["environment"]["cuda_visible_devices"] for r in results} == {"0", "1"}
