"""Issue 46, "the answer at a glance": figures rounded to what they support, the terminal that ends with
the answer (a sweep's own run at 80 columns: tests/test_scenarios.py), the sweep's ETA paced by like
jobs, and a newcomer's first mistakes each refused in one line before anything starts, naming what
works. The MLflow pages: tests/test_ui.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from pipeline.display import figure, first_few, with_interval
from pipeline.jobdir import RESULT
from pipeline.measure.objective import Work
from pipeline.status import FINISHED
from pipeline.sweep_context import SweepContext
from tests.conftest import (
    ROOT,
    TINY,
    one_line_errors,
    output,
    run_cli,
    run_help,
    run_report,
    runs,
    significant_digits,
)

EAGER = [*TINY, "compile.mode=eager"]
# A line that may run past the terminal's width: it holds a path or a URL (never cut).
PATH = re.compile(r"(^|\s)(/|\w+://)\S")


def ends_with_the_answer(stdout: str, width: int) -> None:
    """The sweep's output at `width` columns: the last 12 lines hold the ranked table (its figure, speedup
    and compile time) and the verdict; no line is wider than the terminal but one holding a path."""
    lines = stdout.splitlines()
    wide = [line for line in lines if len(line) > width and not PATH.search(line)]
    assert not wide, "\n".join(wide)
    tail = lines[-12:]
    header = next((i for i, line in enumerate(tail) if line.startswith("configuration ")), None)
    assert header is not None, "\n".join(tail)
    assert all(word in tail[header] for word in ("figure", "speedup", "compile s")), tail[header]
    assert any(line.startswith("verdict: ") for line in tail[header:]), "\n".join(tail)


# ------------------------------------------------------------------------------------ figures
def test_figures_are_rounded_to_what_their_interval_supports_and_never_past_four_digits():
    assert with_interval(184.18, 101.39, 259.15) == "184 [101, 259]"  # +-79 ms: whole milliseconds
    assert with_interval(10.392, 10.35, 10.43) == "10.39 [10.35, 10.43]"
    assert with_interval(1.0613, 1.0198, 1.0903) == "1.06 [1.02, 1.09]"
    assert with_interval(10.0, 9.9, 10.1) == "10.0 [9.9, 10.1]"  # its precision, trailing zero included
    assert with_interval(1338.4, 0.0, 1338.4, undetermined=True) == "1340 [undetermined]"
    # Without an interval: three significant digits, as the cells should have read.
    assert figure(1338.3978447866052) == "1340"
    assert figure(1.302892850998) == "1.3"
    assert figure(0.0009293844831171978) == "0.000929"
    assert figure(0.93) == "0.93" and figure(64.71) == "64.7"
    for text in ("184 [101, 259]", "10.39 [10.35, 10.43]", "0.000929", "1340", figure(123456.7)):
        assert all(significant_digits(n) <= 4 for n in re.findall(r"\d[\d.,]*", text)), text
    assert [significant_digits(t) for t in ("184", "0.000929", "10.00", "1340", "5")] == [3, 3, 4, 3, 1]


# ------------------------------------------------------------------------------------ the terminal
def test_a_list_too_long_for_a_line_names_its_first_few_and_counts_the_rest():
    assert first_few(["a", "b", "c"]) == "a, b, c"
    assert first_few(["a", "b", "c", "d", "e"]) == "a, b, c and 2 more"
    assert first_few(["a", "b", "c", "d", "e"], most=5) == "a, b, c, d, e"


def test_the_terminal_ends_with_the_ranked_table_and_the_verdict_at_80_columns():
    """The answer last and within 80 columns whatever the notes before it: the configurations by what
    sets them apart, the winner marked, its figure with its interval, the speedup and the compile time."""
    from pipeline.sweep.render import answer_lines, detail_lines
    from pipeline.sweep.summary import Row, summarize

    def job(name: str, mode: str, p50: float, half: float, **extra: float) -> Row:
        metrics = {
            "step/p50_ms": p50,
            "step/p50_ci95_low_ms": p50 - half,
            "step/p50_ci95_high_ms": p50 + half,
            "compile/total_s": 64.71 if mode != "eager" else 0.0,
            "memory/cpu_rss_peak_gib": 0.6812,
            **extra,
        }
        config = {"model": "vit_tiny", "precision": "amp", "mode": mode, "backend": "inductor"}
        work = Work(unit="training step", samples=2, tokens=None)
        return Row(name=name, status=FINISHED, config=config, metrics=metrics, work=work, config_hash=name)

    rows = [
        job("vit_tiny·amp·eager", "eager", 30.123, 0.31),
        job(
            "vit_tiny·amp·max-autotune-no-cudagraphs·inductor",
            "max-autotune-no-cudagraphs",
            10.392,
            0.04,
            **{"speedup/vs_eager": 2.8987, "speedup/ci95_low": 2.871, "speedup/ci95_high": 2.9234},
        ),
    ]
    summary = summarize("20261126-205757-cfbb", rows, varied=["compile.mode"])
    lines = answer_lines(summary, 80)
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    header = lines[1].split()
    assert header[:2] == ["configuration", "figure"] and "compile" in header, lines
    winner = next(line for line in lines if line.startswith("★ "))
    assert winner.split()[1:6] == ["max-autotune-no-cudagraphs", "10.39", "[10.35,", "10.43]", "2.90x"]
    assert "64.7" in winner
    assert lines[-1].startswith("  ") or lines[-1].startswith("verdict: ")
    verdict = " ".join(line.strip() for line in lines if not line.startswith(("★", " ", "configuration")))
    assert "verdict: fastest: vit_tiny·amp·max-autotune-no-cudagraphs·inductor ★" in verdict, lines
    assert all(len(line) <= 80 for line in detail_lines(summary) if len(line) > 80 and " " not in line)


def test_the_sweeps_eta_paces_the_jobs_left_by_the_ended_jobs_like_them(tmp_path: Path):
    """An eager job's minute says nothing of a compiled job's: no ETA until a compiled job has ended;
    then each job left counts as long as the ended jobs of its mode took."""
    from pipeline.job.progress import sweep_status

    sweep = SweepContext(
        sweep_id="s",
        parent_run_id="p",
        sweep_dir=str(tmp_path),
        tracking_uri="",
        experiment="e",
        job_modes=["eager", "eager", "default", "default"],
    )
    sweep.started_at = time.time() - 20
    sweep.save()

    def ended(job: int, wall_s: float) -> None:
        (tmp_path / str(job)).mkdir()
        result = {
            "status": FINISHED,
            "metrics": {"job/wall_s": wall_s},
            "info": {"worker_ended_at": time.time()},
        }
        (tmp_path / str(job) / RESULT).write_text(json.dumps(result))

    ended(0, 10.0)
    assert sweep_status(tmp_path, 4) == "sweep: 1/4 jobs done, 0 failed, ETA once a compiled job has ended"
    ended(1, 10.0)
    ended(2, 70.0)
    # 3 jobs in ~20 s since the start, a job at the pace of its wall times' mean (30 s): the compiled job left
    # weighs 70/30; eager-paced, it would read ~13 s.
    line = sweep_status(tmp_path, 4)
    eta = re.search(r"ETA (\d+)s$", line)
    assert line.startswith("sweep: 3/4 jobs done, 0 failed, ETA ") and eta and 14 <= int(eta[1]) <= 17, line


# ------------------------------------------------------------------------------------ first mistakes
def test_an_unknown_experiment_is_refused_in_one_line_naming_the_allowed_ones(tmp_path: Path, store: str):
    proc = run_cli(["experiment=cpu-smoke"], tmp_path, store)
    assert proc.returncode == 2, output(proc)
    (line,) = one_line_errors(proc, "config error:")
    assert line.startswith("config error: experiment=cpu-smoke is not an option of the `experiment` group: ")
    assert "did you mean experiment=cpu_smoke?" in line and "allowed values are cpu_smoke" in line
    assert runs(store) == [] and not (tmp_path / "run").exists()
    plan = run_report("--plan", "experiment=does_not_exist")
    assert plan.returncode == 2 and "experiment=does_not_exist is not an option" in plan.stdout, plan


def test_error_messages_never_mask_config_words_and_secrets_stay_masked(tmp_path: Path, store: str):
    """`key` in prose is a word (`not a config key: compile has mode`, Hydra's `use key=[...]`); a
    secret's value is masked wherever it is written."""
    from pipeline.redaction import redact_text

    typo = run_cli([*EAGER, "compile.mdoe=x"], tmp_path, store)
    (line,) = one_line_errors(typo, "config error:")
    assert "compile.mdoe is not a config key: compile has mode, backend" in line and "***" not in line
    ambiguous = run_cli([*EAGER, "trainer.seed=0,1"], tmp_path, store)
    (line,) = one_line_errors(ambiguous, "config error:")
    assert "use key=[value1,value2]" in line and "***" not in line
    assert typo.returncode == ambiguous.returncode == 2
    text = "+model.kwargs.key=abc1 api_key=abc2 KEY=abc3 db.password: abc4 hf_token=abc5 +token=abc6"
    assert not re.search(r"abc\d", redact_text(text)), redact_text(text)
    assert redact_text("not a config key: compile has mode") == "not a config key: compile has mode"


def test_a_timm_name_without_its_group_is_refused_naming_the_form_that_works(tmp_path: Path, store: str):
    proc = run_cli(["model=resnet18"], tmp_path, store)
    assert proc.returncode == 2, output(proc)
    (line,) = one_line_errors(proc, "config error:")
    assert "did you mean model=timm/resnet18?" in line and "model=hf/<name>" in line, line
    help_text = run_help().stdout
    assert "`model/timm: resnet18` is model=timm/resnet18" in help_text


def test_stores_that_cannot_work_are_refused_before_anything_starts(tmp_path: Path, store: str):
    """A plain path (MLflow's file store, in maintenance mode) names the sqlite file that works; a sqlite
    file in folders that do not exist outside the project makes no folder (`sqlite:////typo/dir/m.db`)."""
    plain = run_cli(EAGER, tmp_path, str(tmp_path / "mlruns"))
    assert plain.returncode == 2, output(plain)
    (line,) = one_line_errors(plain, "config error:")
    assert "a plain path is MLflow's file store" in line and f"sqlite:///{tmp_path}/mlruns/mlflow.db" in line
    typo = tmp_path / "typo" / "dir" / "m.db"
    for multirun in (False, True):
        proc = run_cli(
            [*EAGER, *(["trainer.seed=0,1"] if multirun else [])],
            tmp_path,
            f"sqlite:///{typo}",
            multirun=multirun,
        )
        assert proc.returncode == 2, output(proc)
        (line,) = one_line_errors(proc, "config error:")
        assert f"{tmp_path / 'typo'} does not exist" in line, line
    assert not (tmp_path / "typo").exists() and not (tmp_path / "run").exists()


SLURM_COMMANDS = {"sbatch", "srun", "salloc", "sinfo", "squeue", "scancel", "sacct", "scontrol"}


def path_without(shim: Path, hidden: set[str]) -> str:
    """A PATH of one folder holding every command on PATH but `hidden` (where SLURM's commands share
    /usr/bin with make and bash, leaving out their folder would leave out those too)."""
    shim.mkdir(parents=True)
    for folder in map(Path, os.environ["PATH"].split(os.pathsep)):
        for command in sorted(folder.iterdir()) if folder.is_dir() else []:
            if command.name not in hidden and not (shim / command.name).exists():
                (shim / command.name).symlink_to(command)
    return str(shim)


def test_make_sweep_without_slurm_is_one_line_and_leaves_no_run(tmp_path: Path, store: str):
    """`make sweep` (hydra/launcher=slurm) where there is no SLURM: one line naming what works, exit
    non-zero, nothing in MLflow; the CLI itself refuses the launcher the same way."""
    path = path_without(tmp_path / "bin", SLURM_COMMANDS)
    env = {**os.environ, "PATH": path, "MLFLOW_TRACKING_URI": store}
    make = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "sweep", "ARGS=compile.mode=eager,default"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert make.returncode != 0, output(make)
    own = [  # make's own `make: ***` (`make[1]: ***` under another make, as in `make test`) aside
        line
        for line in (make.stdout + make.stderr).splitlines()
        if not re.match(r"make(\[\d+\])?: \*\*\*", line)
    ]
    assert len(own) == 1 and own[0].startswith("make sweep: no SLURM here"), own
    assert "pipeline.run -m compile.mode=eager,default" in own[0]
    proc = run_cli(
        [*EAGER, "hydra/launcher=slurm", "trainer.seed=0,1"],
        tmp_path,
        store,
        multirun=True,
        env={"PATH": path},
    )
    assert proc.returncode == 2, output(proc)
    (line,) = one_line_errors(proc, "config error:")
    assert line.startswith(
        "config error: hydra/launcher=slurm submits the jobs to SLURM, and there is no SLURM here"
    )
    assert runs(store) == [] and not (tmp_path / "multirun").exists()


@pytest.mark.slow  # a minute on 2 cores: two jobs started at once, then stopped
def test_an_interrupted_local_gpus_sweep_ends_in_its_one_line_without_submitits_traceback(
    tmp_path: Path, store: str
):
    """hydra/launcher=local_gpus, SIGTERM to the sweep while its jobs run (on 2 GPUs, one printed
    `KeyboardInterrupt` traceback of submitit's local controller per job under the sweep's one-line hint):
    the hint alone, every run closed KILLED, nothing left running."""
    import signal

    from pipeline.jobdir import RUN_ID
    from tests.conftest import finish, popen_cli, stop_group

    args = [*EAGER, "device=cpu", "gpu_pool=[0,1]", "hydra/launcher=local_gpus", "trainer.steps=100000"]
    env = {**os.environ, "PIPELINE_GPU_LOCK_DIR": str(tmp_path / "locks")}
    proc = popen_cli(
        [*args, "trainer.seed=0,1"], tmp_path, store, multirun=True, env=env, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 300
        while len(list((tmp_path / "multirun").glob(f"*/{RUN_ID}"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(list((tmp_path / "multirun").glob(f"*/{RUN_ID}"))) == 2, "the jobs never opened their runs"
        proc.send_signal(signal.SIGTERM)
        done = finish(proc, timeout=300)
    finally:
        stop_group(proc)
    assert done.returncode != 0 and "Traceback" not in done.stdout, output(done)
    assert done.stdout.strip().splitlines()[-1].startswith("interrupted by SIGTERM; "), output(done)
    assert {r.info.status for r in runs(store)} == {"KILLED"}


def test_an_inference_sweep_says_when_its_eager_job_and_a_paired_copy_disagree():
    """The issue's inference sweep: a compiled call at 44.98 ms beside the eager job's 14.06 ms, and
    `5.83x vs eager` (its paired copy read 262 ms): the summary says why the two eager figures differ."""
    from pipeline.sweep.summary import Row, summarize

    def call(name: str, mode: str, latency: float, **extra: float) -> Row:
        metrics = {
            "step/p50_ms": latency,
            "latency/p50_ms": latency,
            "latency/p50_ci95_low_ms": latency * 0.99,
            "latency/p50_ci95_high_ms": latency * 1.01,
            **extra,
        }
        work = Work(unit="forward call", samples=2, tokens=None, objective="latency/p50_ms")
        config = {"model": "vit_tiny", "mode": mode, "scenario": "x"}
        return Row(name=name, status=FINISHED, config=config, metrics=metrics, work=work, config_hash=name)

    paired = {"eager/latency_p50_ms": 262.0, "eager/latency_p50_ci95_low_ms": 255.0}
    paired |= {"eager/latency_p50_ci95_high_ms": 270.0, "speedup/vs_eager": 5.83}
    summary = summarize("s", [call("eager", "eager", 14.06), call("default", "default", 44.98, **paired)])
    (note,) = [n for n in summary.notes if "paired eager baseline reads" in n]
    assert note.startswith(
        "the eager job eager reads 14.1 ms, but default's paired eager baseline reads 262 ms"
    )
