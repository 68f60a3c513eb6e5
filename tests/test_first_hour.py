"""Issue 29, "a newcomer's first hour": the searches' summaries keep every swept key whole and leave out
what cannot run here (item 1), traps refused or said in one line before anything runs (item 3), a
terminal free of the libraries' floods unless verbose (item 4), and the commands that say what the tool
is and what a sweep would do (item 5). The install (item 2) is tests/test_install.py; the README's
commands, tests/test_readme.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline.config.schema import Config
from pipeline.progress import format_duration
from pipeline.sweep.finish import job_keys
from pipeline.sweep.render import constant_line, table
from pipeline.sweep.state import axes_from_tag, axis_keys, plan_lines, swept, swept_keys
from pipeline.sweep.summary import Row, summarize
from pipeline.tracking import RunRecord, Tracker
from tests.conftest import ROOT, TINY, compose, one_line_errors, output, run_cli, run_help, run_report, runs

SEARCH_SPACE = "compile.mode=choice(default, reduce-overhead, max-autotune-no-cudagraphs, max-autotune)"
TORCH_LOG_LINE = re.compile(r"^(\[rank\d+\]:)?[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ \S+:\d+\]", re.M)
HAS_VERBOSE = "verbose" in Config.__dataclass_fields__


def hydra_config(overrides: list[str]):
    """The config (Hydra's node included) as `python -m pipeline.run -m <overrides>` composes it."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from pipeline.config.schema import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        return loader.load_configuration("config", overrides, run_mode=RunMode.MULTIRUN)


def record(name: str, tags: dict[str, str], start: int, status: str = "FAILED") -> RunRecord:
    return RunRecord(
        run_id=f"r{start}",
        name=name,
        status=status,
        tags=tags,
        metrics={},
        params={},
        start_time_ms=start,
        end_time_ms=None,
    )


# ------------------------------------------------------------------------------------ item 1
def test_the_axes_tag_keeps_choice_values_whole_and_old_space_joined_tags_still_read():
    cfg = hydra_config(["sweep=compile_search"])
    axes = swept(cfg.hydra)
    assert SEARCH_SPACE in axes
    assert axes_from_tag(json.dumps(axes)) == axes
    # as sweeps before issue 29 recorded it: joined with spaces, which the choice() values hold too
    old = " ".join(axes)
    assert axis_keys(axes_from_tag(old)) == [
        "compile.mode",
        "compile.scope",
        "compile.optimizer",
    ]
    assert axis_keys(axes_from_tag("compile.mode=eager,default precision=amp,fp32")) == [
        "compile.mode",
        "precision",
    ]


def test_the_swept_keys_are_what_the_config_sets_and_a_fixed_value_leaves_the_search():
    cfg = hydra_config(["sweep=throughput_search", "precision=amp", "trainer.batch_size=choice(2,4)"])
    keys = swept_keys(cfg.hydra)
    # the inductor group sets compile.options (conf/inductor: `# @package compile.options`)
    assert keys == [
        "compile.mode",
        "compile.scope",
        "trainer.batch_size",
        "trainer.optimizer.fused",
        "compile.options",
    ]
    assert "trainer.batch_size=choice(2,4)" in swept(cfg.hydra)  # the command line's own space


def search_after_host_check(task: list[str]) -> tuple[list[str], dict, dict]:
    """`sweep=throughput_search device=cpu` with these task overrides, through the search's host check:
    the task overrides after it, and the sweeper's space before and after it."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from omegaconf import OmegaConf, open_dict, read_write

    from pipeline.config.schema import register_configs
    from pipeline.sweep.callbacks import leave_out_what_cannot_run_here

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        cfg = loader.load_configuration("config", ["sweep=throughput_search", "device=cpu"], RunMode.MULTIRUN)
        with read_write(cfg.hydra), open_dict(cfg.hydra):
            cfg.hydra.overrides.task = task
        space = OmegaConf.to_container(cfg.hydra.sweeper.params)
        leave_out_what_cannot_run_here(cfg)
    return list(cfg.hydra.overrides.task), space, OmegaConf.to_container(cfg.hydra.sweeper.params)


def test_overrides_outside_hydras_grammar_are_axes_by_their_commas_and_fixed_values_in_a_search():
    """Text Hydra cannot parse (it refuses it before any job): the sweep's axes guess from its commas;
    a search's check of its space takes it as a fixed value, and leaves the space as it is."""
    from omegaconf import OmegaConf

    task = ["a=x,,y", "b=[x,y", "p=choice(3", "c=1,2"]
    hydra_cfg = OmegaConf.create(
        {"sweeper": {"params": {"p": "1,2", "q": "1,2"}}, "overrides": {"task": task}}
    )
    assert swept(hydra_cfg) == ["q=1,2", "a=x,,y", "c=1,2"]
    task = ["precision=amp,,fp8", "trainer.batch_size=2,,4"]
    after, space_before, space_after = search_after_host_check(task)  # no key left out, none raises
    assert space_after == space_before and after == task


def test_a_search_key_the_command_line_fixes_stays_fixed_when_the_host_refuses_a_choice_of_its_space():
    """`sweep=throughput_search precision=bf16` on a CPU: precision is not searched (the command line
    fixes it), so fp8's refusal here neither prints a line nor turns precision=bf16 into a choice."""
    after, space_before, space_after = search_after_host_check(["precision=bf16", "device=cpu"])
    assert after == ["precision=bf16", "device=cpu"] and space_after == space_before


def test_every_trial_of_a_search_counts_and_a_resumption_replaces_its_earlier_run():
    bad = {"error_type": "ConfigError", "overrides": "trainer.batch_size=0"}
    runs_ = [
        record("bad input: trainer.batch_size=0", {**bad, "job_dir": "/s/a/0"}, 1),
        record("ok", {"config_hash": "h", "job_dir": "/s/a/1"}, 2, "FINISHED"),
        record(
            "bad input: trainer.batch_size=0", {**bad, "job_dir": "/s/a/2"}, 3
        ),  # the same bad trial again
        record("ok", {"config_hash": "h", "job_dir": "/s/a/3"}, 4, "FINISHED"),  # sampled twice
        record("ok", {"config_hash": "h", "job_dir": "/s/b/1"}, 5, "FINISHED"),  # a resumption, elsewhere
    ]
    keys = job_keys(runs_)
    assert keys[0] != keys[2] and keys[1] != keys[3]  # four trials, four jobs
    assert keys[4] == keys[1]  # the resumed job replaces its earlier run
    rows = [
        Row(
            name=r.name, status=r.status, config={}, metrics={"step/p50_ms": 1.0}, config_hash=k, start_time=s
        )
        for s, (r, k) in enumerate(zip(runs_[:4], keys[:4], strict=True))
    ]
    summary = summarize("s", rows)
    assert (summary.aggregates["jobs"], summary.aggregates["jobs_failed"]) == (4, 2)


def test_the_summary_shows_each_swept_key_whole_beside_a_bad_job():
    keys = ["trainer.batch_size", "trainer.optimizer.fused"]
    base = {"model": "vit_tiny", "mode": "default", "trainer.optimizer.fused": "true"}
    rows = [
        Row(
            name="a",
            status="FINISHED",
            config={**base, "trainer.batch_size": "2"},
            metrics={"step/p50_ms": 2.0},
        ),
        Row(
            name="b",
            status="FINISHED",
            config={**base, "trainer.batch_size": "4"},
            metrics={"step/p50_ms": 3.0},
        ),
        Row(name="bad input: precision=fp8", status="FAILED", config={}, metrics={}),
    ]
    summary = summarize("s", rows, varied=keys)
    assert "trainer.optimizer.fused=true" in constant_line(summary)  # a bad job's empty config varies nothing
    header, _ = table(summary, compact=True)
    assert header[0] == "batch_size"  # the terminal's column, by its last part


# The searches on the CPU, end to end: tests/test_throughput_search.py (fp8 left out, every swept key in
# the summary) and tests/test_sweeps.py (failed trials counted and said in the project's words).


# ------------------------------------------------------------------------------------ item 3
def test_a_named_sweep_without_multirun_is_refused_in_one_line(tmp_path: Path, store: str):
    proc = run_cli(["sweep=seed_grid"], tmp_path, store)
    assert proc.returncode == 2, output(proc)
    (line,) = one_line_errors(proc, "config error:")
    assert line.startswith("config error: sweep=seed_grid is a sweep (precision, compile.mode vary): add -m")
    assert runs(store) == [] and not (tmp_path / "run").exists()


def test_a_preset_wins_over_a_named_sweeps_model_and_the_sweep_still_varies():
    for order in (["sweep=seed_grid", "experiment=cpu_smoke"], ["experiment=cpu_smoke", "sweep=seed_grid"]):
        cfg = compose(order)
        assert (cfg.model.id, cfg.trainer.steps, cfg.sweep.name) == ("vit_tiny", 20, "seed_grid")
    lines = plan_lines(["sweep=seed_grid", "experiment=cpu_smoke"])
    assert lines[0].startswith("plan: 4 job(s)") and all("vit_tiny" in line for line in lines[1:5]), lines


def test_a_gpu_sized_job_on_the_cpu_is_said_in_one_line_before_it_starts(tmp_path: Path, store: str):
    # a server that is not there stops the job right after its checks: nothing of ViT-B/16 runs
    proc = run_cli(["model=vit_b16", "device=cpu"], tmp_path, "http://127.0.0.1:9")
    (note,) = [line for line in proc.stdout.splitlines() if line.startswith("note: ")]
    assert note.startswith(
        "note: device=cpu, so model=vit_b16 (batch 64 of 3x224x224 images, 100 steps, compiled)"
    )
    assert "experiment=cpu_smoke" in note and proc.returncode == 1, output(proc)
    calls = run_cli(
        ["model=vit_b16", "device=cpu", "scenario=inference", "scenario.batch_size=16"],
        tmp_path / "calls",
        "http://127.0.0.1:9",
    )
    (note,) = [line for line in calls.stdout.splitlines() if line.startswith("note: ")]
    # the scenario's batch, not the trainer's 64
    assert "(batch 16 of 3x224x224 images" in note, output(calls)
    small = run_cli([*TINY, "device=cpu"], tmp_path / "small", "http://127.0.0.1:9")
    assert "note: " not in small.stdout  # a CPU-sized job says nothing


def test_resuming_with_only_the_sweep_id_is_refused_with_the_sweeps_own_command(tmp_path: Path, store: str):
    tracker = Tracker(store, "compile-sweeps")
    command = "python -m pipeline.run -m model=vit_tiny compile.mode=eager trainer.seed=0,1 sweep.id=r1"
    tags = {
        "sweep_id": "r1",
        "sweep_parent": "true",
        "sweep_axes": '["trainer.seed=0,1"]',
        "command": command,
    }
    tracker.end_run(tracker.start_run("sweep r1", tags), "FINISHED")
    proc = run_cli(["sweep.id=r1", "sweep.resume=true"], tmp_path, store, multirun=True)
    assert proc.returncode == 2, output(proc)
    (line,) = one_line_errors(proc, "config error:")
    assert "sweep r1 varied trainer.seed, which this command does not" in line
    assert line.endswith(f"`{command} sweep.resume=true`") and "sweep.id=r1 sweep.id" not in line
    assert len(runs(store)) == 1  # no job was added to the old sweep


def test_the_local_gpus_launcher_on_a_machine_without_gpus_is_refused_in_one_line(tmp_path: Path, store: str):
    from pipeline.job.gpu_pool import pool_indices

    try:
        if pool_indices("all"):
            pytest.skip("this machine has GPUs")
    except Exception:
        pass
    proc = run_cli([*TINY, "hydra/launcher=local_gpus", "trainer.seed=0,1"], tmp_path, store, multirun=True)
    assert proc.returncode == 2, output(proc)
    (line,) = one_line_errors(proc, "config error:")
    assert line.startswith(
        "config error: hydra/launcher=local_gpus gives each job one of this machine's GPUs"
    )
    assert "Interrupted" not in proc.stdout + proc.stderr and runs(store) == []


# ------------------------------------------------------------------------------------ item 4
@pytest.mark.slow
def test_a_sweeps_terminal_holds_no_compile_logs_nor_launch_lines_unless_verbose(tmp_path: Path, store: str):
    breaky = [
        "model=graph_break_net",
        "trainer.steps=3",
        "trainer.warmup_steps=1",
        "compile.backend=aot_eager",
    ]
    proc = run_cli([*breaky, "trainer.seed=0,1"], tmp_path, store, multirun=True)
    assert proc.returncode == 0, output(proc)
    text = proc.stdout + proc.stderr
    assert not TORCH_LOG_LINE.search(text) and "Graph break" not in text, output(proc)
    assert "tensor(" not in text  # the model's print goes nowhere
    assert "Launching 2 jobs" not in text and not re.search(r"#\d+ : ", text)
    for job in ("0", "1"):  # kept whole in each job's log
        assert "Graph break" in (tmp_path / "multirun" / job / "worker.log").read_text()
    if not HAS_VERBOSE:
        return  # the key comes with issue 27's worker side
    loud = run_cli([*breaky, "trainer.seed=0,1", "verbose=true"], tmp_path / "loud", store, multirun=True)
    assert TORCH_LOG_LINE.search(loud.stdout) and "Launching 2 jobs" in loud.stdout + loud.stderr, output(
        loud
    )


# ------------------------------------------------------------------------------------ item 5
def test_help_says_what_the_tool_is_and_how_to_start():
    proc = run_help()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("compile-sweeps: measure torch.compile configurations")
    assert "experiment=cpu_smoke" in proc.stdout and "sweep: compile_search" in proc.stdout
    assert "is powered by Hydra" not in proc.stdout
    assert "docs/reference.md" in proc.stdout and (ROOT / "docs" / "reference.md").exists()  # every key
    # within 100 columns, every group's every option listed (Hydra's own listing: one line a group)
    assert max(len(line) for line in proc.stdout.splitlines()) <= 100, proc.stdout
    for option in ("resnet18", "xcit_small_12_p16_224", "cpu_smoke", "throughput_search"):
        assert re.search(rf"\b{option}\b", proc.stdout), option


def test_report_list_shows_each_sweeps_verdict_and_swept_keys(store: str):
    tracker = Tracker(store, "compile-sweeps")
    tags = {
        "sweep_id": "s1",
        "sweep_parent": "true",
        "sweep_axes": json.dumps([SEARCH_SPACE, "trainer.batch_size=choice(32, 64)"]),
        "sweep_name": "throughput_search",
        "verdict": "fastest",
        "fastest_config": "vit_tiny·amp·default·inductor",
        "jobs": "4",
        "jobs_failed": "1",
    }
    tracker.end_run(tracker.start_run("sweep s1", tags), "FINISHED")
    proc = run_report("--tracking-uri", store, "--list")
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    assert "verdict: fastest vit_tiny·amp·default·inductor" in line and "jobs=4 failed=1" in line
    assert "sweep=throughput_search  swept: compile.mode, trainer.batch_size" in line


def test_the_plan_lists_the_jobs_with_the_time_earlier_runs_of_them_took(tmp_path: Path, store: str):
    from pipeline.config.schema import to_config
    from pipeline.identity import config_hash

    overrides = ["model=vit_tiny", "compile.mode=eager,default", "precision=amp,fp32"]
    lines = plan_lines(overrides, store)
    assert (
        lines[0].startswith("plan: 4 job(s) for `python -m pipeline.run -m model=vit_tiny")
        and len(lines) == 6
    )
    assert all("unknown (no earlier run of this configuration)" in line for line in lines[1:5])
    assert lines[-1].startswith("estimate: unknown")
    tracker = Tracker(store, "compile-sweeps")  # one configuration ran before, twice
    done = config_hash(to_config(compose(["model=vit_tiny", "compile.mode=eager", "precision=amp"])))
    for wall in (30.0, 50.0):
        run_id = tracker.start_run("earlier", {"config_hash": done})
        tracker.log_metrics(run_id, {"job/wall_s": wall})
        tracker.end_run(run_id, "FINISHED")
    lines = plan_lines(overrides, store)
    (known,) = [line for line in lines if "earlier run" in line and "~" in line]
    assert "vit_tiny·amp·eager" in known and "(median of 2 earlier run(s))" in known
    assert lines[-1].startswith(f"estimate: ~{format_duration(50.0)} for the 1 job(s) run before, plus 3")
    proc = run_report("--plan", "-m", "compile.mode=fast")  # the run command's -m, pasted with it
    assert proc.returncode == 2 and "compile.mode='fast' is not allowed" in proc.stdout
    assert not (tmp_path / "outputs").exists()
