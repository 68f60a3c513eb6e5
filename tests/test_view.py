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
    name_width_for,
    publish_sweep_view,
    sweep_filter,
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
    """Text columns the runs' tags fill with rounded figures (MLflow shows a metric's every digit), in the
    jobs' own words: the verdict, the figure with its interval, the speedup with its, compile time, memory."""
    objective = STEP_TIME
    before = columns_for(objective)  # at the sweep's start: every candidate, both memory figures
    assert before == [
        "tags.`verdict`",
        "tags.`step p50 ms`",
        "tags.`speedup vs eager`",
        "tags.`compile s`",
        "tags.`peak reserved GiB`",
        "tags.`peak RSS GiB`",
        "tags.`noisy`",
    ]
    # At its end, only what some run has: a CPU sweep has no allocator peaks, nothing was noisy.
    tags = {"verdict", "step p50 ms", "compile s", "peak RSS GiB", "mode"}
    after = columns_for(objective, logged={"step/p50_ms"}, tags=tags)
    assert after == ["tags.`verdict`", "tags.`step p50 ms`", "tags.`compile s`", "tags.`peak RSS GiB`"]
    # A rate first, then the step time it is made of (the interval is the step time's, turned over).
    throughput = columns_for(choose([work(8), work(16)]))
    assert throughput[:3] == ["tags.`verdict`", "tags.`samples/s`", "tags.`step p50 ms`"]
    # Inference: a call's latency, its tail and the calls' throughput back to back; no step.
    latency = columns_for(objective_named("latency/p50_ms"), unit="call")
    assert latency[:5] == [
        "tags.`verdict`",
        "tags.`latency p50 ms`",
        "tags.`latency p99 ms`",
        "tags.`samples/s`",
        "tags.`speedup vs eager`",
    ]
    assert not [c for c in latency if "step" in c]
    # Generation, once its runs logged it: a decode step's figure, tokens/s and the first token.
    logged = {"step/p50_ms", "throughput/tokens_per_s", "generate/ttft_p50_ms"}
    tags = {"verdict", "decode step p50 ms", "tokens/s", "first token p50 ms", "speedup vs eager"}
    generate = columns_for(STEP_TIME, unit="decode step", logged=logged, tags=tags)
    assert generate == [
        "tags.`verdict`",
        "tags.`decode step p50 ms`",
        "tags.`tokens/s`",
        "tags.`first token p50 ms`",
        "tags.`speedup vs eager`",
    ]


def test_a_jobs_tags_show_its_figures_rounded_with_their_intervals():
    """What the view's columns show: the issue's cells read `1338.3978447866052`, `1.302892850998...`."""
    from pipeline.job.outcome import shown_tags

    metrics = {
        "step/p50_ms": 1338.3978447866052,
        "step/p50_ci95_low_ms": 1290.2,
        "step/p50_ci95_high_ms": 1391.7,
        "throughput/samples_per_s": 47.82,
        "speedup/vs_eager": 1.302892850998,
        "speedup/ci95_low": 1.21,
        "speedup/ci95_high": 1.4,
        "compile/total_s": 16.9012,
        "memory/cpu_rss_peak_gib": 0.0009293844831171978,
    }
    assert shown_tags(metrics) == {
        "step p50 ms": "1340 [1290, 1390]",
        "samples/s": "47.8 [46.0, 49.6]",
        "speedup vs eager": "1.30x [1.21, 1.40]",
        "compile s": "16.9",
        "peak RSS GiB": "0.000929",
    }
    called = {"step/p50_ms": 3.2, "latency/p50_ms": 4.498, "latency/p99_ms": 6.2341, "speedup/vs_eager": 1.3}
    assert set(shown_tags(called, "call")) == {
        "back-to-back call p50 ms",
        "latency p50 ms",
        "latency p99 ms",
        "speedup vs eager",
    }


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
    # Sorted by the figure (its metric, every digit), shown rounded (its tag).
    assert "metrics.`step/p50_ms`" not in state["selectedColumns"]
    # At 1440 px the answer is in view beside MLflow's sidebar (~230 px): the names, Created, the
    # verdict, the figure and the speedup with their intervals, the compile time.
    answer = state["columnOrder"][: state["columnOrder"].index("tags.`compile s`") + 1]
    assert 230 + sum(state["columnWidths"][c] for c in answer) <= 1440
    # The chart view: one section of a handful of charts, the figure first; every other metric's chart
    # is there deleted (MLflow adds one for each metric that has none).
    assert state["isAccordionReordered"] is True
    (section,) = state["compareRunSections"]
    assert section["isReordered"] and section["name"].startswith("the answer")
    charts = [c for c in state["compareRunCharts"] if not c["deleted"]]
    assert [c["metricKey"] for c in charts] == [
        "step/p50_ms",
        "speedup/vs_eager",
        "compile/total_s",
        "memory/peak_reserved_gib",
        "curve/step_ms",
    ]
    assert all(c["metricSectionId"] == section["uuid"] for c in charts)
    hidden = {c["metricKey"] for c in state["compareRunCharts"] if c["deleted"]}
    assert "step/p90_ms" in hidden and "curve/eager_step_ms" in hidden and "step/p50_ms" not in hidden
    # Compiled and eager per-unit times on one line chart.
    (line,) = [c for c in charts if c["type"] == "LINE"]
    assert line["selectedMetricKeys"] == ["curve/step_ms", "curve/eager_step_ms"]
    assert line["uuid"] == "autogen-curve/step_ms" and line["xAxisKey"] == "step"


def test_odd_sweep_ids_make_safe_view_ids_and_quoted_filters():
    view = sweep_view(sweep_id="my sweep/it's", label="x", objective=STEP_TIME)
    assert view.view_id == "sweep-my_20_sweep_2f_it_27_s"  # one per sweep id (tests/test_sweep_faults.py)
    assert view.search_filter == 'tags.sweep_id = "my sweep/it\'s"'
    assert sweep_filter("plain") == "tags.sweep_id = 'plain'"
    with pytest.raises(ValueError, match="cannot express"):
        sweep_filter("""a'b"c""")


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
    assert "tags.`peak reserved GiB`" in state["selectedColumns"]

    runs = [
        run({"step/p50_ms": 3.0, "memory/cpu_rss_peak_gib": 0.4}, {"noisy": "true", "peak RSS GiB": "0.4"}),
        run({"step/p50_ms": 2.0}, {"step p50 ms": "2.00 [1.98, 2.02]"}),
    ]
    publish_sweep_view(tracker, sweep_id="s1", label="sweep a", objective=objective, runs=runs)
    state = json.loads(json.loads(tracker.experiment_tags()[VIEW_TAG_PREFIX + "sweep-s1"])["state"])
    assert state["selectedColumns"] == ["tags.`step p50 ms`", "tags.`peak RSS GiB`", "tags.`noisy`"]
    shown = [c["metricKey"] for c in state["compareRunCharts"] if not c["deleted"]]
    assert shown == ["step/p50_ms", "memory/cpu_rss_peak_gib"]
    # The sweep's parent (its verdict), looked up in the store: the verdict is the first column.
    tracker.start_run("sweep a", {"sweep_id": "s1", "sweep_parent": "true", "verdict": "inconclusive"})
    publish_sweep_view(tracker, sweep_id="s1", label="sweep a", objective=objective, runs=runs)
    state = json.loads(json.loads(tracker.experiment_tags()[VIEW_TAG_PREFIX + "sweep-s1"])["state"])
    assert state["selectedColumns"][:2] == ["tags.`verdict`", "tags.`step p50 ms`"]


def test_the_winner_is_marked_on_its_row_and_the_description_leads_with_the_answer(tmp_path: Path):
    """At the sweep's end each job's row says the verdict (the winner `★ fastest`), and the experiment's
    description, which MLflow shows above every page of the experiment, opens with the answer in one line;
    a description a user wrote is kept."""
    from pipeline.sweep.summary import Row, summarize
    from pipeline.sweep.view import ANSWER_TAG, answer_line
    from pipeline.tracking.client import DESCRIPTION_TAG

    tracker = Tracker(sqlite_uri(tmp_path / "mlflow.db"), "views")
    parent = tracker.start_run("sweep s1", {"sweep_id": "s1", "sweep_parent": "true"})
    rows = []
    for mode, p50, speedup in (("eager", 30.1, None), ("default", 10.392, 2.8987)):
        metrics = {
            "step/p50_ms": p50,
            "step/p50_ci95_low_ms": p50 - 0.04,
            "step/p50_ci95_high_ms": p50 + 0.04,
        }
        if speedup:
            metrics |= {"speedup/vs_eager": speedup, "speedup/ci95_low": 2.87, "speedup/ci95_high": 2.92}
            metrics |= {"compile/total_s": 64.71}
        tags = {"sweep_id": "s1", "mode": mode, "model": "vit_tiny", "precision": "amp"}
        run_id = tracker.start_run(f"vit_tiny·amp·{mode}", tags, parent_run_id=parent)
        tracker.end_run(run_id, "FINISHED")
        config = {k: tags[k] for k in ("mode", "model", "precision")}
        rows.append(
            Row(
                name=f"vit_tiny·amp·{mode}",
                status="FINISHED",
                config=config,
                metrics=metrics,
                work=work(2),
                run_id=run_id,
                config_hash=mode,
            )
        )
    summary = summarize("s1", rows)
    assert answer_line(summary) == (
        "fastest: default: step 10.39 ms [10.35, 10.43], 2.90x vs eager [2.87, 2.92], compile 64.7 s"
    )
    publish_sweep_view(
        tracker,
        sweep_id="s1",
        label="sweep s1",
        objective=summary.objective,
        runs=tracker.sweep_children("s1"),
        summary=summary,
    )
    marks = {run.name: run.tags.get("verdict") for run in tracker.sweep_children("s1")}
    assert marks == {"vit_tiny·amp·default": "★ fastest", "vit_tiny·amp·eager": "slower"}
    description = tracker.experiment_tags()[DESCRIPTION_TAG]
    assert description.startswith(answer_line(summary) + " (sweep s1: the latest sweep; [its runs ranked](#/")
    tracker.set_experiment_tag(DESCRIPTION_TAG, "mine")  # a user's own
    publish_sweep_view(
        tracker, sweep_id="s1", label="sweep s1", objective=summary.objective, runs=[], summary=summary
    )
    assert tracker.experiment_tags()[DESCRIPTION_TAG] == "mine" and ANSWER_TAG in tracker.experiment_tags()


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
    from pipeline.measure.objective import choose
    from pipeline.sweep.state import planned_work
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
            assert choose(planned_work(cfg)).metric == metric, overrides  # as the sweep's start does


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
