"""Sweep-level faults of issue 28, through the real CLI and store: two sweeps whose ids differ only in
characters a view id cannot hold, a reused folder holding a result MLflow lacks, `--sync` against a
store that lost its runs, a double Ctrl-C and the incomplete sweep it leaves."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pipeline.job.result import JobResult, UnreadableResult
from pipeline.jobdir import RESULT
from pipeline.sweep.finish import close_orphans
from pipeline.sweep.sync import unsynced
from pipeline.sweep.view import VIEW_TAG_PREFIX, view_id_for
from pipeline.tracking import Tracker
from pipeline.tracking.store import sqlite_path
from tests.conftest import (
    TINY,
    client,
    finish,
    lock_held,
    one_line_errors,
    output,
    popen_cli,
    run_cli,
    run_report,
    runs,
    stop_group,
)
from tests.test_faults import FAULTY

EAGER = [*TINY, "compile.mode=eager"]


def slow_while(marker: Path) -> list[str]:
    """A linear model on 32 px images (tests/fault_models.py) whose calls wait while `marker` exists,
    4 steps, eager: a job as long as the test wants, its config the same when resumed."""
    return [*FAULTY, "model._target_=tests.fault_models.slow_while", f"+model.kwargs.marker='{marker}'"]


def test_view_ids_are_one_per_sweep_id():
    ids = ["hx.1", "hx_1", "hx-1", "hx__1", "hx_2e_1", "hx/1", "hx 1", "hx1", "hé", "h_e9_", "o'brien"]
    views = [view_id_for(i) for i in ids]
    assert len(set(views)) == len(ids), dict(zip(ids, views, strict=True))
    assert all(v.removeprefix("sweep-").replace("_", "").replace("-", "").isalnum() for v in views)
    assert view_id_for("20261125-070033-ab12") == "sweep-20261125-070033-ab12"  # generated ids unchanged


@pytest.mark.slow
def test_two_sweeps_whose_ids_differ_in_punctuation_keep_their_own_views(tmp_path: Path, store: str):
    """`sweep.id=hx.1` and `sweep.id=hx_1` once mapped to one saved view: the first sweep's link
    showed the second's runs. Each now has its own, filtering its own runs."""
    links = {}
    for sweep_id in ("hx.1", "hx_1"):
        proc = run_cli(
            [*EAGER, "trainer.seed=0", f"sweep.id={sweep_id}"], tmp_path / sweep_id, store, multirun=True
        )
        assert proc.returncode == 0, output(proc)
        links[sweep_id] = [ln for ln in proc.stdout.splitlines() if ln.startswith("browse: ")][-1]
    assert links["hx.1"] != links["hx_1"]
    experiment_id = runs(store)[0].info.experiment_id
    tags = client(store).get_experiment(experiment_id).tags
    for sweep_id, link in links.items():
        view = view_id_for(sweep_id)
        assert f"viewStateShareKey={view}&" in link, link
        state = json.loads(json.loads(tags[VIEW_TAG_PREFIX + view])["state"])
        assert state["searchFilter"] == f"tags.sweep_id = '{sweep_id}'"


@pytest.mark.slow
def test_a_reused_folder_never_overwrites_a_result_mlflow_lacks(tmp_path: Path, store: str, full_dir: Path):
    """A job whose upload failed keeps its result for `--sync`: a later sweep (or run) in that folder
    is refused in one line and leaves it as it was; once `--sync` uploaded it, the folder is free."""
    full = [*EAGER, "trainer.seed=0", f"mlflow.artifact_location=file://{full_dir}"]
    first = run_cli(full, tmp_path, store, multirun=True)
    assert first.returncode == 1, output(first)
    kept = tmp_path / "multirun" / "0" / "result.json"
    before = kept.read_bytes()
    assert json.loads(before)["mlflow_synced"] is False
    count = len(runs(store))
    again = run_cli([*EAGER, "trainer.seed=1,2"], tmp_path, store, multirun=True)
    assert again.returncode == 2, output(again)
    (line,) = one_line_errors(again, "config error:")
    assert line.startswith(
        f"config error: hydra.sweep.dir='{tmp_path / 'multirun'}' holds job results MLflow never got ({kept})"
    )
    assert f"--sync {tmp_path / 'multirun'}" in line, line
    # The same file where a single run would write: refused too, before Hydra makes the folder's files.
    (tmp_path / "single" / "run").mkdir(parents=True)
    (tmp_path / "single" / "run" / "result.json").write_bytes(before)
    single = run_cli([*EAGER], tmp_path / "single", store)
    assert single.returncode == 2, output(single)
    (line,) = one_line_errors(single, "config error:")
    assert line.startswith("config error: hydra.run.dir=") and "MLflow never got" in line, line
    assert not (tmp_path / "single" / "run" / ".hydra").exists()
    assert kept.read_bytes() == before and len(runs(store)) == count  # nothing overwritten, nothing ran

    (full_dir / "filler").unlink()  # room again: --sync uploads it into the job's own run
    sync = run_report("--tracking-uri", store, "--sync", str(tmp_path / "multirun"))
    assert sync.returncode == 0, sync.stdout + sync.stderr
    assert json.loads(kept.read_text())["mlflow_synced"] is True
    reuse = run_cli([*EAGER, "trainer.seed=1"], tmp_path, store, multirun=True)
    assert reuse.returncode == 0, output(reuse)


@pytest.mark.slow
def test_sync_against_a_store_that_lost_the_runs_says_so_and_fails(tmp_path: Path, store: str):
    """The store file was lost (deleted; the next use sets up an empty one): `--sync` must not claim
    every result is in MLflow. It names a result and its run the store lacks, and exits 1."""
    proc = run_cli([*EAGER], tmp_path, store)
    assert proc.returncode == 0, output(proc)
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    Path(store.removeprefix("sqlite:///")).unlink()
    sync = run_report("--tracking-uri", store, "--sync", str(tmp_path / "run"))
    assert sync.returncode == 1, sync.stdout + sync.stderr
    assert "nothing to sync" not in sync.stdout
    (line,) = [ln for ln in sync.stdout.splitlines() if ln.startswith("sync error: ")]
    assert f"{tmp_path / 'run' / 'result.json'} say MLflow has them (run {result['mlflow_run_id']})" in line
    assert "holds no such run" in line, line


@pytest.mark.slow
def test_double_ctrl_c_leaves_nothing_running_and_an_incomplete_sweep_is_never_finished(
    tmp_path: Path, store: str
):
    """Two Ctrl-C 0.25 s apart in a sweep's first job: no traceback, exit 130, nothing RUNNING. The
    sweep planned 3 jobs and 2 never ran: `--sync` closes it, never FINISHED, and exits 1; with its
    store file lost it writes no summary and says so; resumed (the store back), it ends FINISHED."""
    marker = tmp_path / "job 0 waits while this exists"
    marker.touch()
    args = [*slow_while(marker), "trainer.seed=0,1,2", "sweep.id=dbl"]
    proc = popen_cli(args, tmp_path / "a", store, multirun=True, stderr=subprocess.STDOUT)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("job 0 "):  # its run is open, its worker started
                break
        time.sleep(2)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.25)
        os.killpg(proc.pid, signal.SIGINT)
        done = finish(proc, timeout=120)
    finally:
        stop_group(proc)
    assert done.returncode == 130, done.stdout
    assert "Traceback" not in done.stdout, done.stdout
    assert "RUNNING" not in {r.info.status for r in runs(store)}
    parent, kids = split_sweep(store)
    assert parent.info.status == "KILLED" and [k.info.status for k in kids] == ["KILLED"]

    sweep_dir = tmp_path / "a" / "multirun"
    sync = run_report("--tracking-uri", store, "--sync", str(sweep_dir))
    assert sync.returncode == 1, sync.stdout + sync.stderr
    assert "is incomplete: 2 of the 3 planned jobs left no run in MLflow (jobs 1, 2" in sync.stdout
    parent, _ = split_sweep(store)
    assert parent.info.status == "KILLED" and parent.data.tags["jobs_missing"] == "1, 2"
    summary = (sweep_dir / "summary.md").read_bytes()
    assert b"incomplete: 2 of the 3 planned jobs" in summary

    db = Path(store.removeprefix("sqlite:///"))
    db.rename(db.with_name("kept.db"))  # the store file lost: --sync meets an empty store
    lost = run_report("--tracking-uri", store, "--sync", str(sweep_dir))
    assert lost.returncode == 1 and "nothing to sync" not in lost.stdout, lost.stdout + lost.stderr
    assert "sync error: " in lost.stdout and f"could not finish sweep dbl ({sweep_dir})" in lost.stdout
    assert (sweep_dir / "summary.md").read_bytes() == summary  # not overwritten by an empty summary
    db.unlink()
    db.with_name("kept.db").rename(db)  # the store back

    marker.unlink()  # resumed with its own command, its jobs now run at once
    resumed = run_cli([*args, "sweep.resume=true"], tmp_path / "b", store, multirun=True)
    assert resumed.returncode == 0 and "sweep error" not in resumed.stderr, output(resumed)
    parent, kids = split_sweep(store)
    assert parent.info.status == "FINISHED" and "jobs_missing" not in parent.data.tags
    assert sorted(k.info.status for k in kids) == ["FINISHED", "FINISHED", "FINISHED", "KILLED"]
    again = run_report("--tracking-uri", store, "--sync", str(sweep_dir))
    assert again.returncode == 0 and "resumed later in" in again.stdout, again.stdout + again.stderr
    assert split_sweep(store)[0].info.status == "FINISHED"


def split_sweep(store: str) -> tuple[object, list]:
    all_runs = runs(store)
    (parent,) = [r for r in all_runs if r.data.tags.get("sweep_parent") == "true"]
    return parent, [r for r in all_runs if r.data.tags.get("sweep_parent") != "true"]


@pytest.mark.slow
def test_a_second_sweep_in_a_busy_folder_is_refused_saying_why(tmp_path: Path, store: str):
    """Two sweeps started in the same second share the default folder (`.../<date>/<time>`): the
    second is refused in one line that says so and what to do; the first runs on."""
    first = popen_cli([*EAGER, "trainer.steps=100000", "trainer.seed=0,1"], tmp_path, store, multirun=True)
    try:
        assert first.stdout is not None
        for line in first.stdout:
            if line.startswith("job 0 "):
                break
        second = run_cli([*EAGER, "trainer.seed=2"], tmp_path, store, multirun=True)
        assert second.returncode == 1, output(second)
        (line,) = one_line_errors(second, "sweep error:")
        assert f"pid {first.pid}" in line and "two sweeps started in the same second" in line, line
        assert "set hydra.sweep.dir to another folder" in line, line
        assert first.poll() is None
    finally:
        os.killpg(first.pid, signal.SIGINT)
        try:
            first.communicate(timeout=120)
        finally:
            stop_group(first)
    assert len([r for r in runs(store) if r.data.tags.get("sweep_parent") == "true"]) == 1


@pytest.mark.slow
def test_a_folder_whose_sweep_never_ended_is_refused_until_sync_closes_it(tmp_path: Path, store: str):
    """The driver killed outright mid-sweep (kill -9): its parent stays RUNNING. Another sweep in that
    folder would overwrite what `--sync` needs to close it: refused in one line; once `--sync` closed
    it (incomplete: never FINISHED), the folder can be used."""
    killed = popen_cli([*EAGER, "trainer.steps=100000", "trainer.seed=0,1"], tmp_path, store, multirun=True)
    try:
        assert killed.stdout is not None
        for line in killed.stdout:
            if line.startswith("job 0 "):
                break
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait()
    finally:
        stop_group(killed)
    parent, _ = split_sweep(store)
    assert parent.info.status == "RUNNING"
    again = run_cli([*EAGER, "trainer.seed=2"], tmp_path, store, multirun=True)
    assert again.returncode == 2, output(again)
    (line,) = one_line_errors(again, "config error:")
    sweep_id = parent.data.tags["sweep_id"]
    assert f"holds sweep {sweep_id}, whose parent run is still RUNNING" in line and "--sync" in line, line
    sync = run_report("--tracking-uri", store, "--sync", str(tmp_path / "multirun"))
    assert sync.returncode == 1 and "is incomplete" in sync.stdout, sync.stdout + sync.stderr
    parent, kids = split_sweep(store)
    assert parent.info.status == "FAILED" and [k.info.status for k in kids] == ["KILLED"]
    reuse = run_cli([*EAGER, "trainer.seed=2"], tmp_path, store, multirun=True)
    assert reuse.returncode == 0, output(reuse)


@pytest.mark.slow  # MLflow waits 20 s (its sqlite busy_timeout) for each write the lock refuses: two
def test_a_lock_taken_while_a_job_runs_never_closes_its_kept_result_as_lost(tmp_path: Path, store: str):
    """Issue 41: another process took the store's lock while a job trained; the job kept its result
    (MLflow refused it), but the sweep's end closed its run KILLED `JobLost` and published a summary and
    parent tags that `--sync` never corrected. Now the sweep's end follows `--sync`'s rule (a result on
    disk is not lost), says that `--sync` uploads it and closes the sweep, and `--sync` does both."""
    db = sqlite_path(store)
    proc = popen_cli(
        [*EAGER, "trainer.steps=30", "trainer.seed=0"],
        tmp_path,
        store,
        multirun=True,
        stderr=subprocess.STDOUT,
    )
    lines: list[str] = []
    try:
        with contextlib.ExitStack() as stack:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("job 0 "):  # its run is open, its worker trains: the lock is taken now
                    holder = stack.enter_context(lock_held(db))
                    assert not (tmp_path / "multirun" / "0" / "result.json").exists(), (
                        "trained before the lock"
                    )
                if line.startswith("mlflow error: could not log run"):  # MLflow refused the result
                    break
            else:
                raise AssertionError("".join(lines))
            assert holder.stdin is not None
            holder.stdin.close()  # the lock is let go before the sweep's end
        out, _ = proc.communicate(timeout=600)
    finally:
        stop_group(proc)
    text = "".join(lines) + out
    assert proc.returncode == 1, text
    assert "Traceback" not in text
    sweep_dir = tmp_path / "multirun"
    (line,) = [ln for ln in text.splitlines() if ln.startswith("sweep error:")]
    assert "is not finished: 1 job result(s) are kept on disk but not in MLflow" in line, line
    assert f"python -m pipeline.report --sync {sweep_dir}" in line, line
    parent, (job,) = split_sweep(store)
    assert job.info.status == "FAILED" and job.data.tags["error_type"] == "ResultNotLogged", job.data.tags
    assert "JobLost" not in text
    assert parent.info.status == "FAILED" and parent.data.tags["error_type"] == "ResultsNotInMlflow"
    assert "provisional:" in (sweep_dir / "summary.md").read_text()

    sync = run_report("--tracking-uri", store, "--sync", str(sweep_dir))
    assert sync.returncode == 0, sync.stdout + sync.stderr
    parent, (job,) = split_sweep(store)
    assert job.info.status == "FINISHED" and "error_type" not in job.data.tags
    assert parent.info.status == "FINISHED" and "error_type" not in parent.data.tags
    assert parent.data.tags["jobs_failed"] == "0" and "results_pending" not in parent.data.tags
    summary = (sweep_dir / "summary.md").read_text()
    assert "provisional:" not in summary and "failed: 0" in summary, summary


def test_a_sweeps_end_closes_a_job_run_left_running_by_the_rule_sync_follows(tmp_path: Path, store: str):
    """The one rule for a run a job left RUNNING (`sync.close_ended_job_run`), at a sweep's end as in
    `--sync`: a result on disk is not lost (FAILED `ResultNotLogged`, naming the `--sync` that uploads it);
    no result is KILLED `JobLost`."""
    tracker = Tracker(store, "compile-sweeps")
    kept, lost = tmp_path / "sweep" / "0", tmp_path / "sweep" / "1"
    for job_dir in (kept, lost):
        job_dir.mkdir(parents=True)
        tracker.start_run(job_dir.name, {"sweep_id": "s", "job_dir": str(job_dir)})
    JobResult(status="FINISHED").write(kept / "result.json")
    close_orphans(tracker, "s")
    runs_by_dir = {r.tags["job_dir"]: r for r in tracker.sweep_children("s")}
    closed = runs_by_dir[str(kept)]
    assert (closed.status, closed.tags["error_type"]) == ("FAILED", "ResultNotLogged"), closed.tags
    assert f"python -m pipeline.report --sync {kept}" in closed.tags["error_message"]
    gone = runs_by_dir[str(lost)]
    assert (gone.status, gone.tags["error_type"]) == ("KILLED", "JobLost")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{}", "an object without a `status`"),
        ("[]", "JSON array, not a job's result"),
        ("null", "JSON null, not a job's result"),
        ('{"status": "FINISHED", "metrics": {"step/p50', "not JSON, cut off or damaged"),
        ("", "empty"),
        ('{"status": "FINISHED", "metrics": [1]}', "its `metrics` is JSON array, not an object"),
    ],
)
def test_a_result_file_that_is_not_a_jobs_result_says_what_is_wrong(tmp_path: Path, text: str, why: str):
    path = tmp_path / "result.json"
    path.write_text(text)
    with pytest.raises(UnreadableResult) as unreadable:
        JobResult.read(path)
    assert str(unreadable.value).startswith(why), unreadable.value


def test_sync_walks_job_folders_never_mlflows_copies_of_their_files(tmp_path: Path):
    """`report --sync` with no folder walks outputs/, where `make mlflow-server` keeps its artifact store:
    each run's copy of its job's result.json (`mlartifacts/<run id>/artifacts/`) is no job folder (the
    README's `--sync` exited 1 naming each copy as a job without its config)."""
    copy = tmp_path / "mlartifacts" / ("0123456789abcdef" * 2) / "artifacts"
    job = tmp_path / "runs" / "2026-11-27" / "10-00-00"
    for folder in (copy, job):
        folder.mkdir(parents=True)
        (folder / RESULT).write_text(json.dumps({"status": "FINISHED"}))
    found, problems = unsynced([tmp_path])
    assert found == [] and [path for path, _ in problems] == [job / RESULT], problems


@pytest.mark.slow  # the default suite's 5 minutes (CI runs it: make test-all)
def test_unreadable_job_results_are_named_by_sync_and_report_results(tmp_path: Path, store: str):
    """Issue 41: a truncated result.json was skipped without a word by `--sync` ("every job result is in
    MLflow") and by `report --results`, and `{}`, `[]`, `null` gave tracebacks; `report --results`
    rewrote the sweep's summary.md without that job, under a new title and without its wall time. Now
    each is named (which job, what is wrong), the exit code is 1, and the sweep's own summary is kept."""
    proc = run_cli([*EAGER, "trainer.seed=0", "sweep.id=unreadable"], tmp_path, store, multirun=True)
    assert proc.returncode == 0, output(proc)
    sweep_dir = tmp_path / "multirun"
    own_summary = (sweep_dir / "summary.md").read_bytes()

    intact = run_report("--results", str(sweep_dir))
    assert intact.returncode == 0, intact.stdout + intact.stderr
    assert (sweep_dir / "summary.md").read_bytes() == own_summary  # the sweep's end's, kept
    written = (sweep_dir / "summary_from_results" / "summary.md").read_text()
    assert written.startswith("# Sweep unreadable\n") and "sweep wall time" in written, written

    good = sweep_dir / "0"
    damaged = {"1": "{}", "2": "[]", "3": "null", "4": (good / "result.json").read_text()[:200]}
    for name, text in damaged.items():
        shutil.copytree(good, sweep_dir / name)
        (sweep_dir / name / "result.json").write_text(text)
    shutil.copytree(good, sweep_dir / "5")
    (sweep_dir / "5" / "result.json").unlink()  # a job that never wrote one

    sync = run_report("--tracking-uri", store, "--sync", str(sweep_dir))
    assert sync.returncode == 1, sync.stdout + sync.stderr
    assert "Traceback" not in sync.stdout + sync.stderr and "every job result is in MLflow" not in sync.stdout
    named = [line for line in sync.stdout.splitlines() if line.startswith("sync error: ")]
    assert {line.split(":", 2)[1].strip() for line in named} == {
        str(sweep_dir / name / "result.json") for name in damaged
    }, named

    results = run_report("--results", str(sweep_dir))
    assert results.returncode == 1, results.stdout + results.stderr
    assert "Traceback" not in results.stdout + results.stderr
    errors = [line for line in results.stderr.splitlines() if line.startswith("results error: ")]
    for name in damaged:
        assert any(f"{sweep_dir / name / 'result.json'}: " in line for line in errors), errors
    assert any(f"{sweep_dir / '5'} holds no result.json" in line for line in errors), errors
    assert (sweep_dir / "summary.md").read_bytes() == own_summary


def test_sync_logs_a_result_mlflow_never_had_into_a_new_run_the_sweeps_end_counts(tmp_path: Path, store: str):
    """A sweep's job whose run the store lacks (deleted by hand: the parent is there, the job's run not):
    `--sync` makes it a run of the sweep, tagged with its job number, so the sweep's end counts it."""
    from pipeline.config.schema import to_config, to_dict
    from pipeline.jobdir import JobDir
    from pipeline.sweep.finish import missing_jobs
    from pipeline.sweep.sync import sync_one
    from pipeline.sweep_context import SweepContext
    from tests.conftest import compose

    tracker = Tracker(store, "compile-sweeps")
    parent = tracker.start_run("sweep", {"sweep_id": "gone", "sweep_parent": "true"})
    sweep_dir = tmp_path / "multirun"
    sweep_dir.mkdir()
    sweep = SweepContext(
        sweep_id="gone", parent_run_id=parent, sweep_dir=str(sweep_dir), tracking_uri=store,
        experiment="compile-sweeps", total_jobs=1, axes=["compile.mode"],
    )  # fmt: skip
    sweep.save()
    job = JobDir(sweep_dir / "0")
    job.path.mkdir()
    job.job_config.write_text(json.dumps(to_dict(to_config(compose(EAGER)))))
    JobResult("FINISHED", {"step/p50_ms": 2.0}, info={"job_num": 0}, mlflow_run_id="0" * 32).write(job.result)
    assert missing_jobs(tracker, sweep) == [0]
    run_id, done = sync_one(tracker, job.result)
    assert done.startswith("logged into a new run"), done
    tags = tracker.get_run(run_id).tags  # type: ignore[union-attr]
    assert (tags["sweep_id"], tags["job_num"], tags["synced_later"]) == ("gone", "0", "true"), tags
    assert tags["mlflow.parentRunId"] == parent and missing_jobs(tracker, sweep) == []
    assert JobResult.read(job.result).mlflow_synced


def test_sync_uploads_each_result_into_the_store_its_job_logged_to(
    tmp_path: Path,
    store: str,
    empty_store_file: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
):
    """`--sync` without `--tracking-uri`, run anywhere: each job's result goes to the store and experiment
    its own config names (a job logged with mlflow.tracking_uri=... prints a `--sync` command without
    it), never to the default store of the folder it is run from; a folder that does not say is named."""
    from pipeline.config.schema import to_config, to_dict
    from pipeline.jobdir import JobDir
    from pipeline.report import sync
    from pipeline.sweep.sync import Store, folders_by_store
    from tests.conftest import compose, store_copy

    stores = {"first": store, "second": store_copy(empty_store_file, tmp_path / "other")}
    for name, uri in stores.items():
        job = JobDir(tmp_path / "outputs" / name)
        job.path.mkdir(parents=True)
        config = compose([*EAGER, f"mlflow.tracking_uri={uri}", f"mlflow.experiment={name}"])
        job.job_config.write_text(json.dumps(to_dict(to_config(config))))
        JobResult("FINISHED", {"step/p50_ms": 2.0}).write(job.result)
    unsaid = JobDir(tmp_path / "outputs" / "unsaid")
    unsaid.path.mkdir()
    JobResult("FINISHED", {"step/p50_ms": 2.0}).write(unsaid.result)

    groups = folders_by_store([tmp_path / "outputs"])
    assert {named: folders.jobs for named, folders in groups.items()} == {
        Store(store, "first"): [tmp_path / "outputs" / "first"],
        Store(stores["second"], "second"): [tmp_path / "outputs" / "second"],
        None: [unsaid.path],
    }
    monkeypatch.chdir(tmp_path)  # its default store (outputs/mlflow.db here) is neither
    assert sync([tmp_path / "outputs"], None, None) == 1  # the folder that does not say
    out = capsys.readouterr().out
    assert f"sync error: {unsaid.result}: has no job_config.json beside it" in out, out
    assert not (tmp_path / "outputs" / "mlflow.db").exists()  # no store guessed for it
    for name, uri in stores.items():
        (run,) = Tracker(uri, name, read_only=True).runs("")
        assert (
            run.metrics["step/p50_ms"] == 2.0
            and JobResult.read(tmp_path / "outputs" / name / RESULT).mlflow_synced
        )
