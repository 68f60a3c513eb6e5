"""Diagnostics: graph breaks with reasons and lines, explain, FLOPs by hand, MFU table, traces, caches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.config.schema import PrecisionConfig
from pipeline.diagnose import flops, syncs
from pipeline.diagnose.flops import Mfu
from pipeline.job.preflight import validate
from pipeline.job.progress import TORCH_LOG_LINE
from pipeline.jobdir import SweepDir
from tests.conftest import TINY, client, compose, output, run_cli, run_info, runs

BREAKY = [
    "model=graph_break_net",
    "trainer.steps=4",
    "trainer.warmup_steps=1",
    "compile.backend=aot_eager",
    "benchmark.paired_eager=false",
]


def test_the_articles_graph_breaks_are_reported_with_reasons_and_lines(tmp_path: Path, store: str):
    proc = run_cli([*BREAKY, "diagnose.explain=true"], tmp_path, store)
    assert proc.returncode == 0, output(proc)
    (run,) = runs(store)
    assert run.data.metrics["diagnose/graph_breaks"] >= 3
    assert run.data.metrics["diagnose/unique_graphs"] >= 3
    diagnostics = json.loads((tmp_path / "run" / "diagnostics.json").read_text())
    located = {b["location"].rsplit("/", 1)[-1]: b["reason"] for b in diagnostics["graph_breaks"]}
    source = (Path(__file__).parent.parent / "models" / "graph_breaks.py").read_text().splitlines()
    for location, reason in located.items():
        assert location.startswith("graph_breaks.py:") and reason
        assert (
            "graph break" in source[int(location.split(":")[1]) - 1]
        )  # the line that breaks, as commented there
    assert any("item()" in r for r in located.values()) and any("print" in r for r in located.values())
    # The job's last line says so, since compile.fullgraph=false let them through.
    assert "graph breaks (e.g. models/graph_breaks.py:" in proc.stdout and "fullgraph=false" in proc.stdout
    # torch's own account of them stays in worker.log, and the model's print prints nothing (issue 29)
    lines = (proc.stdout + proc.stderr).splitlines()
    assert not [line for line in lines if TORCH_LOG_LINE.match(line)] and "tensor(" not in proc.stdout
    assert "Graph break" in (tmp_path / "run" / "worker.log").read_text()
    explain = (tmp_path / "run" / "explain.txt").read_text()
    assert "graph breaks: " in explain and "graph_breaks.py:" in explain
    assert {"diagnostics.json", "explain.txt"} <= {
        a.path for a in client(store).list_artifacts(run.info.run_id)
    }
    # explain ran on a throwaway copy and its compile state was forgotten: the job's counts are its own
    assert run.data.metrics["diagnose/recompiles_after_warmup"] == 0


def test_fullgraph_turns_a_graph_break_into_a_clear_failure(tmp_path: Path, store: str):
    proc = run_cli([*BREAKY, "compile.fullgraph=true"], tmp_path, store)
    assert proc.returncode == 1, output(proc)
    (run,) = runs(store)
    assert run.info.status == "FAILED" and run.data.tags["error_type"] == "GraphBreakInFullgraph"
    assert "compile.fullgraph=true" in run.data.tags["error_message"]


def test_flops_of_a_small_model_match_a_hand_count():
    cfg = compose(
        [
            "model._target_=tests.fault_models.with_secret",
            "model.name=null",
            "model.input.height=32",
            "model.input.width=32",
            "model.input.num_classes=10",
        ]
    )
    config = validate(cfg)
    batch = 2
    # One Linear(3*32*32 -> 10): forward 2*B*3072*10; backward only the weight gradient (the input
    # needs none): another 2*B*3072*10. Cross-entropy and the bias add are not matmuls.
    assert flops.count_flops(config.model, config.loss, batch) == 4 * batch * 3072 * 10


def test_flops_of_vit_tiny_are_plausible():
    config = validate(compose(["model=vit_tiny"]))
    counted = flops.count_flops(config.model, config.loss, 8)
    # Forward and backward are about 3x the forward's 2 * params * tokens (17 tokens of 64 wide).
    params, tokens = 114_250, 17
    assert 0.5 * 6 * params * tokens * 8 < counted < 3 * 6 * params * tokens * 8


@pytest.mark.parametrize("model", ["gpt2_tiny", "llama_tiny"])
def test_flops_of_causal_lms_are_counted(model):
    # HF's causal-mask code asks the position ids for a value, which meta tensors cannot give: these
    # models are counted on fake tensors (on the H200 their MFU was missing before).
    from models import build_model

    config = validate(compose([f"model={model}"]))
    batch = 2
    params = sum(p.numel() for p in build_model(config.model).parameters())
    tokens = batch * config.model.input.seq_len
    counted = flops.count_flops(config.model, config.loss, batch)
    # Forward and backward are about 6 * params * tokens (attention adds, tied embeddings count once).
    assert 0.5 * 6 * params * tokens < counted < 3 * 6 * params * tokens


@pytest.mark.parametrize(
    "gpu, precision, peak",
    [
        ("NVIDIA H100 80GB HBM3", "amp", 989.4),
        ("NVIDIA H200", "fp32", 66.9),
        ("NVIDIA H100 PCIe", "tf32", 378.0),
        ("NVIDIA A100-SXM4-80GB", "amp_fp16", 312.0),
        ("NVIDIA H200", "bf16", 989.4),
    ],
)
def test_peak_table(gpu, precision, peak):
    cfg = validate(compose([f"precision={precision}"])).precision
    assert flops.peak_tflops(gpu, cfg)[0] == peak


def test_unknown_gpu_gets_no_mfu_and_a_note():
    amp = PrecisionConfig(id="amp", autocast_dtype="bfloat16", param_dtype="float32", tf32=False)
    unknown = Mfu.of(flops=10**12, step_time_ms=100.0, gpu_name="Imaginary GPU 9000", precision=amp)
    metrics = unknown.metrics()
    assert "flops/mfu" not in metrics and metrics["flops/achieved_tflops"] == pytest.approx(10.0)
    assert "not in the peak table" in unknown.note
    known = Mfu.of(flops=10**12, step_time_ms=100.0, gpu_name="NVIDIA H100 80GB HBM3", precision=amp)
    assert known.metrics()["flops/mfu"] == pytest.approx(10.0 / 989.4)


def test_syncs_are_counted_on_cuda_only():
    import torch

    assert "note" in syncs.count_syncs(lambda: None, torch.device("cpu"))


@pytest.mark.slow
def test_profile_and_compiler_trace_are_logged(tmp_path: Path, store: str):
    proc = run_cli(
        [
            *TINY,
            "compile.backend=aot_eager",
            "benchmark.paired_eager=false",
            "profile=true",
            "diagnose.trace=true",
        ],
        tmp_path,
        store,
    )
    assert proc.returncode == 0, output(proc)
    (run,) = runs(store)
    profile = tmp_path / "run" / "profile"
    traces = list(profile.glob("*.pt.trace.json"))
    assert traces and json.loads(traces[0].read_text())["traceEvents"]  # Chrome/Perfetto trace events
    assert "Self CPU" in (profile / "top_kernels.txt").read_text()
    assert (tmp_path / "run" / "tlparse" / "index.html").exists()
    c = client(store)
    assert {"profile", "tlparse"} <= {a.path for a in c.list_artifacts(run.info.run_id)}
    assert run_info(run)["info"]["tlparse"] == "ok"
    for name in ("compile/dynamo_s", "compile/aot_autograd_s", "compile/backward_s"):
        assert name in run.data.metrics
    assert run.data.metrics["compile/dynamo_s"] > 0 and run.data.metrics["compile/aot_autograd_s"] > 0


@pytest.mark.slow
def test_inductor_cache_is_shared_in_a_sweep_and_cold_on_request(tmp_path: Path, store: str):
    small = [
        "model._target_=tests.fault_models.with_secret",
        "model.id=linear",
        "model.name=null",
        "model.input.height=32",
        "model.input.width=32",
        "model.input.num_classes=10",
        "model.batch_size=2",
        "trainer.steps=3",
        "trainer.warmup_steps=1",
        "benchmark.paired_eager=false",
    ]
    # diagnose.cache_dir=null: the sweep's own cache (the default), not the test session's
    proc = run_cli(
        [*small, "trainer.seed=0,1", "diagnose.cache_dir=null"], tmp_path / "shared", store, multirun=True
    )
    assert proc.returncode == 0, output(proc)
    first, second = sorted(
        (r for r in runs(store) if r.data.tags.get("sweep_parent") != "true"), key=lambda r: r.info.start_time
    )
    assert [run_info(r)["info"]["inductor_cache"] for r in (first, second)] == ["cold", "warm"]
    assert second.data.metrics["compile/cache_hits"] > 0
    # Cold on request: the second job's configuration again, pointed at the cache that just served it warm;
    # diagnose.cold_cache=true wins over any shared cache, so it compiles cold (one compile, not a sweep of two).
    shared = SweepDir(tmp_path / "shared" / "multirun").inductor_cache  # run_cli's hydra.sweep.dir
    assert shared.is_dir()
    cold = run_cli(
        [*small, "trainer.seed=1", f"diagnose.cache_dir={shared}", "diagnose.cold_cache=true"],
        tmp_path / "cold",
        store,
    )
    assert cold.returncode == 0, output(cold)
    (cold_run,) = [r for r in runs(store) if r.data.params.get("diagnose.cold_cache") == "True"]
    assert run_info(cold_run)["info"]["inductor_cache"] == "cold"


def test_a_sync_is_attributed_to_the_users_line_not_the_warnings_machinery():
    """The stack at a sync warning holds the caller, torch, this harness and the warnings module (on the
    GPU host every sync was first attributed to warnings.py): the user's line must win."""
    import traceback
    import warnings

    import losses.profiling_ce as article

    stack = [
        traceback.FrameSummary(
            str(Path(article.__file__)), 22, "weighted_nll", line="assert target.max() < pred.size(-1)"
        ),
        traceback.FrameSummary(str(Path(syncs.__file__)), 240, "count_syncs"),
        traceback.FrameSummary(warnings.__file__, 110, "_showwarnmsg", line="sw(msg.message, ...)"),
    ]
    stack = [stack[1], stack[0], stack[2]]  # harness -> user code -> warnings
    assert syncs._user_frame(stack).startswith(f"{article.__file__}:22: assert target.max()")
    library_only = [stack[0], stack[2]]  # no user frame: the innermost non-stdlib frame
    assert syncs._user_frame(library_only).startswith(f"{syncs.__file__}:240")


# A C++ TORCH_WARN reaches Python as a UserWarning raised at the Python line that called into C++.
TORCH_SUFFIX = " (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:1)"
NOTICE = (
    "Synchronization debug mode is a prototype feature and does not yet detect all synchronizing operations"
)


def test_only_torchs_sync_warning_counts_as_a_sync_not_the_modes_own_notice():
    """On an H200, enabling sync debug mode raised torch's one-time notice "... does not yet detect all
    synchronizing operations", which was counted as one sync in every step (ViT-B/16 showed 1 sync, the
    profiling article's loss 4 instead of 3). Only c10's "called a synchronizing CUDA operation" counts,
    attributed to the line that caused it; other warnings still reach the user."""
    import warnings

    def step_with_two_syncs() -> None:
        warnings.warn(syncs.SYNC_WARNING + TORCH_SUFFIX, stacklevel=1)  # first sync
        warnings.warn(syncs.SYNC_WARNING + TORCH_SUFFIX, stacklevel=1)  # second sync

    with warnings.catch_warnings(record=True) as passed_on:
        warnings.simplefilter("always")
        with syncs.recording_sync_warnings() as locations:
            warnings.warn(NOTICE + TORCH_SUFFIX, stacklevel=1)
            step_with_two_syncs()
    assert len(locations) == 2
    assert all(loc.startswith(f"{__file__}:") for loc in locations)
    assert [loc.split(": ", 1)[1] for loc in locations] == [
        "warnings.warn(syncs.SYNC_WARNING + TORCH_SUFFIX, stacklevel=1)  # first sync",
        "warnings.warn(syncs.SYNC_WARNING + TORCH_SUFFIX, stacklevel=1)  # second sync",
    ]
    assert [str(w.message) for w in passed_on] == [NOTICE + TORCH_SUFFIX]


AUTOTUNE_REPORT = """Autotune Choices Stats:
{"num_choices": 22, "num_triton_choices": 20, "best_kernel": "bias_addmm", "best_time": 0.07001599669456482}
AUTOTUNE addmm(12608x2304, 12608x768, 768x2304)
strides: [0, 1], [768, 1], [1, 768]
dtypes: torch.bfloat16, torch.bfloat16, torch.bfloat16
  bias_addmm 0.0700 ms 100.0%
  triton_mm_29 0.0927 ms 75.6% ACC_TYPE='tl.float32', ALLOW_TF32=False, BLOCK_K=64, BLOCK_M=128, BLOCK_N=128
SingleProcess AUTOTUNE benchmarking takes 0.4525 seconds and 0.0021 seconds precompiling for 13 choices"""


def test_inductors_autotune_report_stays_off_the_jobs_output_unless_verbose(capsys):
    """max-autotune writes its report straight to stderr (as the H100 modes sweep's log showed, hundreds
    of lines a job): the worker's lines reach the terminal without it, and with it when verbose."""
    from pipeline.job.progress import JobProgress

    quiet, loud = JobProgress("job", terminal=False), JobProgress("job", terminal=False, verbose=True)
    for line in [*AUTOTUNE_REPORT.splitlines(), "vit_b16·amp·max-autotune: FINISHED"]:
        quiet.worker_line(line)
    assert capsys.readouterr().out.splitlines() == ["vit_b16·amp·max-autotune: FINISHED"]
    for line in AUTOTUNE_REPORT.splitlines():
        loud.worker_line(line)
    assert len(capsys.readouterr().out.splitlines()) == len(AUTOTUNE_REPORT.splitlines())


def test_torchs_own_user_warnings_are_kept_in_diagnostics_not_printed():
    import warnings

    from pipeline.job.worker import keep_library_warnings

    shown: list[str] = []
    before = warnings.showwarning
    warnings.showwarning = lambda message, *args, **kwargs: shown.append(str(message))
    try:
        kept = keep_library_warnings(verbose=False)
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn(
                "TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled",
                stacklevel=1,
            )
            warnings.warn("a user's own warning", stacklevel=1)
    finally:
        warnings.showwarning = before
    assert len(kept) == 1 and "TensorFloat32" in kept[0]
    assert shown == ["a user's own warning"]
