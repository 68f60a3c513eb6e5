"""Sweep-level faults of issue 28, through the real CLI and store: two sweeps whose ids differ only in
characters a view id cannot hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.sweep.view import VIEW_TAG_PREFIX, view_id_for
from tests.conftest import TINY, client, output, run_cli, runs

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
