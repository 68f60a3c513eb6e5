"""Sweeps as a result: parent run, summary files and plots, aggregates, resume, Ctrl-C."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.sweep.plots import peak_memory_plot
from pipeline.sweep.render import table
from pipeline.sweep.state import planned_jobs
from pipeline.sweep.summary import Row, summarize
from tests.conftest import (
    ROOT,
    TINY,
    client,
    compose,
    every_job_line,
    one_line_errors,
    output,
    popen_cli,
    run_cli,
    run_report,
    runs,
    stop_group,
    with_host_check,
)
from tests.mlflow_server import start_server

# The sweep stopped as by Ctrl-C once two of its jobs ended (a Hydra callback: tests/fault_callbacks.py);
# a resumption with the sweep's own command runs the rest.
INTERRUPT_AFTER_TWO_JOBS = [
    "+hydra.callbacks.interrupt._target_=tests.fault_callbacks.InterruptAfterJobs",
    "+hydra.callbacks.interrupt.jobs=2",
]


def split(store: str) -> tuple[object, list]:
    all_runs = runs(store)
    parents = [r for r in all_runs if r.data.tags.get("sweep_parent") == "true"]
    assert len(parents) == 1, [r.info.run_name for r in parents]
    return parents[0], [r for r in all_runs if r.data.tags.get("sweep_parent") != "true"]


def test_2x2_sweep_gives_one_parent_four_children_summary_and_plots(tmp_path: Path, store: str):
    noisy = "benchmark.noisy_spread_pct=1e-9"  # every job noisy: the warning is said once, at the end
    args = [*TINY, "compile.mode=eager,default", "compile.backend=aot_eager", "precision=amp,fp32", noisy]
    started = time.time()
    proc = run_cli(args, tmp_path, store, multirun=True)
    assert proc.returncode == 0, output(proc)
    parent, kids = split(store)
    assert len(kids) == 4 and parent.info.status == "FINISHED"
    assert {k.info.run_name for k in kids} == {
        "vit_tiny·amp·eager",
        "vit_tiny·fp32·eager",
        "vit_tiny·amp·default·aot_eager",
        "vit_tiny·fp32·default·aot_eager",
    }
    # Every job ran in a fresh worker process of its own.
    results = [json.loads(p.read_text()) for p in (tmp_path / "multirun").glob("*/result.json")]
    worker_pids = {r["info"]["worker_pid"] for r in results}
    assert len(worker_pids) == 4 and not worker_pids & {r["info"]["parent_pid"] for r in results}
    assert sorted(r["info"]["job_num"] for r in results) == [0, 1, 2, 3]  # what --sync tags a late run with
    # The sweep's wall time spans every job: from the parent's start to after the last child's end.
    last_child_end = max(k.info.end_time for k in kids) / 1000
    sweep_wall = parent.data.metrics["sweep/wall_s"]
    assert last_child_end - parent.info.start_time / 1000 <= sweep_wall < time.time() - started
    assert all(k.data.tags["mlflow.parentRunId"] == parent.info.run_id for k in kids)  # nested in the UI
    assert {k.data.tags["sweep_id"] for k in kids} == {parent.data.tags["sweep_id"]}

    sweep_dir = tmp_path / "multirun"
    rows = list(csv.DictReader((sweep_dir / "summary.csv").read_text().splitlines()))
    assert sorted(r["run_name"] for r in rows) == sorted(k.info.run_name for k in kids)
    md = (sweep_dir / "summary.md").read_text()
    assert "geometric-mean speedup" in md and "weighted speedup" in md and "verdict: " in md
    plots = {p.name for p in (sweep_dir / "plots").glob("*.png")}
    assert {"step_time.png", "compile_vs_speedup.png", "peak_memory.png"} <= plots  # CPU jobs: their RSS
    assert "speedup_heatmap.png" not in plots  # one compiled mode: a heatmap needs two real axes
    artifacts = {a.path for a in client(store).list_artifacts(parent.info.run_id)}
    assert {"summary.md", "summary.csv", "plots"} <= artifacts
    assert {a.path for a in client(store).list_artifacts(parent.info.run_id, "plots")} >= {
        f"plots/{p}" for p in plots
    }

    # The aggregates, recomputed here from the children's own metrics.
    compiled = [k for k in kids if k.data.tags["mode"] != "eager"]
    speedups = {k.data.tags["precision"]: k.data.metrics["speedup/vs_eager"] for k in compiled}
    assert all(k.data.metrics["parity/ok"] == 1.0 for k in compiled)
    geomean = math.sqrt(speedups["amp"] * speedups["fp32"])
    assert math.isclose(parent.data.metrics["sweep/geomean_speedup"], geomean, rel_tol=1e-9)
    assert math.isclose(
        parent.data.metrics["sweep/weighted_speedup"],
        0.75 * speedups["amp"] + 0.25 * speedups["fp32"],
        rel_tol=1e-9,
    )
    assert parent.data.metrics["sweep/pass_rate"] == 1.0
    # The verdict is machine-readable: `fastest` names the config and its run, anything else the set.
    tags = parent.data.tags
    assert tags["verdict"] in ("fastest", "tie", "inconclusive") and tags["verdict"] in md
    if tags["verdict"] == "fastest":
        best = min(kids, key=lambda k: k.data.metrics["step/p50_ms"])
        assert (tags["fastest_config"], tags["fastest_run_id"]) == (best.info.run_name, best.info.run_id)
    else:
        assert "fastest_config" not in tags and len(tags["tied_configs"].split(", ")) >= 2
    # The summary is printed as a table at the end.
    assert "geometric-mean speedup" in proc.stdout and "verdict: " in proc.stdout
    assert "every job: model=vit_tiny, loss=ce" in proc.stdout  # constant columns once, above the table
    table = proc.stdout[proc.stdout.index("every job: ") : proc.stdout.index("\nsummary: ")]
    assert max(len(line) for line in table.splitlines()) <= 120  # the terminal summary fits 120 columns
    # One line per job, noisy in brief; why and what to trust instead once, at the end.
    lines = proc.stdout.replace("\n  ", " ").splitlines()  # a job's line wrapped at the terminal's width
    job_lines = [ln for ln in lines if ": FINISHED: step " in ln]
    assert len(job_lines) == 4 and all(
        re.search(r", noisy \(p10-p90 spans \d+% of the median\)$", ln) for ln in job_lines
    )
    assert sum("flagged noisy" in ln for ln in lines) == 1
    assert not [
        ln for ln in lines if "compare configurations on paired speedups" in ln
    ]  # the long note: once, in the summary
    assert not [ln for ln in lines if ln.startswith("worker: ")]


@pytest.mark.slow
def test_a_sweep_saves_its_view_and_prints_its_link(tmp_path: Path, store: str):
    """The runs table ranked by step time with the sweep's columns, saved in the experiment at the start
    (its link printed before any job runs) and fitted at the end to what the runs logged (CPU: RSS)."""
    proc = run_cli([*TINY, "compile.mode=eager", "trainer.seed=0,1"], tmp_path, store, multirun=True)
    assert proc.returncode == 0, output(proc)
    parent, _ = split(store)
    sweep_id = parent.data.tags["sweep_id"]
    links = [ln.removeprefix("browse: ") for ln in proc.stdout.splitlines() if ln.startswith("browse: ")]
    assert len(links) == 2 and links[0] == links[1], links  # at the start, again under the summary
    assert proc.stdout.index("browse: ") < proc.stdout.index("job 0 ")  # before the first job's line
    assert f"#/experiments/{parent.info.experiment_id}/runs?viewStateShareKey=sweep-{sweep_id}&" in links[0]
    experiment = client(store).get_experiment(parent.info.experiment_id)
    envelope = json.loads(experiment.tags[f"mlflow.sharedViewState.sweep-{sweep_id}"])
    assert envelope["name"] == f"{parent.info.run_name} ({sweep_id})"
    state = json.loads(envelope["state"])
    assert state["searchFilter"] == f"tags.sweep_id = '{sweep_id}'"
    assert (state["orderByKey"], state["orderByAsc"]) == ("metrics.`step/p50_ms`", True)
    columns = state["selectedColumns"]
    # the verdict first (each job's, issue 46), then the objective rounded (issue 27)
    assert columns[:2] == ["tags.`verdict`", "tags.`step p50 ms`"], columns
    assert "tags.`peak RSS GiB`" in columns
    assert "tags.`peak reserved GiB`" not in columns and "tags.`speedup vs eager`" not in columns


@pytest.mark.slow
def test_report_cli_rebuilds_the_summary_from_mlflow(tmp_path: Path, store: str):
    # The store comes through MLFLOW_TRACKING_URI and the config's default (an interpolation the sweep
    # callback must resolve without Hydra's runtime config).
    proc = run_cli(
        [*TINY, "compile.mode=eager", "precision=amp,fp32"],
        tmp_path,
        store,
        multirun=True,
        uri_override=False,
    )
    assert "warning" not in proc.stderr.lower(), output(proc)
    assert proc.returncode == 0, output(proc)
    parent, _ = split(store)
    out = tmp_path / "report"
    done = run_report("--tracking-uri", store, "--sweep", parent.data.tags["sweep_id"], "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert (
        (out / "summary.md").exists()
        and (out / "summary.csv").exists()
        and (out / "plots" / "step_time.png").exists()
    )
    assert "vit_tiny" in done.stdout
    # issue 29: printing a sweep again rewrites nothing and logs nothing, unless --publish
    summary_md = tmp_path / "multirun" / "summary.md"
    before = (summary_md.stat().st_mtime_ns, len(runs(store)), dict(split(store)[0].data.tags))
    again = run_report("--tracking-uri", store, "--sweep", parent.data.tags["sweep_id"])
    assert again.returncode == 0 and "vit_tiny" in again.stdout and "wrote" not in again.stdout
    assert (summary_md.stat().st_mtime_ns, len(runs(store)), dict(split(store)[0].data.tags)) == before
    published = run_report("--tracking-uri", store, "--sweep", parent.data.tags["sweep_id"], "--publish")
    assert published.returncode == 0 and f"logged to parent run {parent.info.run_id}" in published.stdout
    assert summary_md.stat().st_mtime_ns > before[0]
    listing = run_report("--tracking-uri", store, "--list")
    assert parent.data.tags["sweep_id"] in listing.stdout
    assert "verdict: " in listing.stdout and "swept: precision" in listing.stdout
    # Without MLflow at all: the same summary from the job folders' result files.
    offline = run_report("--results", str(tmp_path / "multirun"), "--out", str(tmp_path / "offline"))
    assert offline.returncode == 0, offline.stderr
    assert sorted(
        r["run_name"] for r in csv.DictReader((tmp_path / "offline" / "summary.csv").read_text().splitlines())
    ) == ["vit_tiny·amp·eager", "vit_tiny·fp32·eager"]
    assert (tmp_path / "offline" / "plots" / "step_time.png").exists()
    missing = run_report("--tracking-uri", store, "--sweep", "nope")
    assert missing.returncode == 1 and "no sweep with sweep_id='nope'" in missing.stderr


@pytest.mark.slow
def test_resume_skips_finished_jobs_and_runs_the_rest(tmp_path: Path, store: str):
    """A resumed sweep skips its FINISHED jobs and runs the rest; its wall time leaves out the idle time
    between its sessions, and the jobs it skips count as done in its progress line. Its id holds a quote
    (`o'brien`): every value put into an MLflow filter is quoted, so the sweep finds its parent run."""
    base = [*TINY, "compile.mode=eager", 'sweep.id="o\'brien"', "trainer.seed=0,1,2"]
    started = time.monotonic()
    first = run_cli([*base, *INTERRUPT_AFTER_TWO_JOBS], tmp_path / "a", store, multirun=True)
    first_s = time.monotonic() - started
    assert first.returncode == 130, output(first)
    # the idle time between the sessions: longer than the sessions' start-up and end outside the sweep's clock
    time.sleep(10)
    started = time.monotonic()
    again = run_cli([*base, "sweep.resume=true"], tmp_path / "b", store, multirun=True)
    again_s = time.monotonic() - started
    assert again.returncode == 0, output(again)
    assert again.stdout.count("already FINISHED in sweep o'brien") == 2
    progress = [line for line in again.stdout.splitlines() if line.startswith("sweep: ")]
    assert progress[-1].startswith("sweep: 3/3 jobs done, 0 failed"), progress
    parent, kids = split(store)
    assert len(kids) == 3 and sorted(k.data.params["trainer.seed"] for k in kids) == ["0", "1", "2"]
    assert parent.data.tags["sweep_id"] == "o'brien" and {
        k.data.tags["mlflow.parentRunId"] for k in kids
    } == {parent.info.run_id}
    assert parent.info.status == "FINISHED" and int(parent.data.tags["jobs"]) == 3
    assert parent.data.metrics["sweep/wall_s"] <= first_s + again_s  # not the gap between them
    # Without resume, reusing a sweep id is refused rather than mixing two sweeps.
    clash = run_cli([*base, "trainer.seed=5"], tmp_path / "c", store, multirun=True)
    assert clash.returncode != 0 and "already exists" in clash.stderr + clash.stdout
    unknown = run_cli(
        [*TINY, "compile.mode=eager", "sweep.id=never-ran", "sweep.resume=true"],
        tmp_path / "d",
        store,
        multirun=True,
    )
    assert unknown.returncode != 0 and "no sweep with sweep.id='never-ran'" in unknown.stderr + unknown.stdout


@pytest.mark.slow
def test_sigint_to_the_sweep_leaves_no_run_running(tmp_path: Path, store: str):
    """Ctrl-C of a sweep: finished runs stay FINISHED, the interrupted job and the parent end KILLED."""
    args = [
        "model=vit_tiny",
        "trainer.batch_size=2",
        "compile.mode=eager",
        # job 0 ends at once; job 1 lasts seconds on a 2-core host: the Ctrl-C lands inside it
        "trainer.steps=4,4000,4001",
        "trainer.warmup_steps=1",
    ]
    cmd = [
        sys.executable,
        "-m",
        "pipeline.run",
        "-m",
        *with_host_check(args),
        f"mlflow.tracking_uri={store}",
        f"hydra.sweep.dir={tmp_path}/multirun",
    ]
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env=env,
    )
    seen: list[str] = []
    deadline = time.monotonic() + 600
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        seen.append(line)
        if "job 1 " in line:  # job 0 is done and logged, job 1 has started its worker
            break
    time.sleep(3)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
    try:
        rest, _ = proc.communicate(timeout=120)
    finally:
        stop_group(proc)  # nothing left running to slow the next tests if it did not stop
    text = "".join(seen) + rest
    assert proc.returncode == 130, text
    statuses = sorted((r.data.tags.get("sweep_parent") == "true", r.info.status) for r in runs(store))
    assert "RUNNING" not in {s for _, s in statuses}, statuses
    assert (False, "FINISHED") in statuses and (False, "KILLED") in statuses and (True, "KILLED") in statuses
    killed = [
        r for r in runs(store) if r.info.status == "KILLED" and r.data.tags.get("sweep_parent") != "true"
    ]
    assert all(r.data.tags.get("error_type") == "Interrupted" for r in killed)
    # No worker outlived the sweep.
    pids = [
        json.loads(p.read_text())["info"].get("worker_pid")
        for p in (tmp_path / "multirun").glob("*/result.json")
    ]
    for pid in filter(None, pids):
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    # Its last line says how the finished job gets its summary, and doing so writes it (incomplete).
    (line,) = [ln for ln in text.splitlines() if ln.startswith("interrupted by SIGINT")]
    sync_cmd = f"`python -m pipeline.report --sync {tmp_path / 'multirun'}`"
    assert sync_cmd in line and "sweep.resume=true" in line, line
    assert not (tmp_path / "multirun" / "summary.md").exists()
    sync = run_report("--tracking-uri", store, "--sync", str(tmp_path / "multirun"))
    assert sync.returncode == 1 and "is incomplete" in sync.stdout, sync.stdout + sync.stderr
    summary = (tmp_path / "multirun" / "summary.md").read_text()
    assert "incomplete: 1 of the 3 planned jobs" in summary and "FINISHED" in summary, summary


def test_named_sweep_files_hold_the_sweep_params():
    cfg = compose(["sweep=seed_grid"])
    assert cfg.sweep.name == "seed_grid" and cfg.model.id == "vit_b16"
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        full = hydra_compose("config", overrides=["sweep=seed_grid"], return_hydra_config=True)
        assert dict(full.hydra.sweeper.params) == {"precision": "amp,fp32", "compile.mode": "eager,default"}
        assert len(planned_jobs(full.hydra) or []) == 4
        modes = hydra_compose("config", overrides=["sweep=modes"], return_hydra_config=True)
        assert len(planned_jobs(modes.hydra) or []) == 5


def test_summary_uses_the_latest_run_of_each_config_and_counts_failures():
    def row(name, status, h, t, speedup=None, precision="amp", parity=1.0):
        metrics = {"step/p50_ms": 10.0}
        if speedup:
            metrics.update({"speedup/vs_eager": speedup, "parity/ok": parity})
        return Row(
            name=name,
            status=status,
            config={"model": "m", "precision": precision, "mode": "default" if speedup else "eager"},
            metrics=metrics,
            config_hash=h,
            start_time=t,
        )

    rows = [
        row("a", "FAILED", "h1", 1),
        row("a", "FINISHED", "h1", 2, speedup=2.0),
        row("b", "FINISHED", "h2", 3, speedup=8.0, precision="fp32"),
        row("c", "FINISHED", "h3", 4, speedup=3.0, parity=0.0),
    ]
    s = summarize("x", rows)
    assert [r.name for r in s.rows] == ["a", "b", "c"]
    assert math.isclose(
        s.aggregates["sweep/geomean_speedup"], 4.0
    )  # sqrt(2 * 8): c diverged, so it does not pass
    assert math.isclose(s.aggregates["sweep/pass_rate"], 2 / 3)
    assert math.isclose(s.aggregates["sweep/weighted_speedup"], 0.75 * 2.0 + 0.25 * 8.0)
    # a and b read the same step time: no fastest, a tie (c diverged, so it is not a contender)
    assert s.fastest is None and s.verdict is not None and s.verdict.kind == "tie"
    assert sorted(s.verdict.tied) == ["a", "b"]
    assert not any("noisy" in n for n in s.notes)
    # a sweep of one precision asked for no weighted speedup: no note about it; one that asked for both
    # and got no passing fp32 job is told what the figure needs
    amp_only = summarize("x", [row("a", "FINISHED", "h1", 1, speedup=2.0)])
    assert not any("weighted speedup" in n for n in amp_only.notes)
    failed = Row(
        name="b",
        status="FAILED",
        config={"model": "m", "precision": "fp32", "mode": "default"},
        metrics={},
        config_hash="h2",
        start_time=2,
    )
    fp32_failed = summarize("x", [row("a", "FINISHED", "h1", 1, speedup=2.0), failed])
    assert "sweep/weighted_speedup" not in fp32_failed.aggregates
    assert any(
        "weighted speedup (0.75 AMP + 0.25 FP32) needs passing AMP and fp32 jobs" in n
        for n in fp32_failed.notes
    )


def test_summary_marks_noisy_jobs_in_the_table_and_says_what_to_trust():
    steady = Row(
        name="a",
        status="FINISHED",
        config={"model": "m"},
        metrics={"step/p50_ms": 10.0, "step/noisy": 0.0},
    )
    noisy = Row(
        name="b",
        status="FINISHED",
        config={"model": "m"},
        metrics={"step/p50_ms": 11.0, "step/noisy": 1.0},
    )
    s = summarize("x", [steady, noisy])
    statuses = [row[-1] for row in table(s, compact=False)[1]]
    assert statuses == ["FINISHED", "FINISHED, noisy"]
    (note,) = [n for n in s.notes if n.startswith("1 job(s) flagged noisy")]
    assert "CPU speed moved" not in note  # no job ran the host check

    # With the host check: the note names how far the host moved in the noisy jobs (not the steady one's 80%)
    steady.metrics["host/reference_spread_pct"] = 80.0
    noisy.metrics["host/reference_spread_pct"] = 41.4
    (note,) = [n for n in summarize("x", [steady, noisy]).notes if "flagged noisy" in n]
    assert "the host's own CPU speed moved up to 41% while they measured (b;" in note, note


@pytest.mark.slow
def test_optuna_search_records_failed_trials_and_goes_on(tmp_path: Path, store: str):
    """sweep=compile_search: Hydra's Optuna sweeper minimizes step time; a trial with bad values fails
    (recorded in MLflow and by Optuna) and the search continues to its best trial."""
    args = [
        "sweep=compile_search",
        "model=vit_tiny",
        "trainer.steps=4",
        "trainer.warmup_steps=1",
        "compile.backend=aot_eager",
        "hydra.sweeper.n_trials=4",
        "compile.mode=choice(default)",
        "compile.scope=choice(model)",
        "trainer.batch_size=choice(2,0)",
    ]
    proc = run_cli(args, tmp_path, store, multirun=True)
    text = proc.stdout + proc.stderr
    assert "Best value:" in text, output(proc)
    best = (tmp_path / "multirun" / "optimization_results.yaml").read_text()
    assert "trainer.batch_size: 2" in best and "best_value:" in best
    parent, kids = split(store)
    assert len(kids) == 4 and parent.data.tags["sweep_name"] == "compile_search"
    finished = [k for k in kids if k.info.status == "FINISHED"]
    failed = [k for k in kids if k.info.status == "FAILED"]
    assert finished and len(finished) + len(failed) == 4
    assert all(k.info.run_name == "bad input: trainer.batch_size=0" for k in failed)
    # issue 29: every trial is a job of the summary (two bad ones with one name too), each failed trial
    # said in the project's words, the swept keys whole, no colour codes in a log
    assert f"jobs: 4, failed: {len(failed)}" in proc.stdout
    said = [line for line in text.splitlines() if "search: a trial ended BAD_INPUT" in line]
    assert len(said) == len(failed) and "float-castable" not in text and "\x1b[" not in text
    every = every_job_line(proc.stdout)
    assert (
        "trainer.batch_size=2" in every  # a swept key the finished trials share, whole
        and "reduce-overhead," not in text
    )
    best_value = float(best.split("best_value:")[1].split()[0])
    assert best_value == min(k.data.metrics["step/p50_ms"] for k in finished)


def test_sweep_keys_without_multirun_are_refused_in_one_line(tmp_path: Path, store: str):
    for override in ("sweep.id=mine", "sweep.resume=true"):
        proc = run_cli([*TINY, "compile.mode=eager", override], tmp_path, store)
        assert proc.returncode == 2, output(proc)
        (line,) = one_line_errors(proc, "config error:")
        assert line.startswith(f"config error: {override.split('=')[0]}="), line
        assert "add -m" in line, line
    assert runs(store) == [] and not (tmp_path / "run").exists()  # nothing started, not even its folder


@pytest.mark.slow
def test_a_summary_that_cannot_be_written_fails_the_sweep_in_one_line_and_closes_its_parent(
    tmp_path: Path, store: str
):
    (tmp_path / "multirun" / "summary.md").mkdir(parents=True)  # where the summary goes: a folder
    proc = run_cli([*TINY, "compile.mode=eager", "trainer.seed=0"], tmp_path, store, multirun=True)
    assert proc.returncode == 1, output(proc)
    (line,) = one_line_errors(proc, "sweep error:")
    assert "IsADirectoryError" in line and "summary.md" in line and "closed FAILED" in line, line
    parent, kids = split(store)
    assert parent.info.status == "FAILED" and "IsADirectoryError" in parent.data.tags["error_message"]
    assert [k.info.status for k in kids] == ["FINISHED"]


@pytest.mark.slow
@pytest.mark.integration
def test_the_store_gone_at_the_end_of_a_sweep_is_one_line_and_sync_finishes_the_sweep(tmp_path: Path):
    """The MLflow server dies after the sweep's last job (a callback kills it just before the sweep's
    own end): exit 1 with one line saying how to finish the sweep; once the server is back,
    `report --sync` closes the parent run with its summary."""
    server = start_server(tmp_path / "server")
    try:
        stop = [
            "+hydra.callbacks.stop_server._target_=tests.fault_callbacks.StopServerAtSweepEnd",
            f"+hydra.callbacks.stop_server.pid_file={server.pid_file}",
        ]
        proc = run_cli(
            [*TINY, "compile.mode=eager", "trainer.seed=0", *stop], tmp_path, server.url, multirun=True
        )
    finally:
        server.stop()
    assert proc.returncode == 1, output(proc)
    (line,) = one_line_errors(proc, "sweep error:")
    assert "is not reachable" in line and f"--sync {tmp_path / 'multirun'}" in line, line
    assert "stays RUNNING" in line, line

    server = start_server(tmp_path / "server")  # the same store, back (on another port)
    try:
        sync = run_report("--tracking-uri", server.url, "--sync", str(tmp_path / "multirun"))
        assert sync.returncode == 0, sync.stdout + sync.stderr
        parent, kids = split(server.url)
        assert parent.info.status == "FINISHED" and [k.info.status for k in kids] == ["FINISHED"]
        assert {"summary.md", "summary.csv"} <= {
            a.path for a in client(server.url).list_artifacts(parent.info.run_id)
        }
        assert 0 < parent.data.metrics["sweep/wall_s"] < 300
    finally:
        server.stop()


@pytest.mark.slow
def test_resuming_a_sweep_whose_driver_still_runs_is_refused_in_one_line(tmp_path: Path, store: str):
    """A second driver resuming the sweep while the first still runs one of its jobs: refused, with
    what to do; the live job's run is left alone (not closed as lost, not run twice)."""
    base = [*TINY, "compile.mode=eager", "sweep.id=busy"]
    first = popen_cli([*base, "trainer.steps=100000"], tmp_path / "a", store, multirun=True)
    try:
        assert first.stdout is not None
        for line in first.stdout:  # `job 0 <name>: run <id>, output ...`: its run is open, its worker started
            if line.startswith("job 0 "):
                break
        else:
            raise AssertionError(f"the first sweep's job never started: {first.stderr.read()}")
        again = run_cli([*base, "sweep.resume=true"], tmp_path / "b", store, multirun=True)
        assert again.returncode == 1, output(again)
        (line,) = one_line_errors(again, "sweep error:")
        assert (
            "sweep busy is still running" in line and f"pid {first.pid}" in line and "then resume" in line
        ), line
        parent, kids = split(store)
        assert parent.info.status == "RUNNING" and [k.info.status for k in kids] == ["RUNNING"]
        assert not (tmp_path / "b" / "multirun" / "0").exists()  # no job of the second driver started
    finally:
        os.killpg(first.pid, signal.SIGINT)
        try:
            first.communicate(timeout=120)
        finally:
            stop_group(first)
    assert first.returncode == 130
    assert "RUNNING" not in {r.info.status for r in runs(store)}


@pytest.mark.slow  # the default suite's 5 minutes (CI runs it: make test-all)
def test_a_resumption_that_changes_the_jobs_work_is_refused_naming_what_changed(tmp_path: Path, store: str):
    """Issue 41: `sweep.resume=true` with another trainer.steps or another list of modes was accepted:
    rows of different work under one name were pooled into one verdict, the parent's command kept the
    first. Now refused before anything runs, naming each changed key with both values and how to run
    the command as a new sweep; the same work resumes, and the parent's command is this session's."""
    base = [*TINY, "compile.mode=eager", "trainer.seed=0", "sweep.id=same-work"]
    first = run_cli(base, tmp_path / "a", store, multirun=True)
    assert first.returncode == 0, output(first)
    steps = [a if a != "trainer.steps=4" else "trainer.steps=3" for a in base]
    modes = [a if a != "compile.mode=eager" else "compile.mode=default,eager" for a in base]
    for changed, what in (
        (steps, "trainer.steps=3 (the sweep's: 4)"),
        (modes, "compile.mode=default,eager (the sweep's: eager)"),
    ):
        proc = run_cli([*changed, "sweep.resume=true"], tmp_path / "b", store, multirun=True)
        assert proc.returncode == 2, output(proc)
        (line,) = one_line_errors(proc, "config error:")
        assert f"and this command changes their work: {what}" in line, line
        assert (
            "run this command as a new sweep (leave out sweep.resume=true and give another sweep.id" in line
        )
        assert not list((tmp_path / "b").rglob("worker.log"))  # nothing ran
    parent, kids = split(store)
    assert len(kids) == 1 and parent.info.status == "FINISHED"
    assert str(tmp_path / "a") in parent.data.tags["command"]

    same = run_cli([*base, "sweep.resume=true"], tmp_path / "c", store, multirun=True)
    assert same.returncode == 0, output(same)
    assert "already FINISHED in sweep same-work" in same.stdout
    parent, kids = split(store)
    assert len(kids) == 1 and parent.info.status == "FINISHED"
    assert str(tmp_path / "c") in parent.data.tags["command"]  # the command that ran it last


def test_the_memory_plot_shows_device_memory_and_a_cpu_jobs_rss_each_named():
    """The table's peak memory is the device's reserved memory, else the CPU worker's RSS; the plot shows the
    same figure and says which it is."""
    device = {"memory/peak_reserved_gib": 3.5, "memory/cpu_rss_peak_gib": 1.2, "step/p50_ms": 1.0}
    host = {"memory/cpu_rss_peak_gib": 0.8, "step/p50_ms": 2.0}
    rows = [
        Row(name=n, status="FINISHED", config={"mode": "default"}, metrics=m)
        for n, m in (("g", device), ("c", host))
    ]
    assert [r.peak_gib for r in rows] == [3.5, 0.8]
    summary = summarize("memory", rows)
    labels = []
    for shown in ([rows[0]], [rows[1]], rows):
        fig = peak_memory_plot(shown, summary)
        labels.append(fig.axes[0].get_xlabel())
        assert [bar.get_width() for bar in fig.axes[0].patches] == [r.peak_gib for r in shown]
    assert labels[0].startswith("peak reserved memory") and "RSS" in labels[1] and "RSS" in labels[2]
    assert len(set(labels)) == 3
