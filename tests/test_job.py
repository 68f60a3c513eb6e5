"""The core vertical slice through the real CLI: one job, a small sweep, bad input, a timeout."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from pipeline.identity import IDENTITY_KEYS
from pipeline.job.outcome import SHOWN
from pipeline.measure.registry import unregistered
from tests.conftest import COLD_CACHE, SLEEPY, TINY, client, one_line_errors, output, run_cli, run_info, runs

CORE_METRICS = {
    "step/p50_ms",
    "step/mean_ms",
    "step/p10_ms",
    "step/p90_ms",
    "step/std_ms",
    "step/p50_ci95_low_ms",
    "step/p50_ci95_high_ms",
    "throughput/samples_per_s",
    "warmup/first_step_s",
    "warmup/excess_s",
    "memory/cpu_rss_peak_gib",
    "loss/first",
    "loss/final",
    "step/count",
    "step/spread_pct",
    "step/noisy",
    "host/reference_p50_ms",
    "host/reference_spread_pct",
}


# A job's tags beyond MLflow's own: its identity, its place, the verdict flags and two environment facts.
FILTER_TAGS = {
    *IDENTITY_KEYS,
    "config_hash",
    "pool_hash",
    "job_dir",
    "sweep_id",
    "job_num",
    "noisy",
    "torch",
    "device",
    "worker_start",  # template or spawn: how the worker really started (a forked job may have spawned)
    *(
        "unit",
        "samples_per_unit",
        "tokens_per_unit",
        "objective",
    ),  # what one unit did, as the worker stated it: the summary and the view rank by it
    *(key.format(unit="step") for key in SHOWN.values()),  # its figures rounded, as the UI shows them
}


def children(store: str) -> list:
    return [r for r in runs(store) if r.data.tags.get("sweep_parent") != "true"]


def check_finished_run(store: str, run, mode: str) -> None:
    assert run.info.status == "FINISHED", run.data.tags.get("error_message")
    metrics = run.data.metrics
    assert set(metrics) >= CORE_METRICS, CORE_METRICS - set(metrics)
    assert not unregistered(metrics), "every logged metric is in pipeline/measure/registry.py"
    assert metrics["step/count"] == 3
    assert metrics["step/p10_ms"] <= metrics["step/p50_ms"] <= metrics["step/p90_ms"]
    assert metrics["step/p50_ci95_low_ms"] <= metrics["step/p50_ms"] <= metrics["step/p50_ci95_high_ms"]
    assert metrics["throughput/samples_per_s"] == pytest.approx(2 / (metrics["step/p50_ms"] / 1000))
    c = client(store)
    step_times = c.get_metric_history(run.info.run_id, "curve/step_ms")
    assert [p.step for p in step_times] == [1, 2, 3]  # measured steps only, numbered as training steps
    assert sum(p.value for p in step_times) / 3 == pytest.approx(metrics["step/mean_ms"])
    assert [p.step for p in c.get_metric_history(run.info.run_id, "curve/loss")] == [0, 1, 2, 3]
    params = run.data.params
    assert (
        params["trainer.steps"] == "4"
        and params["compile.mode"] == mode
        and params["model.name"] == "vit_tiny_patch16_224"
    )
    assert params["mlflow.tracking_uri"].startswith("sqlite:///")
    # Only the keys that apply: an image model's input, cross-entropy without distillation knobs, one
    # device, generated batches; the sweep's settings are its parent's.
    assert params["model.input.height"] == "32" and "model.input.vocab_size" not in params
    assert "loss.alpha" not in params and "loss.kind" not in params
    assert params["parallel.strategy"] == "none" and "parallel.nproc" not in params
    assert "data.num_workers" not in params and not any(key.startswith("sweep.") for key in params)
    assert ("compile.backend" in params) == (mode != "eager")
    tags = run.data.tags
    assert (tags["model"], tags["precision"], tags["mode"]) == ("vit_tiny", "amp", mode)
    # The description leads with the job's own result, then says how it was measured.
    note = tags["mlflow.note.content"]
    from pipeline.job.outcome import ms
    from pipeline.measure.registry import estimate

    assert note.startswith(f"**FINISHED**: step {ms(*estimate(metrics, 'step/p50_ms'))} (p50), "), note
    assert note.index("How it was measured") < note.index("warm-up")
    assert "Host: a fixed, torch-free Python workload timed in short bursts before each timed round" in note
    isolation = {"spawn": "a fresh spawned Python process", "template": "forked from a template process"}
    assert isolation[tags["worker_start"]] in note  # how the worker really started, as the tag says
    assert "diagnose/compiled_autograd_captures" not in metrics  # no compiled autograd here
    # Tags a user filters on; the environment and the job's internals are in run_info.json.
    assert set(tags) - {k for k in tags if k.startswith("mlflow.")} <= FILTER_TAGS, set(tags) - FILTER_TAGS
    assert (tags["unit"], tags["samples_per_unit"], tags["objective"]) == (
        "training step",
        "2",
        "step/p50_ms",
    )
    assert tags["torch"] and tags["device"] == "cpu" and "teacher" not in tags
    info = run_info(run)
    assert info["environment"]["torch"] == tags["torch"]
    assert info["environment"]["python"] and info["environment"]["hostname"]
    assert info["info"]["worker_pid"] != info["info"]["parent_pid"]
    artifacts = {a.path for a in c.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "step_times.csv", "result.json", "run_info.json", "worker.log"} <= artifacts


def test_one_eager_job_finishes_with_its_metrics(tmp_path: Path, store: str):
    proc = run_cli([*TINY, "compile.mode=eager"], tmp_path, store)
    assert proc.returncode == 0, output(proc)
    (run,) = runs(store)
    check_finished_run(store, run, "eager")
    assert run.info.run_name == "vit_tiny·amp·eager"
    assert "compile/total_s" not in run.data.metrics  # nothing was compiled
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert (
        result["status"] == "FINISHED"
        and result["mlflow_synced"] is True
        and result["mlflow_run_id"] == run.info.run_id
    )
    assert result["info"]["worker_pid"] != result["info"]["parent_pid"]
    assert "Traceback" not in proc.stderr
    assert "worker: FINISHED" not in proc.stdout  # the job's own last line says it
    assert_settings_recorded(result["info"])


FRESH_SETTINGS = (
    "import json, torch\nfrom pipeline.measure.settings import snapshot\nprint(json.dumps(snapshot()))\n"
)


def assert_settings_recorded(info: dict, job_env: dict | None = None) -> None:
    """Every process-wide setting in which the worker, as its units ran, differs from a fresh interpreter
    with torch imported (in the job's environment: `job_env` as run_cli takes it) is recorded in the run
    (run_info `settings_changed`)."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {
        k: v
        for k, v in {**os.environ, **(job_env or {})}.items()
        if v is not None and not k.startswith(("TORCH", "PYTORCH", "CUDA", "TRITON", "NCCL"))
    }
    fresh = json.loads(
        subprocess.run(
            [sys.executable, "-c", FRESH_SETTINGS],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    worker, recorded = info["settings"], info["settings_changed"]
    differ = {k for k in set(fresh) | set(worker) if fresh.get(k) != worker.get(k)}
    assert differ <= set(recorded), f"set in the worker but not recorded: {sorted(differ - set(recorded))}"


@pytest.mark.slow  # the default suite's 5 minutes (CI runs it: make test-all)
def test_a_global_setting_changed_anywhere_in_the_worker_is_recorded(tmp_path: Path, store: str):
    """A model factory that flips cuDNN's benchmark flag and the thread count as it builds (as a library
    might): both show in the run's record of what differs from torch's defaults."""
    from tests.test_faults import FAULTY

    flips = [*FAULTY, "model._target_=tests.fault_models.flips_a_global_setting"]
    default_threads = {"OMP_NUM_THREADS": None}  # torch's own threads, which the factory sets to 1
    proc = run_cli(flips, tmp_path, store, env=default_threads)
    assert proc.returncode == 0, output(proc)
    info = json.loads((tmp_path / "run" / "result.json").read_text())["info"]
    changed = info["settings_changed"]
    assert changed["cudnn.benchmark"] == "False -> True" and changed["num_threads"].endswith("-> 1")
    assert_settings_recorded(info, default_threads)


def test_a_job_whose_steps_spread_beyond_the_limit_is_flagged_noisy(tmp_path: Path, store: str):
    """The run says when its step times should not be trusted to a few percent: the metric, a tag to
    filter on, the note in its description and run_info.json, and the job's last line."""
    proc = run_cli([*TINY, "compile.mode=eager", "benchmark.noisy_spread_pct=1e-9"], tmp_path, store)
    assert proc.returncode == 0, output(proc)
    (run,) = runs(store)
    m, tags = run.data.metrics, run.data.tags
    assert m["step/spread_pct"] > 1e-9 and m["step/noisy"] == 1.0
    assert tags["noisy"] == "true"
    note = run_info(run)["info"]["measurement_note"]
    assert note.startswith("noisy: p10-p90 of the measured steps spans")
    assert "benchmark.noisy_spread_pct=1e-09" in note
    # the host check's spread is past that limit too: the note says how far the host's own speed moved
    assert f"the host's own CPU speed moved {m['host/reference_spread_pct']:.0f}%" in note
    result = tags["mlflow.note.content"].split("\n\n")[0]
    assert result.endswith(f" **Noisy**: {note.removeprefix('noisy: ')}."), result
    # The last line says it short (issue 46: it was 400 characters); why, on the note line before it.
    lines = proc.stdout.strip().replace("\n  ", " ").splitlines()
    assert lines[-1].startswith("vit_tiny·amp·eager: FINISHED: ") and ", noisy (p10-p90 spans " in lines[-1]
    assert lines[-2] == f"note: {note}"


# aot_eager in the default suite: the compile-time accounting is the backend's own; inductor's cold compile
# (what it prints, a minute of a 2-core host) is a slow test.
@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_one_compiled_job_reports_compile_time_apart_from_step_time(tmp_path: Path, store: str, backend: str):
    proc = run_cli(
        [*TINY, "compile.mode=default", f"compile.backend={backend}", COLD_CACHE], tmp_path, store
    )  # what a first compile prints
    assert proc.returncode == 0, output(proc)
    (run,) = runs(store)
    check_finished_run(store, run, "default")
    m = run.data.metrics
    assert run.info.run_name == f"vit_tiny·amp·default·{backend}"
    # Compilation happens in the warm-up: seconds, while a measured step takes milliseconds.
    least_s = 1.0 if backend == "inductor" else 0.2
    assert m["compile/total_s"] > least_s and m["compile/torch_total_s"] > least_s
    # The torch.compile call itself (backend imports, set-up) counts too: from asking to running.
    assert 0 < m["compile/setup_s"] < m["compile/total_s"]
    assert m["compile/total_s"] == pytest.approx(m["compile/setup_s"] + m["warmup/excess_s"])
    assert m["step/max_ms"] < 1000 * m["compile/total_s"] / 10
    assert m["diagnose/frames_compiled"] >= 1 and m["diagnose/recompiles_after_warmup"] == 0
    assert {"speedup/vs_eager", "eager/p50_ms", "parity/max_rel", "parity/ok"} <= set(m)
    assert m["parity/ok"] == 1.0
    assert m["compile/backward_s"] > 0  # a training step compiles its backward
    if backend == "inductor":
        # Inductor's perf hints stay off the job's output (verbose=true shows them), kept in its diagnostics.
        assert "__perf_hints" not in proc.stdout + proc.stderr
        assert json.loads((tmp_path / "run" / "diagnostics.json").read_text())[
            "perf_hints"
        ]  # there were some


@pytest.mark.parametrize(
    "override, key",
    [
        ("model=vit_huge", "model=vit_huge"),
        ("trainer.stepz=3", "trainer.stepz"),
        ("compile.mode=fastest", "compile.mode='fastest'"),
        ("compile.backend=nope", "compile.backend='nope'"),
        ("trainer.steps=0", "trainer.steps=0"),
        ("trainer.warmup_steps=4", "trainer.warmup_steps=4"),
        ("trainer.batch_size=0", "trainer.batch_size=0"),
        ("+compile.options.not_a_real_option=1", "compile.options.not_a_real_option=1"),
    ],
)
def test_bad_input_fails_before_training_with_one_line(tmp_path: Path, store: str, override: str, key: str):
    proc = run_cli([*TINY, override], tmp_path, store)
    assert proc.returncode == 2, output(proc)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("config error:")]
    assert lines and lines[0].startswith(f"config error: {key}"), output(proc)
    assert "allowed" in lines[0] or "must be" in lines[0] or "has " in lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert runs(store) == []  # nothing was started, so nothing is left RUNNING
    assert not (tmp_path / "run" / "worker.log").exists()


def test_a_bad_job_in_a_sweep_fails_alone(tmp_path: Path, store: str):
    proc = run_cli([*TINY, "compile.mode=eager", "trainer.batch_size=2,0"], tmp_path, store, multirun=True)
    assert proc.returncode == 1, output(proc)
    jobs = children(store)
    assert sorted(r.info.status for r in jobs) == ["FAILED", "FINISHED"]
    bad = next(r for r in jobs if r.info.status == "FAILED")
    assert (
        bad.data.tags["error_type"] == "ConfigError"
        and "trainer.batch_size=0" in bad.data.tags["error_message"]
    )
    assert "config error: trainer.batch_size=0" in proc.stderr


def test_timeout_is_recorded_and_the_sweep_goes_on(tmp_path: Path, store: str):
    proc = run_cli(
        [*TINY, *SLEEPY, "compile.mode=eager", "trainer.timeout_s=1,600"], tmp_path, store, multirun=True
    )
    assert proc.returncode == 1, output(proc)
    by_status = {r.info.status: r for r in children(store)}
    assert set(by_status) == {"KILLED", "FINISHED"}
    killed = by_status["KILLED"]
    assert killed.data.tags["error_type"] == "Timeout"
    assert "trainer.timeout_s=1" in killed.data.tags["error_message"]
    assert "KILLED: Timeout" in proc.stdout
    assert all(r.info.status != "RUNNING" for r in runs(store))


def test_an_unwritable_output_folder_is_refused_in_one_line_before_anything_starts(
    read_only_dir: Path, store: str
):
    """hydra.run.dir / hydra.sweep.dir in a read-only place: one line naming the key, exit 2, and no
    run in MLflow (not even an empty parent)."""
    for multirun, key in ((False, "hydra.run.dir"), (True, "hydra.sweep.dir")):
        proc = run_cli([*TINY, "compile.mode=eager"], read_only_dir, store, multirun=multirun)
        assert proc.returncode == 2, output(proc)
        (line,) = one_line_errors(proc, "config error:")
        assert line.startswith(f"config error: {key}=") and "is not writable" in line, line
    assert runs(store) == []


def test_a_jobs_last_line_shows_a_speedup_interval_too_wide_to_say_anything_as_undetermined():
    """The job's own line follows the rule of the summary (docs/verdicts.md): an interval spanning more
    than 3x (a CPU job's 1.06x [0.39, 2.93]) is `[undetermined]`, not numbers; a tight one is numbers."""
    from pipeline.job.outcome import one_line
    from pipeline.job.result import JobResult

    result = JobResult()
    result.status = "FINISHED"
    result.metrics.update({"step/p50_ms": 4.38, "speedup/vs_eager": 1.06, "speedup/ci95_low": 0.39})
    result.metrics["speedup/ci95_high"] = 2.93
    assert "1.06x vs eager [undetermined]" in one_line("job", result)
    result.metrics.update({"speedup/ci95_low": 1.02, "speedup/ci95_high": 1.09})
    assert "1.06x vs eager [1.02, 1.09]" in one_line("job", result)


def test_calls_back_to_back_slower_than_calls_alone_are_flagged_in_the_metric_and_the_jobs_line():
    """On an H200 (benchmarks/RESULTS.md, "the back-to-back figure of a host-bound unit"), a job that had
    compiled cold read ResNet-50's calls back to back at 13.20 ms [12.93, 13.55] against 12.79 ms
    [12.71, 12.87] for calls alone: a GPU's queue is never slower than its idle device but for the host."""
    from pipeline.job.outcome import one_line
    from pipeline.job.result import JobResult
    from pipeline.measure.stats import Latency
    from pipeline.scenarios.inference.scenario import RequestLatency

    alone = Latency.from_values([12.6, 12.7, 12.8, 12.8, 12.9, 12.7, 12.8, 12.75] * 8)
    held_back = Latency.from_values([13.0, 13.2, 13.4, 13.1, 13.3, 13.2, 13.5, 13.2] * 8)
    queued = Latency.from_values([11.0, 11.1, 11.05, 11.1, 11.0, 11.05, 11.1, 11.05] * 8)
    flagged = RequestLatency(
        latency=alone, back_to_back=held_back, eager_back_to_back=None, back_to_back_speedup=None
    )
    assert flagged.metrics()["step/above_latency"] == 1.0
    steady = dataclasses.replace(flagged, back_to_back=queued)
    assert steady.metrics()["step/above_latency"] == 0.0
    overlapping = dataclasses.replace(flagged, back_to_back=alone)  # the same figure: no claim either way
    assert overlapping.metrics()["step/above_latency"] == 0.0
    on_a_cpu = dataclasses.replace(flagged, back_to_back=None)  # no queue: calls back to back run as alone
    assert "step/above_latency" not in on_a_cpu.metrics()

    result = JobResult()
    result.status = "FINISHED"
    result.metrics.update(alone.metrics("latency/") | held_back.metrics() | flagged.metrics())
    result.metrics["throughput/samples_per_s"] = 224 * 1000 / held_back.p50
    assert "samples/s back to back (held back by the host" in one_line("job", result)
    result.metrics.update(steady.metrics())
    assert "held back" not in one_line("job", result)
