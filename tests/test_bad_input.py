"""Bad input through the real CLI: one line naming the key, the value and what is allowed, exit 2,
before anything starts (no run folder, no MLflow run, no process): typos behind `+`, values that cannot
work, limits from the host's cores (tested just over them), keys removed with `~`, unquoted unicode,
control characters, and a config file that is not YAML."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.job.preflight import DATALOADER_WORKERS_PER_CORE, host_cores
from tests.conftest import TINY, one_line_errors, output, run_cli, runs

EAGER = [*TINY, "compile.mode=eager"]
CORES = host_cores()


@pytest.mark.parametrize(
    "overrides, starts",
    [
        (["+devcie=cpu"], "devcie='cpu' is not allowed: not a config key (did you mean device?)"),
        (
            ["+trainer.stepz=3"],
            "trainer.stepz=3 is not allowed: not a config key (did you mean trainer.steps?)",
        ),
        (["+trainer.optimizer.lrr=0.1"], "trainer.optimizer.lrr=0.1 is not allowed: not a config key"),
        (["trainer.steps=10000001"], "trainer.steps=10000001 is not allowed: must be <= 10,000,000"),
        (["trainer.seed=4294967296"], "trainer.seed=4294967296 is not allowed: must be in [0, 4294967295]"),
        (["trainer.timeout_s=inf"], "trainer.timeout_s=inf is not allowed: must be a finite number"),
        (["~trainer.steps"], "~trainer.steps: a key of the schema cannot be removed"),
        (
            ["sweep.objective=step/count"],  # a count with no better side: nothing to rank by
            "sweep.objective='step/count' is not allowed: a metric with a better side, such as step/p50_ms",
        ),
        (["model.id=é"], "cannot parse the override: LexerNoViableAltException: model.id=é: quote a value"),
        (["model.id=''"], "model.id='' is not allowed: a non-empty label"),
        (
            ["model.id='a\x1b[31mb'"],
            "model.id='a\\x1b[31mb' is not allowed: a value without control characters",
        ),
        (
            ["parallel=ddp", "device=cpu", f"parallel.nproc={CORES + 1}"],
            f"parallel.nproc={CORES + 1} is not allowed: at most {CORES} on the CPU",
        ),
        (
            ["data.loader=true", f"data.num_workers={DATALOADER_WORKERS_PER_CORE * CORES + 1}"],
            f"data.num_workers={DATALOADER_WORKERS_PER_CORE * CORES + 1} is not allowed: at most "
            f"{DATALOADER_WORKERS_PER_CORE * CORES}",
        ),
    ],
)
def test_bad_input_is_one_line_before_anything_starts(
    tmp_path: Path, store: str, overrides: list[str], starts: str
):
    proc = run_cli([*EAGER, *overrides], tmp_path, store)
    assert proc.returncode == 2, output(proc)
    (line,) = one_line_errors(proc, "config error:")
    assert line.startswith(f"config error: {starts}"), line
    assert "\x1b" not in proc.stdout + proc.stderr
    assert not (tmp_path / "run").exists() and runs(store) == []  # no folder, no run


def test_limits_just_within_the_host_pass_the_checks():
    """The limits' own edge: the largest values they allow are accepted (checked, not run)."""
    from pipeline.job.preflight import validate
    from tests.conftest import compose

    validate(compose([*EAGER, "parallel=ddp", "device=cpu", f"parallel.nproc={max(CORES, 2)}"]))
    validate(compose([*EAGER, "data.loader=true", f"data.num_workers={DATALOADER_WORKERS_PER_CORE * CORES}"]))
    validate(
        compose([*EAGER, "trainer.steps=10000000", "trainer.seed=4294967295", "+model.kwargs.qkv_bias=true"])
    )


def test_a_config_file_that_is_not_yaml_is_one_line_and_a_sweep_of_bad_jobs_never_starts(
    tmp_path: Path, store: str
):
    """A group option whose file is not YAML, selected in a run or in any job of a sweep; a sweep whose
    every job is bad (a host limit, a `+` typo) or whose id MLflow cannot search for: refused before the
    sweep's folder or parent run exist."""
    conf = tmp_path / "conf" / "model"
    conf.mkdir(parents=True)
    (conf / "broken.yaml").write_text("id: broken\nname: [unclosed\n  batch_size: 2\n")
    where = f"{conf / 'broken.yaml'}, line 3, column 13 is not valid YAML: expected ',' or ']', but got ':'"
    for multirun, model in ((False, "model=broken"), (True, "model=vit_tiny,broken")):
        proc = run_cli(
            ["--config-dir", str(tmp_path / "conf"), *EAGER, model], tmp_path, store, multirun=multirun
        )
        assert proc.returncode == 2, output(proc)
        (line,) = one_line_errors(proc, "config error:")
        assert line == f"config error: {where}", line
    too_many = ["parallel=ddp", "device=cpu", f"parallel.nproc={CORES + 1}", "trainer.seed=0,1"]
    # parallel.nproc left to its default (one rank per GPU; 2 on the CPU): the sweep's start resolves it first
    too_many_workers = [
        "parallel=fsdp",
        "device=cpu",
        "data.loader=true",
        f"data.num_workers={2 * CORES + 1}",
    ]
    # an id MLflow's search cannot match (both quote characters): the view and a resume could not find it
    odd_id = ["sweep.id='a\"b\\'c'", "trainer.seed=0,1"]
    for bad in (
        too_many,
        [*too_many_workers, "trainer.seed=0,1"],
        ["+trainer.stepz=3", "trainer.seed=0,1"],
        odd_id,
    ):
        proc = run_cli([*EAGER, *bad], tmp_path, store, multirun=True)
        assert proc.returncode == 2, output(proc)
        (line,) = one_line_errors(proc, "config error:")
        assert bad[-2].lstrip("+").split("=")[0] in line, line
    assert not (tmp_path / "multirun").exists() and not (tmp_path / "run").exists()
    assert runs(store) == []
