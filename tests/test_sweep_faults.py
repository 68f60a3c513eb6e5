"""Sweep-level faults of issue 28, through the real CLI and store: two sweeps whose ids differ only in
characters a view id cannot hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.sweep.view import VIEW_TAG_PREFIX, view_id_for
from tests.conftest import TINY, client, one_line_errors, output, run_cli, run_report, runs

EAGER = [*TINY, "compile.mode=eager"]


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
