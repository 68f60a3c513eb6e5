"""Several jobs at once on one machine: the GPU pool gives each job its own GPU; the local launcher
runs jobs concurrently and survives a job that dies without a result."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import threading
import time
from pathlib import Path

import pytest

from pipeline.job.gpu_pool import core_group, gpu_slot
from pipeline.job.progress import sweep_status
from pipeline.jobdir import RESULT, SWEEP_FILE
from pipeline.status import FINISHED, SKIPPED
from pipeline.sweep_context import SweepContext
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


def test_jobs_waiting_for_a_gpu_take_it_in_their_sweeps_order_and_a_dead_waiters_turn_is_skipped(
    tmp_path: Path,
):
    """On an H200 a 42-model suite's jobs, all started at once (hydra/launcher=local_gpus), took the GPU in
    whatever order they polled: cut 17 minutes in, it had run jobs 29-31, 35, 38 and 39 and not 6 or 9. Waiting jobs
    now take their turns (the sweep's start, then the job's number), whichever asks first; the ticket of a
    job that died waiting (its file left, unlocked) holds no one up."""
    order: list[str] = []
    queue = tmp_path / "queue"
    queue.mkdir()
    (queue / "0000000001.000000-000000.999999.1.ticket").write_text("")  # a dead job's turn, before all

    everyone_asked = threading.Event()

    def job(turn: str) -> None:
        with gpu_slot([0], tmp_path, poll_s=0.02, on_wait=None, turn=turn):
            order.append(turn)
            everyone_asked.wait(timeout=30)

    first = threading.Thread(target=job, args=("0000000005.000000-000000",))
    first.start()
    while not order:  # job 0 holds the GPU
        time.sleep(0.01)
    waiting = [threading.Thread(target=job, args=(f"0000000005.000000-{n:06d}",)) for n in (4, 3, 1, 2)]
    for t in waiting:  # they ask in the order 4, 3, 1, 2
        t.start()
        time.sleep(0.05)
    everyone_asked.set()
    for t in [first, *waiting]:
        t.join(timeout=30)
    assert [turn[-1] for turn in order] == ["0", "1", "2", "3", "4"], order
    assert not list(queue.glob("*.ticket"))  # every ticket cleared


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
    assert sorted(p.name for p in (tmp_path / "locks").iterdir()) == ["gpu0.lock", "gpu1.lock", "queue"]
    assert not list((tmp_path / "locks" / "queue").iterdir())  # every job's turn in the queue cleared
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


def test_the_sweeps_eta_is_its_own_pace_when_jobs_run_at_once_and_wait_for_a_gpu(tmp_path: Path):
    """hydra/launcher=local_gpus starts every job at once: on an H200 a 42-model suite with overlap had 26
    jobs done after 17 minutes, each job's wall time up to 973 s as it counted its wait for a GPU slot, and
    its line said ETA 2h16m for the 16 left (about 10 minutes at its pace). The ETA is the sweep's own
    pace since it started: 100 s for 2 jobs, 8 to go, is 400 s, whatever the jobs' wall times say; and it
    stays so until another job ends (a line per second, as the pace to the moment gave, flooded CI's log)."""
    sweep = SweepContext(
        sweep_id="s", parent_run_id="p", sweep_dir=str(tmp_path), tracking_uri="", experiment="e"
    )
    sweep.started_at = time.time() - 100
    sweep.save()
    earlier = tmp_path / "0" / RESULT  # a resumed sweep's job from its earlier session: done, not paced
    for job, status in (("0", SKIPPED), ("1", FINISHED), ("2", FINISHED)):
        (tmp_path / job).mkdir()
        result = {"status": status, "metrics": {"job/wall_s": 900.0}}
        (tmp_path / job / RESULT).write_text(json.dumps(result))
    os.utime(earlier, (sweep.started_at - 50, sweep.started_at - 50))
    line = sweep_status(tmp_path, 11)
    assert line.startswith("sweep: 3/11 jobs done, 0 failed, ETA 6m4"), line  # 400 s and the test's own
    time.sleep(1.1)  # the line is printed whenever it changes: it holds until the next job ends
    assert sweep_status(tmp_path, 11) == line
    # the job's file written again once MLflow has its run (seen on an H100: the line printed twice a job):
    # the pace takes the worker's own end where the result gives it
    ended = (tmp_path / "2" / RESULT).stat().st_mtime
    result = {"status": FINISHED, "metrics": {"job/wall_s": 900.0}, "info": {"worker_ended_at": ended}}
    (tmp_path / "2" / RESULT).write_text(json.dumps(result))
    os.utime(tmp_path / "2" / RESULT, (ended + 3, ended + 3))
    assert sweep_status(tmp_path, 11) == line
    (tmp_path / SWEEP_FILE).unlink()  # no sweep.json: the mean of the jobs' wall times
    assert sweep_status(tmp_path, 11) == "sweep: 3/11 jobs done, 0 failed, ETA 2h00m"


@pytest.mark.parametrize("per_gpu", [2, 3])
def test_overlap_puts_n_jobs_on_a_gpu_each_on_its_own_cores_and_one_more_waits(tmp_path: Path, per_gpu: int):
    """benchmark.overlap: a GPU takes `benchmark.overlap_jobs` jobs (the others compile while one measures),
    each with its own slot, its own share of the CPU cores and the GPU's one measure lock; one more job
    waits for a slot."""
    held: list[dict[str, str]] = []
    waits: list[str] = []
    spans: list[tuple[str, float, float]] = []

    def job() -> None:
        with gpu_slot([0], tmp_path, poll_s=0.05, on_wait=waits.append, per_gpu=per_gpu) as env:
            start = time.monotonic()
            held.append(env)
            # held until the job beyond the slots has waited (at most 10 s), however slowly a loaded host
            # starts the threads: the first `per_gpu` hold their slots at once
            deadline = start + 10
            while not waits and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.1)
            spans.append((env["PIPELINE_GPU_SLOT"], start, time.monotonic()))

    threads = [threading.Thread(target=job) for _ in range(per_gpu + 1)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    assert {env["CUDA_VISIBLE_DEVICES"] for env in held} == {"0"}
    assert {env["PIPELINE_MEASURE_LOCK"] for env in held} == {str(tmp_path / "gpu0.measure.lock")}
    first = held[:per_gpu]
    assert {env["PIPELINE_GPU_SLOT"] for env in first} == {str(i) for i in range(per_gpu)}
    cores = [set(map(int, env["PIPELINE_CPUS"].split(","))) for env in first]
    assert {env["PIPELINE_GPU_CPUS"] for env in held} == {",".join(map(str, sorted(set.union(*cores))))}
    if len(os.sched_getaffinity(0)) >= per_gpu:
        for a, b in itertools.combinations(cores, 2):
            assert not a & b  # a compiling job's compiler never runs on the measuring job's cores
    assert waits and "all taken" in waits[0]  # the last job waited for a slot
    for (a, s1, e1), (b, s2, e2) in itertools.combinations(spans, 2):
        assert a != b or e1 <= s2 or e2 <= s1  # one slot is never held by two jobs at once


@pytest.mark.parametrize(("cores", "groups"), [(16, 3), (16, 6), (15, 3), (7, 2), (2, 3)])
def test_the_slots_share_every_core_out_in_near_equal_parts(cores: int, groups: int):
    """benchmark.overlap's slots (of every GPU) take contiguous shares of the cores, sizes apart by one
    at most, and leave none idle: 16 cores to 3 slots are 6, 5 and 5, not 5 each and one spare; with
    fewer cores than slots, one each, round-robin."""
    shares = [core_group(list(range(cores)), g, groups) for g in range(groups)]
    assert sorted(c for share in shares for c in share) == (
        list(range(cores)) if cores >= groups else sorted(g % cores for g in range(groups))
    )
    assert max(map(len, shares)) - min(map(len, shares)) <= 1
    assert all(share == list(range(share[0], share[-1] + 1)) for share in shares)


@pytest.mark.whole_host
def test_the_measure_gate_lets_one_process_measure_at_a_time(tmp_path: Path):
    """Two processes ask for the measure lock at once: the second holds it only after the first let go,
    and waits for it from the moment it asked. Each holds it 1.5 s, more than the two processes' start
    times differ, so the second asks while the first holds it."""
    import multiprocessing

    lock = tmp_path / "gpu0.measure.lock"
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        records = pool.starmap(_hold_the_gate, [(str(lock), 1.5)] * 2)
    (a,), (b,) = records
    first, second = sorted((a, b), key=lambda s: s["held_from"])
    assert first["held_to"] <= second["held_from"]
    asked = second["held_from"] - second["waited_s"]
    assert asked < first["held_to"] - 0.2, (first, second)  # it asked while the other held the lock
    assert second["waited_s"] >= first["held_to"] - asked - 0.01, (first, second)  # and waited till then


def test_the_holder_runs_on_every_slots_cores_while_it_holds_the_lock_and_on_its_own_after(tmp_path: Path):
    """A worker pinned to its slot's core holds the lock: all its threads (one started before the hold
    too) run on the GPU's cores (PIPELINE_GPU_CPUS) meanwhile, and on its slot's again once it let go."""
    import multiprocessing

    cores = sorted(os.sched_getaffinity(0))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        own, held, recorded, after = pool.apply(
            _affinity_around_a_hold, (str(tmp_path / "gpu0.measure.lock"), cores)
        )
    assert own == after == cores[:1] and held == recorded == cores


def _affinity_around_a_hold(path: str, gpu_cores: list[int]) -> tuple[list[int], ...]:
    import threading

    from pipeline.measure.gate import GPU_CPUS_ENV, MeasureGate

    os.sched_setaffinity(0, gpu_cores[:1])  # the slot's own core, as pin_to_cpus leaves a worker
    own = sorted(os.sched_getaffinity(0))
    os.environ[GPU_CPUS_ENV] = ",".join(map(str, gpu_cores))
    seen: dict[str, list[int]] = {}
    asked, done = threading.Event(), threading.Event()

    def other_thread() -> None:  # started before the hold: its cores are read while the lock is held
        asked.wait()
        seen["held"] = sorted(os.sched_getaffinity(0))
        done.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    gate = MeasureGate(Path(path))
    with gate.hold("measure"):
        asked.set()
        done.wait()
    thread.join()
    return own, seen["held"], gate.spans[0]["cpus"], sorted(os.sched_getaffinity(0))


def _hold_the_gate(path: str, hold_s: float) -> list[dict]:
    from pipeline.measure.gate import MeasureGate

    gate = MeasureGate(Path(path))
    with gate.hold("measure"):
        time.sleep(hold_s)
    return gate.spans


# A pretend worker of slot 1, in its own session as a real one is: registers beside the lock (the
# environment names it), starts a child (as inductor starts its compile workers), says its pid, then
# counts until killed.
PRETEND_WORKER = """
import subprocess, sys, time
from pipeline.measure.gate import register_worker
register_worker()
child = subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(0.01)"])
print(child.pid, flush=True)
while True:
    time.sleep(0.01)
"""


def process_state(pid: int) -> str:
    """R, S, T (stopped), ... from /proc/<pid>/stat."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def wait_for_state(pid: int, stopped: bool, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (process_state(pid) == "T") == stopped:
            return True
        time.sleep(0.01)
    return False


@pytest.fixture
def pretend_worker(tmp_path: Path):
    """A registered worker of slot 1 and its child, killed after the test."""
    import signal
    import subprocess
    import sys

    lock = tmp_path / "gpu0.measure.lock"
    proc = subprocess.Popen(
        [sys.executable, "-c", PRETEND_WORKER],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PIPELINE_MEASURE_LOCK": str(lock), "PIPELINE_GPU_SLOT": "1"},
    )
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    yield lock, proc.pid, child
    for pid in (child, proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
    proc.wait()


def test_a_job_holding_the_gpu_pauses_the_other_worker_and_its_children_until_it_lets_go(pretend_worker):
    """benchmark.overlap: while one worker holds the measure lock, the GPU's other worker and its compile
    processes are stopped (they compiled beside the measured steps and spread them 4-97% on an H200), and
    they go on when it lets go; the hold records whom it paused."""
    from pipeline.measure.gate import MeasureGate

    lock, worker, child = pretend_worker
    gate = MeasureGate(lock)
    with gate.hold("measure"):
        assert wait_for_state(worker, stopped=True) and wait_for_state(child, stopped=True)
    assert wait_for_state(worker, stopped=False) and wait_for_state(child, stopped=False)
    (span,) = gate.spans
    assert span["paused"] == [worker]  # its process group: the child stopped with it


def test_a_registration_left_by_an_ended_worker_pauses_nothing(tmp_path: Path):
    """A worker's file outlives it; its pid may be a new process's: the start time tells them apart."""
    import subprocess

    from pipeline.measure.gate import MeasureGate

    lock = tmp_path / "gpu0.measure.lock"
    other = subprocess.Popen(["sleep", "30"])  # a living process that took an ended worker's pid
    try:
        (tmp_path / "gpu0.measure.lock.slot1.worker").write_text(f"{other.pid} 1\n")
        gate = MeasureGate(lock)
        with gate.hold("measure"):
            assert gate.paused == [] and process_state(other.pid) != "T"
    finally:
        other.kill()
        other.wait()


def test_the_parent_resumes_workers_a_dead_holder_left_paused(pretend_worker, tmp_path: Path):
    """A holder killed while it held the lock cannot let the other worker go on; its job's parent does
    (pipeline/job/parent.py calls resume_all once its worker has ended, however it ended)."""
    import signal
    import subprocess
    import sys

    from pipeline.measure.gate import resume_all

    lock, worker, child = pretend_worker
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from pipeline.measure.gate import MeasureGate\n"
            "MeasureGate(Path(sys.argv[1])).acquire('measure'); print('held', flush=True); time.sleep(60)",
            str(lock),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    assert wait_for_state(worker, stopped=True) and wait_for_state(child, stopped=True)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    time.sleep(0.2)
    assert process_state(worker) == "T"  # nobody else would let it go on
    resume_all(lock)
    assert wait_for_state(worker, stopped=False) and wait_for_state(child, stopped=False)


@pytest.mark.slow
def test_overlapping_jobs_never_measure_at_once(tmp_path: Path, store: str):
    """`benchmark.overlap=true hydra/launcher=local_gpus` on the CPU (a pretend GPU 0): three compiled jobs
    start at once, two hold the GPU's slots, and every job's measured work (the eager probe, warm-up after
    its compilation, timed rounds, diagnostics) runs under the GPU's measure lock: no two jobs' held spans
    overlap, while the jobs themselves ran at once."""
    args = [
        *TINY,
        "compile.backend=aot_eager",
        "device=cpu",
        "gpu_pool=[0]",
        "trainer.steps=12",
        "trainer.warmup_steps=2",
        "hydra/launcher=local_gpus",
        "benchmark.overlap=true",
        "trainer.seed=0,1,2",
    ]
    proc = run_cli(
        args, tmp_path, store, multirun=True, env={"PIPELINE_GPU_LOCK_DIR": str(tmp_path / "locks")}
    )
    assert proc.returncode == 0, output(proc)
    results = [json.loads(p.read_text()) for p in (tmp_path / "multirun").glob("*/result.json")]
    assert len(results) == 3 and all(r["status"] == "FINISHED" for r in results)
    held = [
        (r["info"]["worker_pid"], s["held_from"], s["held_to"])
        for r in results
        for s in r["info"]["measure_gate"]["spans"]
    ]
    assert len(held) >= 6  # each job: its eager probe, then everything after its compilation
    for (a, s1, e1), (b, s2, e2) in itertools.combinations(held, 2):
        assert a == b or e1 <= s2 or e2 <= s1, "two jobs measured at once"
    lives = [(r["info"]["worker_started_at"], r["info"]["worker_ended_at"]) for r in results]
    assert any(
        s1 < e2 and s2 < e1 for (s1, e1), (s2, e2) in itertools.combinations(lives, 2)
    )  # they ran at once
    assert all(len(r["info"]["overlap"]["cpus"]) >= 1 for r in results)
    # while it held the lock, a worker ran on every slot's cores (the paused workers' too), then on its own
    every_slot = sorted({c for r in results for c in r["info"]["overlap"]["cpus"]})
    assert all(s["cpus"] == every_slot for r in results for s in r["info"]["measure_gate"]["spans"]), (
        every_slot
    )
    # the third job waited for a slot: that wait is said apart, and is not in its wall time
    (waiter,) = [r for r in results if r["metrics"].get("job/gpu_wait_s", 0) > 1]
    wall, worker = waiter["metrics"]["job/wall_s"], waiter["metrics"]["job/worker_wall_s"]
    assert wall - worker < waiter["metrics"]["job/gpu_wait_s"], waiter["metrics"]
    assert all(
        "Overlap (benchmark.overlap)" in r["method"] for r in results
    )  # the run says how it was measured
    # while one job measured, another's worker was alive (compiling, or waiting for the lock)
    alive = {
        r["info"]["worker_pid"]: (r["info"]["worker_started_at"], r["info"]["worker_ended_at"])
        for r in results
    }
    assert any(
        pid != other and alive[other][0] < end and start < alive[other][1]
        for pid, start, end in held
        for other in alive
    )
    # a job that held the GPU paused the other job's worker then (never itself, never a third job's)
    pauses = [
        (r["info"]["worker_pid"], s["paused"]) for r in results for s in r["info"]["measure_gate"]["spans"]
    ]
    assert any(paused for _, paused in pauses), pauses
    for holder, paused in pauses:  # the other job's worker first, then its descendants, if any
        assert holder not in paused and (not paused or paused[0] in set(alive) - {holder}), pauses
    # a worker registers at its start, before any device work: every hold paused each other worker that
    # was alive from (a margin for its start) before the hold to its end
    for r in results:
        for s in r["info"]["measure_gate"]["spans"]:
            for other, (started, ended) in alive.items():
                if other != r["info"]["worker_pid"] and started + 3 < s["held_from"] and s["held_to"] < ended:
                    assert other in s["paused"], (r["info"]["worker_pid"], s, other, started, ended)


def test_overlap_is_refused_where_it_could_do_nothing_or_cannot_run(tmp_path: Path, store: str):
    """benchmark.overlap=true with Hydra's basic launcher (jobs one at a time) is refused in one line
    before anything runs, as is a distributed job with overlap (two one-GPU jobs share a GPU)."""
    from pipeline.config.errors import ConfigError
    from pipeline.job.preflight import validate
    from tests.conftest import compose, one_line_errors

    proc = run_cli(
        [*TINY, "compile.mode=eager", "benchmark.overlap=true", "trainer.seed=0,1"],
        tmp_path,
        store,
        multirun=True,
    )
    assert proc.returncode == 2, output(proc)
    (line,) = one_line_errors(proc, "config error:")
    assert "benchmark.overlap=true" in line and "hydra/launcher=local_gpus" in line
    assert not [r for r in runs(store) if r.data.tags.get("sweep_parent") != "true"]  # no job ran
    with pytest.raises(ConfigError, match=r"benchmark\.overlap"):
        validate(compose([*TINY, "device=cpu", "parallel=ddp", "benchmark.overlap=true"]))
