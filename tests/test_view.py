"""The sweep's saved view of the runs table (pipeline/sweep/view.py): what it ranks by, which columns it
shows, and how it is stored in a real MLflow store. tests/test_ui.py opens one in the real UI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.measure.objective import STEP_TIME, Work, choose, objective_named
from pipeline.sweep.view import (
    KEEP_VIEWS,
    VIEW_TAG_PREFIX,
    columns_for,
    filter_literal,
    name_width_for,
    publish_sweep_view,
    sweep_view,
)
from pipeline.tracking import RunRecord, Tracker
from tests.conftest import sqlite_uri


def work(samples: float, tokens: float | None = None) -> Work:
    return Work(unit="training step", samples=samples, tokens=tokens)


def test_the_objective_is_step_time_unless_the_work_per_unit_differs_or_the_sweep_names_one():
    step = choose([work(64), work(64)])  # e.g. compile.mode=eager,default precision=amp,fp32
    assert (step.metric, step.ascending) == ("step/p50_ms", True)
    assert step.interval == ("step/p50_ci95_low_ms", "step/p50_ci95_high_ms")
    batch = choose([work(32), work(64)])  # trainer.batch_size=32,64
    assert (batch.metric, batch.ascending, batch.interval) == ("throughput/samples_per_s", False, None)
    tokens = choose([work(8, 8 * 128), work(16, 16 * 128)])  # token models: tokens/s
    assert tokens.metric == "throughput/tokens_per_s"
    named = choose([work(32), work(64)], configured="compile/total_s")
    assert (named.metric, named.ascending) == ("compile/total_s", True)
    assert not choose([], configured="speedup/vs_eager").ascending


def test_the_columns_answer_the_verdict_the_figure_and_the_speedup_with_their_intervals_then_the_cost():
    objective = STEP_TIME
    before = columns_for(objective)  # at the sweep's start: every candidate, both memory figures
    assert before == [
        "tags.`verdict`",
        "metrics.`step/p50_ms`",
        "metrics.`step/p50_ci95_low_ms`",
        "metrics.`step/p50_ci95_high_ms`",
        "metrics.`speedup/vs_eager`",
        "metrics.`speedup/ci95_low`",
        "metrics.`speedup/ci95_high`",
        "metrics.`compile/total_s`",
        "metrics.`memory/peak_reserved_gib`",
        "metrics.`memory/cpu_rss_peak_gib`",
        "metrics.`diagnose/graph_breaks`",
        "tags.`noisy`",
        "tags.`fastest_config`",
    ]
    # At its end, only what some run has: a CPU sweep has no allocator peaks, nothing was noisy.
    logged = {"step/p50_ms", "step/p50_ci95_low_ms", "step/p50_ci95_high_ms", "memory/cpu_rss_peak_gib"}
    after = columns_for(objective, logged=logged, tags={"mode", "model", "verdict"})
    assert after == [
        "tags.`verdict`",
        "metrics.`step/p50_ms`",
        "metrics.`step/p50_ci95_low_ms`",
        "metrics.`step/p50_ci95_high_ms`",
        "metrics.`memory/cpu_rss_peak_gib`",
    ]
    # A rate's interval is its latency's turned over: the latency and its interval follow it.
    throughput = columns_for(choose([work(8), work(16)]))
    assert throughput[:5] == [
        "tags.`verdict`",
        "metrics.`throughput/samples_per_s`",
        "metrics.`step/p50_ms`",
        "metrics.`step/p50_ci95_low_ms`",
        "metrics.`step/p50_ci95_high_ms`",
    ]
    # Inference is judged on a request's latency, with its own interval; the back-to-back step time follows.
    latency = columns_for(objective_named("latency/p50_ms"))
    assert latency[1:4] == [
        "metrics.`latency/p50_ms`",
        "metrics.`latency/p50_ci95_low_ms`",
        "metrics.`latency/p50_ci95_high_ms`",
    ]
    assert latency.index("metrics.`step/p50_ms`") > latency.index("metrics.`speedup/ci95_high`")


def test_the_names_column_fits_the_runs_names_up_to_a_cap():
    """MLflow 3.17 writes a run's name at ~5.2 px a character after a 32 px dot (measured in Chromium)."""
    assert name_width_for([]) == 200
    assert name_width_for(["vit_tiny·amp·eager"]) == 200  # the default already holds it
    long = "llama_tiny·bf16·reduce-overhead·inductor·step·generate"
    assert 5.2 * len(long) + 32 < name_width_for([long, "x"]) <= 400  # the whole of the longest
    assert name_width_for(["x" * 200]) == 400  # the figures stay on a laptop's screen


def test_a_sweeps_label_says_its_scenario_its_models_and_what_it_varies():
    """Two sweeps over the same axes of different scenarios or models are told apart by their names
    (the parent run's and the view's: pipeline/sweep/callbacks.py names them with this label)."""
    from pipeline.identity import sweep_label
    from tests.conftest import compose

    modes = ["compile.mode=eager,default,reduce-overhead"]
    train = sweep_label(compose(["model=vit_tiny"]), modes, "s1")
    generate = sweep_label(compose(["scenario=generate", "model=llama_tiny"]), modes, "s2")
    assert train == "train vit_tiny: mode=eager,default,reduce-overhead"
    assert generate == "generate llama_tiny: mode=eager,default,reduce-overhead"
    swept = sweep_label(compose([]), ["model=resnet50,vit_b16", "precision=amp,fp32"], "s3")
    assert swept == "train: model=resnet50,vit_b16 precision=amp,fp32"  # a swept model is its axis
    named = sweep_label(
        compose(["sweep=compile_search", "model=resnet50"]), ["compile.mode=choice(a,b)"], "s4"
    )
    assert named == "compile_search: train resnet50"
    assert sweep_label(compose(["model=vit_tiny"]), [], "s5") == "train vit_tiny s5"  # nothing varied
    ambiguous = sweep_label(compose(["model=vit_tiny"]), ["trainer.seed=0,1", "data.seed=0,1"], "s6")
    assert ambiguous == "train vit_tiny: trainer.seed=0,1 data.seed=0,1"  # keys ending alike stay whole


def test_a_view_is_the_json_mlflow_3_17_reads():
    view = sweep_view(sweep_id="20261123-1200-ab12", label="sweep mode=eager,default", objective=STEP_TIME)
    assert view.tag_key == "mlflow.sharedViewState.sweep-20261123-1200-ab12"
    envelope = json.loads(view.tag_value(now_ms=1_700_000_000_000))
    assert envelope["name"] == "sweep mode=eager,default (20261123-1200-ab12)"
    assert envelope["createdAt"] == envelope["updatedAt"] == 1_700_000_000_000
    state = json.loads(envelope["state"])  # a JSON string inside the JSON value
    assert state["searchFilter"] == "tags.sweep_id = '20261123-1200-ab12'"
    assert (state["orderByKey"], state["orderByAsc"]) == ("metrics.`step/p50_ms`", True)
    assert (state["startTime"], state["lifecycleFilter"], state["modelVersionFilter"]) == (
        "ALL",
        "Active",
        "All Runs",
    )
    assert state["selectedColumns"] == view.columns
    # Widths apply to listed columns: the names, MLflow's Created column, then the view's.
    assert state["columnOrder"] == ["attributes.`Run Name`", "runDateAndNestInfo", *view.columns]
    assert set(state["columnWidths"]) == set(state["columnOrder"])
    # A header is never cut: wider than its text at ~6.5 px a character (measured in Chromium).
    for column, width in state["columnWidths"].items():
        if "`" in column:
            assert width >= 6.5 * len(column.split("`")[1]) + 24, column
    # At 1600 px the answer is in view beside MLflow's sidebar (~300 px): the names, Created, the
    # verdict, the objective and the speedup with their intervals.
    answer = state["columnOrder"][: state["columnOrder"].index("metrics.`speedup/ci95_high`") + 1]
    assert 300 + sum(state["columnWidths"][c] for c in answer) <= 1600
    # The chart view: sections by concern, most telling first (MLflow sorts them alphabetically unless
    # told the order is the user's), each opening with the charts of the table's metrics.
    assert state["isAccordionReordered"] is True
    sections = [s["name"] for s in state["compareRunSections"]]
    assert sections[0] == "step"  # the objective's
    assert (
        sections.index("speedup")
        < sections.index("compile")
        < sections.index("memory")
        < sections.index("curve")
    )
    assert all(s["isReordered"] and s["uuid"] == f"autogen-{s['name']}" for s in state["compareRunSections"])
    charts = state["compareRunCharts"]
    assert [c["metricKey"] for c in charts][:3] == ["step/p50_ms", "speedup/vs_eager", "compile/total_s"]
    assert not any("ci95" in c["metricKey"] for c in charts)  # the intervals are the table's, not charts
    bars = [c for c in charts if c["type"] == "BAR"]
    assert all(c["metricSectionId"] == f"autogen-{c['metricKey'].split('/')[0]}" for c in bars)
    # Compiled and eager per-unit times on one line chart; the eager curve's own chart left out.
    (line,) = [c for c in charts if c["type"] == "LINE" and not c["deleted"]]
    assert line["selectedMetricKeys"] == ["curve/step_ms", "curve/eager_step_ms"]
    assert line["uuid"] == "autogen-curve/step_ms" and line["xAxisKey"] == "step"
    assert [c["uuid"] for c in charts if c["deleted"]] == ["autogen-curve/eager_step_ms"]


def test_odd_sweep_ids_make_safe_view_ids_and_quoted_filters():
    view = sweep_view(sweep_id="my sweep/it's", label="x", objective=STEP_TIME)
    assert view.view_id == "sweep-my_20_sweep_2f_it_27_s"  # one per sweep id (tests/test_sweep_faults.py)
    assert view.search_filter == 'tags.sweep_id = "my sweep/it\'s"'
    assert filter_literal("plain") == "'plain'"
    with pytest.raises(ValueError, match="both quote"):
        filter_literal("""a'b"c""")


def run(metrics: dict[str, float], tags: dict[str, str]) -> RunRecord:
    return RunRecord(
        run_id="r",
        name="n",
        status="FINISHED",
        start_time_ms=0,
        end_time_ms=1,
        tags=tags,
        metrics=metrics,
        params={},
    )


def test_a_published_view_lands_in_the_experiment_and_fits_the_sweeps_runs(tmp_path: Path):
    tracker = Tracker(sqlite_uri(tmp_path / "mlflow.db"), "views")
    objective = STEP_TIME
    url = publish_sweep_view(tracker, sweep_id="s1", label="sweep a", objective=objective)
    assert url.startswith(
        f"http://127.0.0.1:5000/#/experiments/{tracker.experiment_id}/runs?viewStateShareKey=sweep-s1&"
    )
    state = json.loads(json.loads(tracker.experiment_tags()[VIEW_TAG_PREFIX + "sweep-s1"])["state"])
    assert "metrics.`memory/peak_reserved_gib`" in state["selectedColumns"]

    runs = [
        run({"step/p50_ms": 3.0, "memory/cpu_rss_peak_gib": 0.4}, {"noisy": "true"}),
        run({"step/p50_ms": 2.0}, {}),
    ]
    publish_sweep_view(tracker, sweep_id="s1", label="sweep a", objective=objective, runs=runs)
    state = json.loads(json.loads(tracker.experiment_tags()[VIEW_TAG_PREFIX + "sweep-s1"])["state"])
    assert state["selectedColumns"] == [
        "metrics.`step/p50_ms`",
        "metrics.`memory/cpu_rss_peak_gib`",
        "tags.`noisy`",
    ]
    assert [s["name"] for s in state["compareRunSections"]] == ["step", "memory"]
    # The sweep's parent (its verdict), looked up in the store: the verdict is the first column.
    tracker.start_run("sweep a", {"sweep_id": "s1", "sweep_parent": "true", "verdict": "inconclusive"})
    publish_sweep_view(tracker, sweep_id="s1", label="sweep a", objective=objective, runs=runs)
    state = json.loads(json.loads(tracker.experiment_tags()[VIEW_TAG_PREFIX + "sweep-s1"])["state"])
    assert state["selectedColumns"][:2] == ["tags.`verdict`", "metrics.`step/p50_ms`"]


def test_the_experiment_says_what_it_holds_and_opens_as_machine_learning(tmp_path: Path):
    """MLflow 3's experiment type (`mlflow.experimentKind`: runs, not GenAI traces) and a description
    that links the runs table, set once; a user's own are kept."""
    from pipeline.tracking.client import DESCRIPTION_TAG, EXPERIMENT_KIND

    tracker = Tracker(sqlite_uri(tmp_path / "mlflow.db"), "views")
    tags = tracker.experiment_tags()
    assert tags[EXPERIMENT_KIND[0]] == "custom_model_development"
    runs_table = f"#/experiments/{tracker.experiment_id}/runs?workflowType=machine_learning"
    assert f"]({runs_table})" in tags[DESCRIPTION_TAG]
    tracker.set_experiment_tag(DESCRIPTION_TAG, "mine")
    again = Tracker(sqlite_uri(tmp_path / "mlflow.db"), "views")
    assert again.experiment_tags()[DESCRIPTION_TAG] == "mine"


def test_only_this_projects_oldest_views_are_dropped(tmp_path: Path):
    tracker = Tracker(sqlite_uri(tmp_path / "mlflow.db"), "views")
    objective = STEP_TIME
    users_own = VIEW_TAG_PREFIX + "abc123"
    tracker.set_experiment_tag(
        users_own, json.dumps({"name": "mine", "createdAt": 1, "updatedAt": 1, "state": "{}"})
    )
    for i in range(KEEP_VIEWS):
        view = sweep_view(sweep_id=f"old{i}", label="old", objective=objective)
        tracker.set_experiment_tag(view.tag_key, view.tag_value(now_ms=1000 + i))
    publish_sweep_view(tracker, sweep_id="new", label="new", objective=objective)
    views = {k for k in tracker.experiment_tags() if k.startswith(VIEW_TAG_PREFIX)}
    assert VIEW_TAG_PREFIX + "sweep-new" in views and users_own in views
    assert VIEW_TAG_PREFIX + "sweep-old0" not in views  # the oldest of ours made room
    assert len(views) == KEEP_VIEWS + 1


def test_summary_and_view_rank_a_batch_size_sweep_by_the_same_objective(tmp_path: Path, store: str):
    """An inference sweep over `scenario.batch_size=1,4` (as conf/scenario/inference.yaml suggests): the
    jobs do different work per call, so the summary, the verdict and the UI's view all rank by throughput,
    read from the work each worker stated; the view printed at the sweep's start already does."""
    from tests.conftest import client, run_cli, runs

    args = [
        "scenario=inference",
        "model=vit_tiny",
        "scenario.batch_size=1,4",
        "trainer.steps=4",
        "trainer.warmup_steps=1",
        "compile.mode=eager",
    ]
    proc = run_cli(args, tmp_path, store, multirun=True)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    parent = next(r for r in runs(store) if r.data.tags.get("sweep_parent") == "true")
    assert parent.data.tags["objective"] == "throughput/samples_per_s", (
        proc.stdout[-4000:] + proc.stderr[-2000:]
    )
    summary = (tmp_path / "multirun" / "summary.md").read_text()
    assert "throughput, samples/s" in summary
    experiment = client(store).get_experiment(parent.info.experiment_id)
    key = f"mlflow.sharedViewState.sweep-{parent.data.tags['sweep_id']}"
    state = json.loads(json.loads(experiment.tags[key])["state"])
    assert (state["orderByKey"], state["orderByAsc"]) == ("metrics.`throughput/samples_per_s`", False)
    children = [r for r in runs(store) if r.data.tags.get("sweep_parent") != "true"]
    assert sorted(r.data.tags["samples_per_unit"] for r in children) == ["1", "4"]


def test_the_view_at_a_sweeps_start_ranks_by_the_planned_jobs_work():
    """Before any job ran, the objective comes from each planned job's composed config."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from pipeline.config.schema import register_configs
    from pipeline.sweep.state import planned_objective
    from tests.conftest import CONF

    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for overrides, metric in [
            (["scenario=inference", "scenario.batch_size=1,4"], "throughput/samples_per_s"),
            (["compile.mode=eager,default"], "step/p50_ms"),
            (["model=gpt2_tiny", "trainer.batch_size=2,4"], "throughput/tokens_per_s"),
        ]:
            cfg = hydra_compose("config", return_hydra_config=True)  # the sweep's master config
            cfg.hydra.overrides.task = overrides  # the sweep's axes, as the command line gave them
            assert planned_objective(cfg).metric == metric, overrides


def test_runs_that_sweep_inductor_presets_are_named_by_the_preset():
    """`inductor=choice(none, coordinate_descent)` sets compile.options: the runs' names say the preset
    (`inductor=coordinate_descent`), not the options' JSON (the H100 search's names read
    `options={"coordinate_descent_tuning": true}`)."""
    from pipeline.identity import run_name
    from pipeline.job.preflight import validate
    from tests.conftest import compose

    varied = ["compile.options", "trainer.batch_size"]
    tuned = run_name(validate(compose(["model=vit_tiny", "inductor=coordinate_descent"])), varied)
    plain = run_name(validate(compose(["model=vit_tiny", "inductor=none"])), varied)
    assert tuned.endswith("·inductor=coordinate_descent·batch_size=8"), tuned
    assert plain.endswith("·inductor=none·batch_size=8"), plain
    own = run_name(validate(compose(["model=vit_tiny", "+compile.options.max_autotune_gemm=true"])), varied)
    assert 'options={"max_autotune_gemm": true}' in own  # options no preset sets: as they are
