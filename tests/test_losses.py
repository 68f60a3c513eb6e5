"""Losses: cross-entropy on class and token targets, distillation (mse, kl) with a teacher picked by
Hydra, every loss under every compile scope through the real CLI."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from losses.cross_entropy import CrossEntropy
from pipeline.config.errors import ConfigError
from pipeline.config.schema import COMPILE_SCOPES, InputSpec, ModelConfig, to_config
from pipeline.job.preflight import validate
from tests.conftest import compose, output, run_cli, run_info, runs, sqlite_uri

# A vit_tiny student with the 3-block vit_tiny teacher: distillation small enough for a CPU.
TINY_DISTILL = ["model=vit_tiny", "loss=distillation", "model@loss.teacher=vit_tiny_d3"]
CLI_STEPS = [
    "trainer.steps=2",
    "trainer.warmup_steps=1",
    "trainer.batch_size=2",
    "benchmark.paired_eager=false",
]
SCOPES = ",".join(COMPILE_SCOPES)
# The scopes under which distillation runs other code than cross-entropy does: those that compile the loss
# (with its teacher; mse and kl each), and regional, which must compile the student's blocks and not the
# teacher's. Under `model` the loss and its teacher run eager beside the compiled student, as under
# regional, so that pair adds nothing (cross-entropy runs under every scope).
DISTILL_SCOPES = ("loss", "model_and_loss", "regional", "step")
LOSS_SCOPES = [("ce", scope) for scope in COMPILE_SCOPES] + [
    (f"distill_{kind}", scope) for kind in ("mse", "kl") for scope in DISTILL_SCOPES
]


def children(store: str) -> list:
    return [r for r in runs(store) if r.data.tags.get("sweep_parent") != "true"]


def teacher_node(overrides: list[str]) -> ModelConfig:
    return to_config(compose(overrides)).loss.teacher


# ---------------------------------------------------------------------------------------- cross-entropy
def test_cross_entropy_shifts_next_token_targets():
    logits, tokens = torch.randn(2, 5, 7), torch.randint(7, (2, 5))
    loss = CrossEntropy({"kind": "tokens", "target": "next_token"})({"targets": tokens}, logits)
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, 7), tokens[:, 1:].reshape(-1))
    assert torch.allclose(loss, expected)


def test_cross_entropy_ignores_unlabelled_masked_tokens():
    import dataclasses

    from pipeline.axes.data import make_device_batch

    spec = InputSpec(kind="tokens", vocab_size=7, seq_len=64, target="masked_token")
    labels = make_device_batch(spec, None, generator=torch.Generator().manual_seed(0))["targets"]
    labels = labels.unsqueeze(0)
    assert (labels == -100).any() and (labels != -100).any()
    logits = torch.randn(1, 64, 7)
    loss = CrossEntropy(dataclasses.asdict(spec))({"targets": labels}, logits)
    keep = labels != -100
    assert torch.allclose(loss, F.cross_entropy(logits[keep], labels[keep]))


def test_cross_entropy_on_class_labels():
    logits, labels = torch.randn(4, 10), torch.randint(10, (4,))
    loss = CrossEntropy({"kind": "image", "target": "class"})({"targets": labels}, logits)
    assert torch.allclose(loss, F.cross_entropy(logits, labels))


# ---------------------------------------------------------------------------------------- distillation
def distillation(overrides: list[str]):
    from losses import build_loss

    config = validate(compose(overrides))
    torch.manual_seed(0)
    return build_loss(config.loss, config.model.input), config


def test_distillation_mse_compares_student_and_teacher_logits():
    loss, _ = distillation(TINY_DISTILL)
    batch = {"inputs": torch.randn(2, 3, 32, 32), "targets": torch.randint(10, (2,))}
    student = torch.randn(2, 10, requires_grad=True)
    value = loss.train()(batch, student)
    with torch.no_grad():
        teacher = loss.teacher(batch["inputs"])
    assert torch.allclose(value, F.mse_loss(student, teacher))
    value.backward()
    assert student.grad is not None
    assert all(p.grad is None and not p.requires_grad for p in loss.teacher.parameters())
    assert not loss.teacher.training  # frozen: .train() on the loss leaves the teacher in eval mode


def test_distillation_kl_on_language_model_logits():
    overrides = ["model=gpt2_tiny", "loss=distillation", "model@loss.teacher=llama_tiny", "loss.kind=kl"]
    overrides += ["loss.temperature=3.0", "loss.alpha=0.25"]
    loss, config = distillation(overrides)
    assert config.loss.id == "distill_kl"
    tokens = torch.randint(1000, (2, 32))
    batch = {"inputs": tokens, "targets": tokens.clone()}
    student = torch.randn(2, 32, 1000)
    with torch.no_grad():
        teacher = loss.teacher(tokens)
    t = 3.0
    kl = F.kl_div(
        F.log_softmax(student.reshape(-1, 1000) / t, -1),
        F.softmax(teacher.reshape(-1, 1000) / t, -1),
        reduction="batchmean",
    )
    ce = F.cross_entropy(student[:, :-1].reshape(-1, 1000), tokens[:, 1:].reshape(-1))  # shifted
    assert torch.allclose(loss(batch, student), 0.25 * t * t * kl + 0.75 * ce, rtol=1e-4)


def test_distillation_default_teacher_is_vit_b16_with_24_blocks():
    cfg = compose(["loss=distillation"])
    validate(cfg)  # the default student, ViT-B/16, fits its default teacher
    assert (cfg.loss.id, cfg.loss.kind) == ("distill_mse", "mse")
    teacher = cfg.loss.teacher
    assert (teacher.id, teacher.name, teacher.kwargs.depth) == ("vit_b16_d24", "vit_base_patch16_224", 24)
    assert OmegaConf.to_container(teacher.input) == OmegaConf.to_container(cfg.model.input)
    with torch.device("meta"):
        from models import build_model

        net = build_model(to_config(cfg).loss.teacher)
    assert len(net.blocks) == 24


@pytest.mark.parametrize("teacher", ["vit_tiny_d3", "resnet_tiny", "convnext_cpu", "custom"])
def test_teacher_is_swapped_with_the_model_at_loss_teacher_override(teacher: str):
    """`model@loss.teacher=<any model config>` puts that config at loss.teacher, in any order."""
    for overrides in ([*TINY_DISTILL[:2], f"model@loss.teacher={teacher}"], [f"model@loss.teacher={teacher}", *TINY_DISTILL[:2]]):  # fmt: skip
        cfg = compose(overrides)
        validate(cfg)
        assert cfg.loss.teacher.id == teacher and cfg.model.id == "vit_tiny"
        assert teacher_node(overrides) == to_config(compose([f"model={teacher}"])).model


def test_teacher_keys_are_edited_like_any_key():
    cfg = compose([*TINY_DISTILL, "loss.teacher.kwargs.depth=4", "loss.kind=kl", "loss.alpha=0.9"])
    validate(cfg)
    assert (cfg.loss.teacher.kwargs.depth, cfg.loss.kind, cfg.loss.alpha, cfg.loss.id) == (
        4,
        "kl",
        0.9,
        "distill_kl",
    )


def test_teacher_override_without_the_distillation_loss_is_a_config_error():
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match=r"model@loss\.teacher"):
        compose(["model=vit_tiny", "model@loss.teacher=vit_tiny_d3"])


@pytest.mark.parametrize(
    "overrides, key",
    [
        ([*TINY_DISTILL, "loss.teacher.input.num_classes=100"], "loss.teacher.input.num_classes"),
        (["model=vit_tiny", "loss=distillation"], "loss.teacher.input.num_classes"),  # ViT-B/16 teacher
        (
            ["model=gpt2_tiny", "loss=distillation", "model@loss.teacher=gpt2"],
            "loss.teacher.input.vocab_size",
        ),
        (["model=gpt2_tiny", "loss=distillation", "model@loss.teacher=vit_tiny"], "loss.teacher.input.kind"),
        ([*TINY_DISTILL, "loss.kind=kld"], "loss.kind"),
        ([*TINY_DISTILL, "loss.alpha=1.5"], "loss.alpha"),
    ],
)
def test_a_teacher_that_does_not_fit_the_student_is_rejected(overrides: list[str], key: str):
    with pytest.raises(ConfigError) as info:
        validate(compose(overrides))
    assert info.value.key == key


def test_a_teacher_with_other_classes_is_rejected_by_the_cli(tmp_path: Path, store: str):
    proc = run_cli([*TINY_DISTILL, "loss.teacher.input.num_classes=100", *CLI_STEPS], tmp_path, store)
    assert proc.returncode == 2, output(proc)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("config error:")]
    assert lines and lines[0].startswith("config error: loss.teacher.input.num_classes=100 is not allowed"), output(proc)  # fmt: skip
    assert "model.input.num_classes=10" in lines[0]
    assert "Traceback" not in proc.stderr and runs(store) == []


# ---------------------------------------------------------------------------------------- loss x scope
@pytest.fixture(scope="module")
def loss_scope_sweeps(tmp_path_factory):
    """Every loss under every compile scope that treats it apart, 2 steps with aot_eager: two multiruns
    (cross-entropy under every scope; then distillation mse and kl under DISTILL_SCOPES), each with one
    Hydra start-up, logged to one store."""
    tmp = tmp_path_factory.mktemp("loss_scopes")
    store = sqlite_uri(tmp / "mlflow.db")
    common = ["compile.backend=aot_eager", *CLI_STEPS]
    procs = [
        run_cli(
            ["model=vit_tiny", "loss=cross_entropy", f"compile.scope={SCOPES}", *common],
            tmp / "ce",
            store,
            multirun=True,
        ),
        run_cli(
            [*TINY_DISTILL, "loss.kind=mse,kl", f"compile.scope={','.join(DISTILL_SCOPES)}", *common],
            tmp / "distill",
            store,
            multirun=True,
        ),
    ]
    jobs = {(r.data.tags["loss"], r.data.tags["scope"]): r for r in children(store)}
    return procs, jobs


@pytest.mark.slow
def test_loss_scope_sweeps_exit_zero(loss_scope_sweeps):
    procs, jobs = loss_scope_sweeps
    for proc in procs:
        assert proc.returncode == 0, output(proc)
    assert len(jobs) == len(LOSS_SCOPES)


@pytest.mark.slow
@pytest.mark.parametrize("loss, scope", LOSS_SCOPES)
def test_every_loss_runs_under_every_scope(loss_scope_sweeps, loss: str, scope: str):
    procs, jobs = loss_scope_sweeps
    assert (loss, scope) in jobs, "\n".join(output(p) for p in procs)
    run = jobs[(loss, scope)]
    assert run.info.status == "FINISHED", run.data.tags.get("error_message")
    assert run.data.metrics["step/count"] == 1
    assert math.isfinite(run.data.metrics["loss/first"])
    if scope == "regional":
        assert run_info(run)["info"]["compiled_regions"] == 2  # vit_tiny's 2 blocks
    if loss != "ce":
        assert run.data.params["loss.teacher.id"] == "vit_tiny_d3"
        assert run.data.params["loss.kind"] == loss.removeprefix("distill_")


# ---------------------------------------------------------------------------------------- real inductor
@pytest.mark.slow
def test_distillation_compiles_with_inductor(tmp_path: Path, store: str):
    """The real compiler over student, teacher and loss in one graph (compile.scope=model_and_loss)."""
    args = [*TINY_DISTILL, "loss.kind=kl", "compile.scope=model_and_loss", *CLI_STEPS]
    proc = run_cli(args, tmp_path, store)
    assert proc.returncode == 0, output(proc)
    (run,) = runs(store)
    assert run.info.status == "FINISHED", run.data.tags.get("error_message")
    assert run.data.tags["backend"] == "inductor" and run.data.metrics["compile/torch_total_s"] > 0
    assert run.data.metrics["diagnose/graph_breaks"] == 0


@pytest.mark.slow
def test_a_language_model_compiles_regionally_with_inductor(tmp_path: Path, store: str):
    """An HF model under the real compiler: llama_tiny's decoder layers compiled one by one."""
    proc = run_cli(["model=llama_tiny", "compile.scope=regional", *CLI_STEPS], tmp_path, store)
    assert proc.returncode == 0, output(proc)
    (run,) = runs(store)
    assert run.info.status == "FINISHED", run.data.tags.get("error_message")
    assert run_info(run)["info"]["compiled_regions"] == 2 and run.data.metrics["diagnose/graph_breaks"] == 0


def test_a_teacher_that_does_not_fit_names_teachers_that_do_and_they_do():
    with pytest.raises(ConfigError) as info:
        validate(compose(["model=vit_tiny", "loss=distillation"]))  # ViT-B/16 teacher, 1000 classes
    named = (
        info.value.allowed.split("teachers that fit (model@loss.teacher=): ")[1].split(" and ")[0].split(", ")
    )
    assert "vit_tiny_d3" in named or "vit_tiny" in named, named
    for teacher in named[:2]:
        validate(compose(["model=vit_tiny", "loss=distillation", f"model@loss.teacher={teacher}"]))
