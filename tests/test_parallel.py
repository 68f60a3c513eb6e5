"""Distributed jobs (`parallel=ddp|fsdp`) on the CPU: 2 gloo processes started by torchrun, through the
real CLI into MLflow; a rank's failure is the job's; no rank outlives its job; a sweep over
parallel=none,ddp summarizes both, with the scaling efficiency."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from pipeline.config.errors import ConfigError
from pipeline.job.preflight import validate
from tests.conftest import client, compose, one_line_errors, output, popen_cli, run_cli, runs

# 2 processes of vit_tiny on the CPU, per-rank batch 2, 4 steps (2 warm-up).
TINY_CPU = [
    "device=cpu",
    "model=vit_tiny",
    "trainer.batch_size=2",
    "trainer.steps=4",
    "trainer.warmup_steps=2",
]
# A linear model with two blocks (tests/fault_models.py rank_fault), eager, 4 steps.
RANK_FAULT = [
    "device=cpu",
    "model.id=rank_fault",
    "model._target_=tests.fault_models.rank_fault",
    "model.name=null",
    "model.input.height=8",
    "model.input.width=8",
    "model.input.num_classes=10",
    "trainer.batch_size=2",
    "trainer.steps=4",
    "trainer.warmup_steps=1",
    "compile.mode=eager",
    "parallel=ddp",
]


def only_run(store: str):
    (run,) = runs(store)
    return run


def processes_mentioning(marker: str) -> list[int]:
    """Live processes (not zombies) whose command line mentions `marker` (the job's folder)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(proc.name))
    return found


def wait_until_gone(marker: str, timeout: float = 30) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = processes_mentioning(marker)
        if not left:
            return []
        time.sleep(0.2)
    return processes_mentioning(marker)


def rank_series(store: str, run_id: str, name: str) -> dict[int, float]:
    return {m.step: m.value for m in client(store).get_metric_history(run_id, name)}


def assert_two_ranks(store: str, run) -> None:
    m, tags = run.data.metrics, run.data.tags
    assert run.info.status == "FINISHED"
    assert m["parallel/world_size"] == 2.0 and tags["world_size"] == "2"
    assert run.data.params["parallel.nproc"] == "2"
    per_rank = rank_series(store, run.info.run_id, "rank/step_p50_ms")
    assert sorted(per_rank) == [0, 1] and all(v > 0 for v in per_rank.values())
    # The job's step times are its slowest rank's own: their median is the largest rank median.
    assert m["step/p50_ms"] == pytest.approx(max(per_rank.values()))
    assert m["step/rank_p50_max_ms"] == pytest.approx(max(per_rank.values()))
    assert 0 <= m["step/rank_spread_pct"] < 100
    assert sorted(rank_series(store, run.info.run_id, "rank/cpu_rss_peak_gib")) == [0, 1]
    # Throughput counts both ranks' samples: 2 ranks x 2 samples per median step.
    assert m["throughput/samples_per_s"] == pytest.approx(4 * 1000 / m["step/p50_ms"], rel=1e-6)


def test_ddp_job_with_aot_eager_logs_every_rank(tmp_path: Path, store: str):
    proc = run_cli([*TINY_CPU, "parallel=ddp", "compile.backend=aot_eager"], tmp_path, store)
    assert proc.returncode == 0, output(proc)
    run = only_run(store)
    assert_two_ranks(store, run)
    assert run.data.tags["parallel"] == "ddp" and "ddp×2" in run.info.run_name
    m = run.data.metrics
    assert m["speedup/vs_eager"] > 0  # the paired eager baseline ran in the same process group
    assert sorted(rank_series(store, run.info.run_id, "rank/eager_step_p50_ms")) == [0, 1]
    assert sorted(rank_series(store, run.info.run_id, "rank/compile_total_s")) == [0, 1]
    assert m["diagnose/rank_max_unique_graphs"] >= 1
    assert not (tmp_path / "run" / "result.rank1.json").read_text().count('"error": {')  # rank 1 finished
    assert json.loads((tmp_path / "run" / "result.rank1.json").read_text())["status"] == "FINISHED"
    # Why it scales as it does: 3 profiled steps after the measurement, against the machine's own probe.
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert 0 < m["comm/exposed_ms"] <= m["comm/collective_ms"]
    assert m["comm/exposed_pct"] == pytest.approx(100 * m["comm/exposed_ms"] / m["comm/profiled_step_ms"])
    assert 0 < m["comm/exposed_pct"] <= 100
    # DDP all-reduces every gradient once a step: float32, one per parameter
    assert m["comm/mb_per_step"] * 1e6 == pytest.approx(4 * result["info"]["parameters"])
    assert m["comm/busbw_gbps"] > 0 and m["comm/probe_peak_busbw_gbps"] > 0
    assert m["comm/busbw_vs_probe"] == pytest.approx(m["comm/busbw_gbps"] / m["comm/probe_busbw_gbps"])
    exposed = rank_series(store, run.info.run_id, "rank/comm_exposed_ms")
    assert sorted(exposed) == [0, 1] and max(exposed.values()) == pytest.approx(m["comm/exposed_ms"])
    comm = tmp_path / "run" / "comm"
    assert sorted(p.name for p in comm.iterdir()) == [
        "probe.json",
        "trace.rank0.json.gz",
        "trace.rank1.json.gz",
    ]
    probe = json.loads((comm / "probe.json").read_text())
    assert probe["world_size"] == 2 and {r["kind"] for r in probe["rows"]} >= {"all_reduce", "all_gather"}
    assert list((Path(os.environ["PIPELINE_CACHE_DIR"]) / "comm_probe").glob("*.json"))  # once per machine
    assert "comm exposed " in proc.stdout and "of this machine's at those sizes" in proc.stdout
    assert wait_until_gone(str(tmp_path)) == []


@pytest.mark.slow
def test_ddp_eager_and_fsdp_regional_aot_eager_jobs(tmp_path: Path, store: str):
    proc = run_cli([*TINY_CPU, "parallel=ddp", "compile.mode=eager"], tmp_path / "ddp", store)
    assert proc.returncode == 0, output(proc)
    proc = run_cli(
        [*TINY_CPU, "parallel=fsdp", "compile.backend=aot_eager", "compile.scope=regional"],
        tmp_path / "fsdp",
        store,
    )
    assert proc.returncode == 0, output(proc)
    by_strategy = {r.data.tags["parallel"]: r for r in runs(store)}
    assert set(by_strategy) == {"ddp", "fsdp"}
    for run in by_strategy.values():
        assert_two_ranks(store, run)
    fsdp = by_strategy["fsdp"]
    assert "speedup/vs_eager" in fsdp.data.metrics and fsdp.data.metrics["compile/rank_total_max_s"] > 0
    assert "speedup/vs_eager" not in by_strategy["ddp"].data.metrics  # eager: nothing to pair


def rank_failure_files(job_dir: Path, *, exits: dict[int, int], errors: dict[int, tuple[str, bool]]) -> None:
    """A failed distributed job's folder as its launcher and ranks leave it: torch's list of failed
    ranks (`exits`: rank -> exit code) and each rank's result (`errors`: rank -> (message, peer_failure))."""
    from pipeline.job.result import JobResult
    from pipeline.job.supervisor import signal_description
    from pipeline.jobdir import JobDir
    from pipeline.status import FAILED

    rows = [
        {"rank": r, "exitcode": c, "exit": signal_description(c), "pid": 1, "timestamp": 0, "message": ""}
        for r, c in exits.items()
    ]
    JobDir(job_dir).rank_failures.write_text(json.dumps(rows))
    for rank, (message, peer_failure) in errors.items():
        result = JobResult()
        result.info.update(rank=rank, failed_at=100.0 + rank, peer_failure=peer_failure)
        result.fail(FAILED, "RuntimeError", f"rank {rank}: {message}")
        result.write(JobDir(job_dir).rank_result(rank))


BROKEN = "Connection closed by peer [127.0.0.1]:1234. This is typically caused by a remote worker crashing."


@pytest.mark.parametrize(
    ("exits", "errors", "cause"),
    [
        # A rank raised; its peer was aborted by the broken collective (SIGABRT) or stopped by torch.
        ({0: -6, 1: 1}, {1: ("injected", False)}, "RuntimeError: rank 1: injected"),
        ({0: -15, 1: 1}, {1: ("injected", False)}, "RuntimeError: rank 1: injected"),
        # A rank raised and its peer reported the broken collective, even earlier.
        ({0: 1, 1: 1}, {0: (BROKEN, True), 1: ("injected", False)}, "RuntimeError: rank 1: injected"),
        # A rank was killed outright: its peer's broken collective is the consequence.
        ({0: 1, 1: -9}, {0: (BROKEN, True)}, "WorkerCrashed: rank 1 killed by SIGKILL"),
        ({0: -9, 1: 1}, {1: ("injected", False)}, "WorkerCrashed: rank 0 killed by SIGKILL"),
        # A rank aborted on its own (a device assert): its peers only saw the broken collective.
        ({0: -6, 1: 1}, {1: (BROKEN, True)}, "WorkerCrashed: rank 0 killed by SIGABRT"),
    ],
)
def test_a_distributed_jobs_failure_is_its_root_cause(tmp_path: Path, exits, errors, cause: str):
    from pipeline.job.supervisor import ranks_result

    rank_failure_files(tmp_path, exits=exits, errors=errors)
    result = ranks_result(tmp_path, tmp_path / "result.json", 1, "log tail")
    assert f"{result.error.type}: {result.error.message}".startswith(cause), result.error
    assert [e["rank"] for e in result.info["rank_exits"]] == sorted(exits)


def test_a_broken_collective_is_told_from_a_ranks_own_error():
    import torch.distributed as dist

    from pipeline.axes.parallel import is_peer_failure

    assert is_peer_failure(RuntimeError(f"[gloo/transport/tcp/pair.cc:553] {BROKEN}"))
    assert is_peer_failure(dist.DistBackendError("NCCL error: remote process exited"))
    assert not is_peer_failure(RuntimeError("injected fault on rank 1"))


@pytest.mark.slow
def test_a_rank_that_raises_fails_the_job_with_its_error_and_no_rank_is_left(tmp_path: Path, store: str):
    proc = run_cli([*RANK_FAULT, "+model.kwargs.fault=raise"], tmp_path, store)
    assert proc.returncode == 1, output(proc)
    run = only_run(store)
    assert run.info.status == "FAILED"
    assert run.data.tags["error_type"] == "RuntimeError", run.data.tags
    assert "rank 1: injected fault on rank 1" in run.data.tags["error_message"]
    assert wait_until_gone(str(tmp_path)) == []


@pytest.mark.slow
def test_a_rank_killed_by_sigkill_fails_the_job_and_no_rank_is_left(tmp_path: Path, store: str):
    proc = run_cli([*RANK_FAULT, "+model.kwargs.fault=sigkill"], tmp_path, store)
    assert proc.returncode == 1, output(proc)
    run = only_run(store)
    assert run.info.status == "FAILED" and run.data.tags["error_type"] == "WorkerCrashed", run.data.tags
    assert "rank 1 killed by SIGKILL" in run.data.tags["error_message"]
    assert wait_until_gone(str(tmp_path)) == []


@pytest.mark.slow
def test_sigterm_to_a_distributed_job_ends_it_killed_with_every_rank_gone(tmp_path: Path, store: str):
    proc = _start_hanging_job(tmp_path, store)
    try:
        started = [p for p in processes_mentioning(str(tmp_path)) if b"pipeline.job." in _cmdline(p)]
        assert len(started) == 3  # the agent (pipeline.job.ranks) and two ranks (pipeline.job.worker)
        for pid in started:  # NVLink multicast off in each
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert b"NCCL_NVLS_ENABLE=0" in environ and b"NVSHMEM_DISABLE_NVLS=1" in environ, pid
        time.sleep(3)  # rank 1 is in its hanging forward
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out + err
    run = only_run(store)
    assert run.info.status == "KILLED" and run.data.tags["error_type"] == "Interrupted"
    assert wait_until_gone(str(tmp_path)) == []


def _ranks_up(tmp_path: Path) -> bool:
    """Both ranks run the worker (two worker processes for this job)."""
    workers = [p for p in processes_mentioning(str(tmp_path)) if b"pipeline.job.worker" in _cmdline(p)]
    return len(workers) >= 2


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.slow
def test_sweep_over_parallel_none_and_ddp_summarizes_both_with_scaling(tmp_path: Path, store: str):
    proc = run_cli([*TINY_CPU, "compile.mode=eager", "parallel=none,ddp"], tmp_path, store, multirun=True)
    assert proc.returncode == 0, output(proc)
    kids = [r for r in runs(store) if r.data.tags.get("sweep_parent") != "true"]
    assert sorted((k.data.tags["parallel"], k.data.tags["world_size"]) for k in kids) == [
        ("ddp", "2"),
        ("none", "1"),
    ]
    md = (tmp_path / "multirun" / "summary.md").read_text()
    assert "ddp" in md and "none" in md
    assert "scaling efficiency of vit_tiny·amp·eager·ddp×2 on 2 processes vs vit_tiny·amp·eager" in md, md
    assert "% (throughput / (2 x the one-process throughput)); comm exposed " in md, md  # why it scales so
    # Different global batches: the sweep ranks by throughput, not step time.
    assert "throughput, samples/s" in md


def test_unsupported_parallel_combinations_are_refused_before_anything_starts(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
):
    proc = run_cli(
        [
            *TINY_CPU,
            "parallel=fsdp",
            "scenario=inference",
            "compile.mode=reduce-overhead",
            "parallel.bucket_cap_mb=50",
        ],
        tmp_path,
        store,
    )
    assert proc.returncode == 2, output(proc)
    errors = one_line_errors(proc, "config error:")
    text = "\n".join(errors)
    assert "parallel='fsdp'" in text and "scenario=inference" in text
    assert "compile.mode='reduce-overhead'" in text and "pytorch/pytorch#140395" in text
    assert "parallel.bucket_cap_mb=50" in text and "only with parallel=ddp" in text
    assert runs(store) == []  # nothing started, nothing logged
    with pytest.raises(ConfigError, match="has no repeated blocks to shard"):
        validate(compose([*TINY_CPU, "parallel=fsdp", "model=convnet"]))
    with pytest.raises(ConfigError, match=r"needs parallel=ddp or parallel=fsdp"):
        validate(compose([*TINY_CPU, "parallel.nproc=2"]))
    with pytest.raises(ConfigError, match=r"at most the 1 GPU\(s\) of gpu_pool=\[0\]"):
        validate(compose([*TINY_CPU, "parallel=ddp", "gpu_pool=[0]"]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # more ranks than GPUs this job may use
    with pytest.raises(ConfigError, match=r"at most the 1 GPU\(s\) this job sees \(device=cuda\)"):
        validate(compose([*TINY_CPU, "parallel=ddp", "parallel.nproc=2", "device=cuda"]))
    with pytest.raises(ConfigError, match=r"needs compile\.scope=step"):
        validate(compose([*TINY_CPU, "parallel=ddp", "parallel.optimize_ddp=compiled_autograd"]))


def test_parallel_nproc_defaults_to_the_gpus_the_job_may_use(monkeypatch: pytest.MonkeyPatch):
    """parallel=ddp/fsdp compose `parallel.nproc: null`, resolved before the job starts without CUDA: one
    rank per GPU of the job's pool (hydra/launcher=local_gpus), else per GPU CUDA_VISIBLE_DEVICES (or
    NVML) shows; 2 gloo processes on the CPU or where no GPU is seen; a number given stays."""
    from pipeline.config.checks import check
    from pipeline.job.preflight import with_ranks

    tiny = [a for a in TINY_CPU if a != "device=cpu"]

    def ranks(*overrides: str) -> int | None:
        return with_ranks(check(compose([*tiny, *overrides]))).parallel.nproc

    monkeypatch.delenv("PIPELINE_GPU_POOL", raising=False)
    assert compose([*tiny, "parallel=ddp"]).parallel.nproc is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    assert ranks("parallel=ddp") == 3 and ranks("parallel=fsdp") == 3
    assert ranks("parallel=ddp", "device=cpu") == 2
    assert ranks("parallel=ddp", "gpu_pool=[4,5]") == 2  # the pool's GPUs are the job's
    assert ranks("parallel=ddp", "parallel.nproc=1") == 1
    assert ranks("parallel=none") == 1
    monkeypatch.setenv(
        "PIPELINE_GPU_POOL", "all"
    )  # the launcher's pool: NVML's GPUs (none here: the visible)
    assert ranks("parallel=ddp") == 3
    monkeypatch.delenv("PIPELINE_GPU_POOL")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU: the CPU's gloo processes
    assert ranks("parallel=ddp") == 2
    # validate resolves it too, and a job's name and params show the number
    assert validate(compose([*TINY_CPU, "parallel=ddp"])).parallel.nproc == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(ConfigError, match=r"parallel.nproc=3 is not allowed: at most the 1 GPU"):
        validate(compose([*tiny, "parallel=ddp", "parallel.nproc=3", "device=cuda"]))


def test_slurm_asks_for_a_distributed_jobs_gpus_and_cpus_in_one_task():
    from pipeline.sweep.slurm import request_for_ranks

    params = {"gpus_per_node": 1, "cpus_per_task": 8, "tasks_per_node": 1}
    notes = request_for_ranks(params, 2)
    assert params == {"gpus_per_node": 2, "cpus_per_task": 16, "tasks_per_node": 1}
    assert len(notes) == 2 and "gpus_per_node=2" in notes[0]
    single = {"gpus_per_node": 1, "cpus_per_task": 8}
    assert request_for_ranks(single, 1) == [] and single == {"gpus_per_node": 1, "cpus_per_task": 8}


@pytest.mark.slow
def test_optimize_ddp_splits_show_as_backend_graphs_and_compiled_autograd_captures_backward(
    tmp_path: Path, store: str
):
    """DDPOptimizer splits the compiled model at 1 MiB buckets (a 1.6M-parameter ViT: several graphs for
    the backend); off, one graph; compiled autograd (with the compiled step) captures the backward."""
    wide = [*TINY_CPU, "model.kwargs.embed_dim=256", "parallel=ddp", "compile.backend=aot_eager"]
    wide += ["benchmark.paired_eager=false", "parallel.bucket_cap_mb=1"]
    proc = run_cli([*wide, "parallel.optimize_ddp=on,off"], tmp_path, store, multirun=True)
    assert proc.returncode == 0, output(proc)
    graphs = {
        r.data.params["parallel.optimize_ddp"]: r.data.metrics["diagnose/rank_max_backend_graphs"]
        for r in runs(store)
        if r.data.tags.get("sweep_parent") != "true"
    }
    assert graphs["off"] == 1 and graphs["on"] > 1, graphs
    step = ["compile.scope=step", "parallel.optimize_ddp=compiled_autograd", "benchmark.paired_eager=false"]
    proc = run_cli([*TINY_CPU, "parallel=ddp", "compile.backend=aot_eager", *step], tmp_path / "ca", store)
    assert proc.returncode == 0, output(proc)
    (run,) = [r for r in runs(store) if r.data.params.get("parallel.optimize_ddp") == "compiled_autograd"]
    assert run.data.metrics["diagnose/compiled_autograd_captures"] >= 1


def _start_hanging_job(tmp_path: Path, store: str, *extra: str):
    """A ddp job whose rank 1 hangs in its second forward; returns once both ranks run."""
    proc = popen_cli([*RANK_FAULT, "+model.kwargs.fault=hang", *extra], tmp_path, store)
    deadline = time.monotonic() + 120
    while not _ranks_up(tmp_path):
        assert time.monotonic() < deadline and proc.poll() is None, "the ranks never started"
        time.sleep(0.5)
    return proc


@pytest.mark.slow
def test_a_hanging_rank_is_killed_at_the_jobs_timeout_with_every_rank(tmp_path: Path, store: str):
    proc = _start_hanging_job(tmp_path, store, "trainer.timeout_s=40")
    try:
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, out + err
    run = only_run(store)
    assert run.info.status == "KILLED" and run.data.tags["error_type"] == "Timeout", run.data.tags
    assert wait_until_gone(str(tmp_path)) == []


@pytest.mark.slow
def test_every_rank_dies_with_its_job_process(tmp_path: Path, store: str):
    """`kill -9` of the job's process: the agent dies with it (PDEATHSIG) and every rank with the agent."""
    proc = _start_hanging_job(tmp_path, store)
    proc.kill()
    proc.wait()
    assert wait_until_gone(str(tmp_path)) == []


def test_every_process_a_job_starts_has_nvlink_multicast_off():
    from pipeline.job.supervisor import NVLINK_MULTICAST_OFF, worker_env

    env = worker_env(None)
    assert NVLINK_MULTICAST_OFF == {
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
    }
    assert all(env[k] == v for k, v in NVLINK_MULTICAST_OFF.items())


@pytest.mark.slow
def test_local_gpus_leases_two_gpus_for_a_ddp_job_and_its_ranks_see_both(tmp_path: Path, store: str):
    """hydra/launcher=local_gpus on the CPU with pretend GPU indices: the job takes two of the pool at
    once, and both ranks run with CUDA_VISIBLE_DEVICES naming the two."""
    args = [*TINY_CPU, "compile.mode=eager", "parallel=ddp", "gpu_pool=[0,1,2]", "hydra/launcher=local_gpus"]
    locks = {"PIPELINE_GPU_LOCK_DIR": str(tmp_path / "gpu-locks")}  # this test's own pool
    proc = run_cli(args, tmp_path, store, multirun=True, env=locks)
    assert proc.returncode == 0, output(proc)
    (result,) = [json.loads(p.read_text()) for p in (tmp_path / "multirun").glob("*/result.json")]
    assert result["status"] == "FINISHED" and result["info"]["gpu_pool_index"] == [0, 1]


def _rank_result(job_dir: Path, rank: int, *, error: str | None, failed_at: float = 0.0) -> None:
    from pipeline.job.result import JobResult
    from pipeline.jobdir import JobDir
    from pipeline.status import FAILED, FINISHED

    result = JobResult(status=FINISHED)
    result.info["rank"] = rank
    if error:
        result.info["failed_at"] = failed_at
        result.fail(FAILED, error.split(":")[0], error)
    result.write(JobDir(job_dir).rank_result(rank))


def test_the_jobs_result_is_the_rank_that_failed_first(tmp_path: Path):
    """How the supervisor merges the ranks' results: rank 0's when all finished; the earliest failure
    among the ranks torch saw fail (a peer's broken collective comes later); a rank killed by a signal
    before it wrote anything is the cause even when a peer then wrote its collective's error."""
    from pipeline.job.supervisor import ranks_result
    from pipeline.jobdir import JobDir

    def exits(*rows: tuple[int, int]) -> None:
        text = json.dumps([{"rank": r, "exitcode": c, "exit": f"code {c}", "timestamp": 1} for r, c in rows])
        JobDir(tmp_path).rank_failures.write_text(text)

    _rank_result(tmp_path, 0, error=None)
    _rank_result(tmp_path, 1, error=None)
    assert ranks_result(tmp_path, tmp_path / "result.json", 0, "").status == "FINISHED"

    _rank_result(tmp_path, 0, error="DistBackendError: rank 0: Connection closed by peer", failed_at=2.0)
    _rank_result(tmp_path, 1, error="RuntimeError: rank 1: injected", failed_at=1.0)
    exits((1, 1), (0, 1))
    merged = ranks_result(tmp_path, tmp_path / "result.json", 1, "")
    assert merged.error is not None and merged.error.message == "RuntimeError: rank 1: injected"

    (tmp_path / "result.rank1.json").unlink()
    exits((1, -9))
    merged = ranks_result(tmp_path, tmp_path / "result.json", 1, "log tail")
    assert merged.error is not None and merged.error.type == "WorkerCrashed"
    assert (
        merged.error.message == "rank 1 code -9 before writing its result" and merged.info["failed_rank"] == 1
    )


def test_the_slurm_launcher_reads_the_largest_nproc_of_the_sweeps_jobs():
    """What the SLURM launcher asks for: each job's config composed as Hydra composes it (group
    defaults included: parallel=ddp means 2 ranks), the largest parallel.nproc."""
    from hydra import initialize_config_dir
    from hydra._internal.callbacks import Callbacks
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.utils import HydraContext
    from hydra.types import RunMode

    from hydra_plugins.pipeline_launchers.launchers import SlurmLauncher
    from pipeline.config.schema import register_configs
    from tests.conftest import CONF

    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        hydra = GlobalHydra.instance().hydra
        assert hydra is not None
        cfg = hydra.compose_config("config", overrides=["hydra/launcher=slurm"], run_mode=RunMode.MULTIRUN)
        launcher = SlurmLauncher.__new__(SlurmLauncher)  # as Hydra sets it up, without a cluster
        launcher.config = cfg
        launcher.hydra_context = HydraContext(config_loader=hydra.config_loader, callbacks=Callbacks())
        assert launcher.largest_nproc([["parallel=none"], ["parallel=ddp"]]) == 2
        assert launcher.largest_nproc([["parallel=none"], ["parallel=fsdp", "parallel.nproc=3"]]) == 3
        assert launcher.largest_nproc([["parallel=none"]]) == 1


def _plan_on_rank(rank: int, port: int, mosts: list[int], out: str) -> None:
    import torch
    import torch.distributed as dist

    from pipeline.measure.ranks import agreed_looks

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        looks = agreed_looks(10, mosts[rank], torch.device("cpu"))
        Path(out, f"rank{rank}.json").write_text(json.dumps(list(looks.counts)))
    finally:
        dist.destroy_process_group()


def test_every_rank_follows_rank_0s_plan_of_looks_even_when_its_own_unit_times_plan_fewer(tmp_path: Path):
    """Each rank's warm-up times differ, and only rank 0 looks while the others follow its answers: a rank
    planning fewer looks on its own would step past its last one. The plan is rank 0's on every rank."""
    import socket

    import torch.multiprocessing as mp

    from pipeline.measure.sequential import Looks

    mosts = [200, 30]  # rank 0's budget holds more rounds than rank 1's
    assert len(Looks.plan(10, mosts[0]).counts) > len(Looks.plan(10, mosts[1]).counts)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # forked, torch already imported: no second interpreter start per rank
    mp.start_processes(_plan_on_rank, args=(port, mosts, str(tmp_path)), nprocs=2, start_method="fork")
    plans = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert plans[0] == plans[1] == list(Looks.plan(10, mosts[0]).counts)
