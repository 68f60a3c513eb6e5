"""Inference and generation scenarios: tiny models through the real CLI into MLflow, output and token
parity against eager, the dynamic-batch case, and bad combinations refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config.errors import ConfigError
from pipeline.job.outcome import ms
from pipeline.job.preflight import validate
from pipeline.measure.registry import estimate, unregistered
from tests.conftest import compose, output, run_cli, runs
from tests.test_glance import ends_with_the_answer

INFERENCE = [
    "scenario=inference",
    "model=vit_tiny",
    "scenario.batch_size=2",
    "trainer.steps=5",
    "trainer.warmup_steps=2",
    "compile.backend=aot_eager",
]
NARROW = {"COLUMNS": "80"}  # a terminal 80 columns wide
GENERATE = [
    "scenario=generate",
    "model=llama_tiny",
    "scenario.prompt_len=8",
    "scenario.new_tokens=6",
    "scenario.parity_tokens=6",
    "trainer.steps=3",
    "trainer.warmup_steps=1",
    "compile.backend=aot_eager",
]


def children(store: str) -> list:
    return [r for r in runs(store) if r.data.tags.get("sweep_parent") != "true"]


def test_an_inference_sweep_over_modes_gives_latency_speedup_and_output_parity(tmp_path: Path, store: str):
    proc = run_cli([*INFERENCE, "compile.mode=eager,default"], tmp_path, store, multirun=True, env=NARROW)
    assert proc.returncode == 0, output(proc)
    ends_with_the_answer(proc.stdout, 80)  # issue 46: the answer last, within 80 columns
    assert "call latency " in proc.stdout and " step " not in proc.stdout  # its own words
    kids = {r.data.tags["mode"]: r for r in children(store)}
    assert set(kids) == {"eager", "default"}
    compiled, eager = kids["default"], kids["eager"]
    assert compiled.info.run_name == "vit_tiny·amp·default·aot_eager·inference"
    assert compiled.data.tags["scenario"] == "inference"
    m = compiled.data.metrics
    assert m["step/p10_ms"] <= m["step/p50_ms"] <= m["step/p90_ms"] <= m["step/p99_ms"]
    assert m["throughput/samples_per_s"] == pytest.approx(2 * 1000 / m["step/p50_ms"])
    assert m["parity/ok"] == 1.0 and m["parity/top1_agree"] == 1.0 and m["parity/logits_max_abs"] < 1e-3
    assert "speedup/vs_eager" in m and "compile/total_s" in m and "loss/first" not in m
    assert m["diagnose/recompiles_after_warmup"] == 0
    assert not unregistered(m) and not unregistered(eager.data.metrics)
    assert "torch.inference_mode" in compiled.data.tags["mlflow.note.content"]  # says how, in words
    # Latency as a request sees it (each call synchronized, its launch included), beside the back-to-back
    # figure: the speedup and the verdict are judged on latency, the throughput on calls back to back.
    for prefix in ("latency/", "eager/latency_"):
        assert m[f"{prefix}p50_ms"] > 0 and m[f"{prefix}p90_ms"] >= m[f"{prefix}p50_ms"]
    assert m["latency/p99_ms"] >= m["latency/p50_ms"] and "latency/p50_ms" in eager.data.metrics
    # the paired speedup is of the latency rounds' pairs (pipeline/measure/sequential.py): inside its own
    # interval and the pairs' range, on the latency side of the eager/compiled medians
    assert m["speedup/ci95_low"] <= m["speedup/vs_eager"] <= m["speedup/ci95_high"]
    assert m["speedup/round_min"] <= m["speedup/vs_eager"] <= m["speedup/round_max"]
    assert m["speedup/back_to_back_vs_eager"] == pytest.approx(m["eager/p50_ms"] / m["step/p50_ms"])
    assert compiled.data.tags["objective"] == "latency/p50_ms"
    for run in (compiled, eager):  # inference on a CPU: no backward, no loss, no allocator
        assert_only_what_applies(run.data.metrics, run.data.params, scenario_trains=False)
    assert not {"compile/cache_hits", "compile/inductor_s"} & set(m)  # aot_eager: no inductor
    assert "compile.backend" not in eager.data.params and eager.data.params["compile.mode"] == "eager"
    assert compiled.data.params["scenario.batch_size"] == "2"
    # Its own words: a call's latency (p50, p99) and the back-to-back throughput.
    note = compiled.data.tags["mlflow.note.content"]
    assert note.startswith(f"**FINISHED**: call latency {ms(*estimate(m, 'latency/p50_ms'))} (p50, p99 "), (
        note
    )
    assert " samples/s back to back" in note.split("\n")[0] and "measured calls and" in note
    parent = next(r for r in runs(store) if r.data.tags.get("sweep_parent") == "true")
    assert parent.data.tags["objective"] == "latency/p50_ms"  # the summary ranks by it
    assert "the latency one request sees" in compiled.data.tags["mlflow.note.content"]
    summary = (tmp_path / "multirun" / "summary.md").read_text()
    assert "verdict: " in summary and "x [" in summary and "median latency of one call" in summary


@pytest.mark.slow
def test_dynamic_batches_share_one_graph_with_dynamic_true(tmp_path: Path, store: str):
    args = [
        *INFERENCE,
        "scenario.batch_sizes=[2,3,4,5]",
        "compile.dynamic=true",
        "benchmark.paired_eager=false",
    ]
    proc = run_cli(args, tmp_path, store)
    assert proc.returncode == 0, output(proc)
    (run,) = runs(store)
    m = run.data.metrics
    assert m["diagnose/unique_graphs"] == 1 and m["diagnose/recompiles_after_warmup"] == 0
    # a unit is a call of each size: 2 + 3 + 4 + 5 samples in the median unit's time
    assert run.data.tags["unit"] == "call cycle" and run.data.tags["samples_per_unit"] == "14"
    assert m["throughput/samples_per_s"] == pytest.approx(14 * 1000 / m["step/p50_ms"])


@pytest.mark.slow
def test_without_dynamic_shapes_each_batch_size_gets_its_own_graph(tmp_path: Path, store: str):
    """The contrast that makes the test above meaningful."""
    args = [
        *INFERENCE,
        "scenario.batch_sizes=[2,3,4,5]",
        "compile.dynamic=false",
        "benchmark.paired_eager=false",
    ]
    proc = run_cli(args, tmp_path, store)
    assert proc.returncode == 0, output(proc)
    (run,) = runs(store)
    assert run.data.metrics["diagnose/unique_graphs"] == 4


@pytest.mark.slow
def test_a_generation_with_no_overrides_fits_the_tiny_model_and_logs_only_what_applies(
    tmp_path: Path, store: str
):
    """`scenario=generate model=llama_tiny` as a new user types it: its prompt and new tokens (128 and 64
    by default) fitted to the model's 32 positions, compiled by inductor; its params and metrics are
    those of a generation on a CPU (no backward, no loss, no allocator), its counts logged as numbers,
    its output the job's own lines (no inductor perf hints, no library deprecation warnings).
    The default suite checks the same on aot_eager (test_generation_measures_prefill_and_decode_...) and
    the defaults' fit in-process (test_the_generation_defaults_fit_the_tiny_model)."""
    proc = run_cli(["scenario=generate", "model=llama_tiny"], tmp_path, store)
    assert proc.returncode == 0, output(proc)
    (run,) = runs(store)
    m, params = run.data.metrics, run.data.params
    assert (
        params["scenario.prompt_len"],
        params["scenario.new_tokens"],
        params["scenario.parity_tokens"],
    ) == (
        "22",
        "10",
        "8",
    )
    assert m["generate/prompt_tokens"] == 22 and m["generate/new_tokens"] == 10
    assert m["parity/ok"] == 1.0 and not unregistered(m)
    assert_only_what_applies(m, params, scenario_trains=False)
    assert "compile/cache_misses" in m  # inductor's caches (not aot_eager's)
    assert not any(key.startswith(("loss.", "trainer.optimizer")) for key in params)
    assert "model.input.channels" not in params and params["model.input.vocab_size"] == "1000"
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("llama_tiny·bf16·default·inductor·step·generate: FINISHED: decode step "), last
    assert " tokens/s, first token " in last
    assert (
        "__perf_hints" not in proc.stdout + proc.stderr and "FutureWarning" not in proc.stdout + proc.stderr
    )
    note = run.data.tags["mlflow.note.content"]
    assert note.startswith("**FINISHED**: decode step ") and "measured generations and" in note


NOT_ON_A_CPU = (
    "memory/peak_",
    "memory/job_peak_",
    "memory/nvml",
    "compile/triton_s",
    "compile/cudagraph",
    "flops/mfu",
    "step/above_latency",  # a CPU has no queue for calls back to back to be held back in
)


def assert_only_what_applies(metrics: dict, params: dict, *, scenario_trains: bool) -> None:
    """Nothing logged that does not apply to the run's scenario and device (a CPU): no allocator or GPU
    figures, no compiled autograd without it, no backward's compile time or loss figures without a
    backward, no parity onset that never happened, no other scenario's knobs."""
    logged = set(metrics)
    assert not [name for name in logged if name.startswith(NOT_ON_A_CPU)], sorted(logged)
    assert "diagnose/compiled_autograd_captures" not in logged
    assert "parity/onset_step" not in logged or metrics["parity/onset_step"] >= 0
    if not scenario_trains:
        assert not {"compile/backward_s", "loss/first", "loss/final", "parity/max_rel"} & logged
        assert not {"benchmark.parity_steps", "precision.grad_scaler", "compile.optimizer"} & set(params)
    assert not [key for key in params if key.startswith(("sweep.", "parallel.bucket", "parallel.reshard"))]


def test_generation_measures_prefill_and_decode_and_greedy_tokens_agree(tmp_path: Path, store: str):
    proc = run_cli(GENERATE, tmp_path, store)
    assert proc.returncode == 0, output(proc)
    (run,) = runs(store)
    m = run.data.metrics
    assert run.info.run_name == "llama_tiny·bf16·default·aot_eager·step·generate"  # bf16 weights by default
    assert (
        m["step/count"] == 2 * 5
    )  # 2 measured generations x 5 decode steps (the first token is the prefill's)
    assert m["generate/ttft_p50_ms"] > 0 and m["generate/prompt_tokens"] == 8
    assert m["throughput/tokens_per_s"] == pytest.approx(1000 / m["step/p50_ms"])  # batch 1
    assert m["parity/tokens_agree"] == 6 and m["parity/ok"] == 1.0  # compiled and eager greedy tokens
    assert (
        m["diagnose/recompiles_after_warmup"] == 0 and m["diagnose/unique_graphs"] == 1
    )  # no recompile per token
    assert {"speedup/vs_eager", "speedup/ttft_vs_eager", "eager/ttft_p50_ms"} <= set(m)
    assert not unregistered(m)
    # What a generation logs on a CPU, in its own words, its output the job's own lines.
    assert_only_what_applies(m, run.data.params, scenario_trains=False)
    assert not any(key.startswith(("loss.", "trainer.optimizer")) for key in run.data.params)
    last = proc.stdout.strip().splitlines()[-1]
    assert (
        last.startswith(f"{run.info.run_name}: FINISHED: decode step ") and " tokens/s, first token " in last
    )
    assert "FutureWarning" not in proc.stdout + proc.stderr
    note = run.data.tags["mlflow.note.content"]
    assert note.startswith("**FINISHED**: decode step ") and "measured generations and" in note


def test_the_generation_defaults_fit_the_tiny_model():
    """`scenario=generate model=llama_tiny` with no overrides: the prompt and new tokens (128 and 64 by
    default) fitted to the model's 32 positions in the run's params, compiled by inductor."""
    from pipeline.job.outcome import applicable

    cfg = validate(compose(["scenario=generate", "model=llama_tiny"]))
    assert (cfg.compile.mode, cfg.compile.backend) == ("default", "inductor")
    fitted = applicable(cfg)["scenario"]
    assert (fitted["prompt_len"], fitted["new_tokens"], fitted["parity_tokens"]) == (22, 10, 8)


@pytest.mark.parametrize(
    "overrides, key, allowed",
    [
        (
            ["scenario=generate", "model=vit_tiny"],
            "scenario",
            "model=vit_tiny does not list it in its config's `scenarios` (none); models that do: gpt2, gpt2_tiny, hf/",
        ),
        (
            ["scenario=generate", "model=bert_tiny"],
            "scenario",
            "does not list it in its config's `scenarios`",
        ),
        (["scenario=inference", "model=vit_tiny", "compile.scope=loss"], "compile.scope", "has no loss"),
        (
            ["scenario=inference", "model=vit_tiny", "compile.optimizer=true"],
            "compile.optimizer",
            "no optimizer",
        ),
        (
            ["scenario=inference", "model=vit_tiny", "loss=distillation", "model@loss.teacher=vit_tiny_d3"],
            "loss",
            "has no loss",
        ),
        (
            ["scenario=generate", "model=llama_tiny", "precision=amp"],
            "precision.autocast_dtype",
            "weights' dtype",
        ),
        (
            ["scenario=generate", "model=llama_tiny", "scenario.new_tokens=64"],
            "scenario.new_tokens",
            "model.input.seq_len=32 (the KV cache's length): e.g. scenario.prompt_len=22 scenario.new_tokens=10",
        ),
        (
            ["scenario=generate", "model=llama_tiny", "scenario.prompt_len=16", "scenario.new_tokens=20"],
            "scenario.new_tokens",
            "e.g. scenario.prompt_len=12, or leave both null",
        ),
        (
            ["scenario=generate", "model=llama_tiny", "scenario.new_tokens=4", "scenario.parity_tokens=6"],
            "scenario.parity_tokens",
            "<= scenario.new_tokens=4",
        ),
        (["model=vit_tiny", "precision=fp16"], "precision.param_dtype", "not for training"),
        (["scenario=inference", "model=vit_tiny", "scenario.batch_size=0"], "scenario.batch_size", "> 0"),
    ],
)
def test_bad_scenario_combinations_name_the_key(overrides: list[str], key: str, allowed: str):
    with pytest.raises(ConfigError) as info:
        validate(compose(overrides))
    assert info.value.key == key and allowed in info.value.allowed


def test_a_bad_combination_stops_the_cli_before_anything_starts(tmp_path: Path, store: str):
    proc = run_cli(["scenario=generate", "model=vit_tiny"], tmp_path, store)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("config error: scenario='generate' is not allowed")
    assert runs(store) == [] and not (tmp_path / "run" / "worker.log").exists()


def test_the_seed_models_are_configs():
    """Seed 004's models: ResNet-152, ViT-B/16 and a Llama-2-7B-shaped LM (inference and generation)."""
    for model in ("resnet152", "vit_b16"):
        assert validate(compose([f"model={model}", "scenario=inference"])).scenario.name == "inference"
    llama = validate(compose(["model=llama_7b", "scenario=generate"]))
    assert llama.model.scenarios == ["inference", "generate"] and llama.precision.param_dtype == "bfloat16"
    kwargs = llama.model.kwargs
    assert (kwargs["hidden_size"], kwargs["num_hidden_layers"], kwargs["intermediate_size"]) == (
        4096,
        32,
        11008,
    )


def test_a_decode_steps_bytes_are_its_weights_and_its_whole_static_cache():
    """Decode is bound by memory bandwidth: the bytes a step reads are every weight (an untied input
    embedding only a row) and the K and V of every layer over the whole static cache, for each sequence."""
    import torch

    from models import build_model
    from pipeline.scenarios.generate.scenario import DecodeBandwidth, decode_bytes

    cfg = validate(compose(GENERATE))
    lm = build_model(cfg.model).model.to(torch.bfloat16)
    per_step, how = decode_bytes(lm, batch=3, cache_len=14)
    c = lm.config
    params = sum(p.numel() for p in lm.parameters()) * 2
    untied = lm.get_output_embeddings().weight is not lm.get_input_embeddings().weight
    embedding = lm.get_input_embeddings().weight.numel() * 2 if untied else 0
    kv = (
        2
        * c.num_hidden_layers
        * c.num_key_value_heads
        * (c.hidden_size // c.num_attention_heads)
        * 14
        * 3
        * 2
    )
    assert per_step == params - embedding + kv and "KV cache" in how
    h200 = DecodeBandwidth.of(bytes_per_step=4.8e9, step_time_ms=2.0, gpu_name="NVIDIA H200")
    assert h200.achieved_gbs == pytest.approx(2400) and h200.utilization == pytest.approx(0.5)
    assert (
        "4800 GB/s" in h200.note
        and DecodeBandwidth.of(bytes_per_step=1, step_time_ms=1, gpu_name=None).utilization is None
    )


def test_a_decode_that_parts_at_a_near_tie_is_not_a_parity_failure():
    """On an H200, a random-weight 7B model's compiled and eager bf16 decodes parted at token 5: its
    logits are nearly flat, and two equal candidates can swap under fused kernels' rounding."""
    import torch

    from pipeline.scenarios.generate.scenario import near_tie

    assert near_tie(torch.tensor([[5.0, 4.99, 1.0]]))  # 0.2% apart: a tie at bf16 precision
    assert not near_tie(torch.tensor([[5.0, 4.0, 1.0]]))  # a real preference


def test_a_max_autotune_generation_keeps_its_autotune_phase_time(tmp_path: Path):
    """Every scenario's compile diagnosis goes through the one protocol: a generation compiled under
    max-autotune reports its autotune phase (generate's own copy of the phase list once left it out)."""
    import torch

    from pipeline.diagnose.compile_stats import CompileDiagnosis, CompileStats
    from pipeline.scenarios import runner_class
    from pipeline.scenarios.protocol import Timeline, WorkerContext

    cfg = validate(
        compose([*GENERATE, "compile.backend=inductor", "compile.mode=max-autotune-no-cudagraphs"])
    )
    ctx = WorkerContext(device=torch.device("cpu"), progress=print, out_dir=tmp_path, timeline=Timeline())
    scenario = runner_class(cfg.scenario)(cfg, ctx)
    assert "autotune" in scenario.compile_applies()
    diagnosis = CompileDiagnosis.collect(
        after_warmup=CompileStats.now(), logged={"cudagraph_skips": []}, applies=scenario.compile_applies()
    )
    assert "compile/autotune_s" in diagnosis.metrics()
    assert (
        type(scenario).compile_applies is runner_class(validate(compose(INFERENCE)).scenario).compile_applies
    )


def test_a_scenario_is_one_config_file_and_one_module(tmp_path: Path, store: str):
    """A throwaway scenario (forward and backward, no optimizer: tests/conf/scenario/fwd_bwd.yaml and
    tests/scenario_fwd_bwd.py) runs through the real CLI with the whole protocol: paired eager rounds,
    compile time, its work stated in its run."""
    conf = Path(__file__).parent / "conf"
    args = [
        f"hydra.searchpath=[file://{conf}]",
        "scenario=fwd_bwd",
        "model=vit_tiny",
        "trainer.steps=5",
        "trainer.warmup_steps=1",
        "trainer.batch_size=2",
        "compile.backend=aot_eager",
    ]
    proc = run_cli(args, tmp_path, store)
    assert proc.returncode == 0, output(proc)
    (run,) = runs(store)
    tags, metrics = run.data.tags, run.data.metrics
    assert run.info.status == "FINISHED" and run.info.run_name.endswith("·fwd_bwd")
    assert (tags["scenario"], tags["unit"], tags["samples_per_unit"]) == (
        "fwd_bwd",
        "forward and backward",
        "2",
    )
    assert {"speedup/vs_eager", "compile/total_s", "step/p50_ms", "parity/ok"} <= set(metrics)
    assert not unregistered(metrics)
    # Its keys are its file's: another is refused naming the scenario (the config check every CLI job runs;
    # the CLI refusing a scenario config in one line, exit 2: test_a_bad_combination_stops_the_cli_...).
    with pytest.raises(ConfigError) as refused:
        validate(compose([*args, "scenario.steps=3"]))
    assert refused.value.key == "scenario.steps"
    assert "scenario.steps=3 is not allowed: not a key of scenario=fwd_bwd" in str(refused.value)


def _eager_unit_ops(cfg, tmp_path: Path, *, paired_copy: bool) -> list[tuple[str, tuple[str, ...], bool]]:
    """The aten ops (with their tensors' dtypes, and whether grad mode was on) of one call of a job's
    eager variant: the standalone eager job's main variant, or the paired eager copy of a compiled job."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from pipeline.scenarios import runner_class
    from pipeline.scenarios.protocol import Timeline, WorkerContext

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[tuple[str, tuple[str, ...], bool]] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            dtypes = tuple(
                str(a.dtype) for a in torch.utils._pytree.tree_leaves(args) if isinstance(a, torch.Tensor)
            )
            self.seen.append((str(func), dtypes, torch.is_grad_enabled()))
            return func(*args, **(kwargs or {}))

    ctx = WorkerContext(
        device=torch.device("cpu"), progress=lambda *a, **k: None, out_dir=tmp_path, timeline=Timeline()
    )
    scenario = runner_class(cfg.scenario)(cfg, ctx)
    with scenario.measuring():
        scenario.head = scenario.prepare()
        settings = cfg.compile.as_eager() if paired_copy else cfg.compile
        variant, _ = scenario.make_variant("eager", settings)
        variant.run_unit(None, record=False)  # the first call, as the warm-up's
        with Ops() as ops:
            variant.run_unit(None, record=False)
    return ops.seen


@pytest.mark.parametrize("precision", ["amp", "fp32"])
def test_the_standalone_eager_job_and_a_compiled_jobs_paired_eager_copy_run_the_same_work(
    tmp_path: Path, precision: str
):
    """Issue 26: on a CPU host a standalone eager amp inference job once read 3x the time of the paired
    eager copy inside compiled jobs. Both run the same aten ops on the same dtypes, under the same grad
    mode (inference_mode) and autocast: the work is the same, so a difference between their times comes
    from the processes they ran in or the host, not from what they run (benchmarks/RESULTS.md, issue 26)."""
    standalone = validate(compose([*INFERENCE, f"precision={precision}", "compile.mode=eager"]))
    compiled = validate(compose([*INFERENCE, f"precision={precision}", "compile.mode=default"]))
    alone = _eager_unit_ops(standalone, tmp_path / "alone", paired_copy=False)
    paired = _eager_unit_ops(compiled, tmp_path / "paired", paired_copy=True)
    assert alone == paired
    assert len(alone) > 20 and not any(grad for _, _, grad in alone)
    if precision == "amp":  # autocast is on in both: the matmuls run in bfloat16
        assert any(("linear" in op or "mm" in op) and "torch.bfloat16" in dtypes for op, dtypes, _ in alone)


def test_the_example_scenario_gets_its_weights_dtype_and_compile_time_without_writing_them(tmp_path: Path):
    """tests/scenario_fwd_bwd.py names only its step and its timed unit; pipeline/scenarios/variant.py
    applies the rest: at precision=bf16 its weights are bfloat16, and its variant carries the compile
    call's time."""
    import torch

    from pipeline.scenarios import runner_class
    from pipeline.scenarios.protocol import Timeline, WorkerContext

    conf = Path(__file__).parent / "conf"
    cfg = validate(
        compose(
            [
                f"hydra.searchpath=[file://{conf}]",
                "scenario=fwd_bwd",
                "model=vit_tiny",
                "trainer.batch_size=2",
                "precision=bf16",
                "compile.backend=aot_eager",
            ]
        )
    )
    ctx = WorkerContext(
        device=torch.device("cpu"), progress=lambda *a, **k: None, out_dir=tmp_path, timeline=Timeline()
    )
    scenario = runner_class(cfg.scenario)(cfg, ctx)
    scenario.head = scenario.prepare()
    variant, compiled = scenario.make_variant("compiled", cfg.compile)
    weights = {p.dtype for p in compiled.forward.parameters()}
    assert weights == {torch.bfloat16}, weights
    assert variant.setup_s > 0 and compiled.kwargs["backend"] == "aot_eager"


def test_the_model_options_skip_a_file_that_is_not_a_yaml_mapping(tmp_path: Path, monkeypatch):
    from pipeline.scenarios import base

    models = tmp_path / "conf" / "model"
    (models / "hf").mkdir(parents=True)
    (models / "lm.yaml").write_text("id: lm\nscenarios: [train, generate]\n")
    (models / "hf" / "other.yaml").write_text("id: other\nscenarios: [generate]\n")
    (models / "broken.yaml").write_text("id: [unclosed\n")
    (models / "a_list.yaml").write_text("- 1\n")
    (models / "none.yaml").write_text("id: none\nscenarios: null\n")
    monkeypatch.setattr(base, "PROJECT_ROOT", tmp_path)
    base.model_options.cache_clear()
    try:
        assert sorted(base.model_options()) == ["hf/other", "lm", "none"]
        assert base.models_listing("generate") == ["hf/other", "lm"]
    finally:
        base.model_options.cache_clear()
