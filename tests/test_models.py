"""The model zoo: every model config composes, validates and builds; big models are counted on the meta
device; tiny ones train through the real CLI; the regional scope finds each family's repeated blocks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from pipeline.config.errors import ConfigError
from pipeline.config.schema import InputSpec, LossConfig, ModelConfig, to_config
from pipeline.job.preflight import validate
from tests.conftest import CONF, compose, output, run_cli, run_info, runs, sqlite_uri
from tests.custom_model_factory import parameter_count

MODEL_CONFIGS = sorted(p.stem for p in (CONF / "model").glob("*.yaml"))
# Full-size models: built on the meta device only (no memory, no init cost). Expected sizes in millions.
BIG = {
    "vit_b16": 86.6,
    "vit_b16_d24": 171.6,
    "resnet50": 25.6,
    "resnet152": 60.2,
    "convnext_tiny": 28.6,
    "gpt2": 124.4,
    "bert_base": 109.5,
    "llama_1b": 1235.8,
    "llama_7b": 6738.4,
}
# Small enough to build and train on a CPU in a test.
SMALL = [m for m in MODEL_CONFIGS if m not in BIG]
# Each small model trains 2 steps through the CLI with these settings (convnet at its real 256 px).
CLI_STEPS = [
    "trainer.steps=2",
    "trainer.warmup_steps=1",
    "trainer.batch_size=2",
    "compile.backend=aot_eager",
    "benchmark.paired_eager=false",
]


def model_node(name: str, overrides: list[str] | None = None) -> ModelConfig:
    return to_config(compose_model(name, overrides)).model


def compose_model(name: str, overrides: list[str] | None = None):
    return compose([f"model={name}", *(overrides or [])])


def build(name: str, overrides: list[str] | None = None) -> torch.nn.Module:
    from models import build_model

    torch.manual_seed(0)
    return build_model(model_node(name, overrides))


def build_on_meta(name: str) -> torch.nn.Module:
    from models import build_model

    with torch.device("meta"):
        return build_model(model_node(name))


def logits_shape(spec: InputSpec, batch: int) -> tuple[int, ...]:
    if spec.kind == "image" or spec.target == "class":
        return (batch, spec.num_classes)
    return (batch, spec.seq_len, spec.vocab_size)


def test_the_zoo_has_the_documented_models():
    documented = {"vit_tiny", "vit_tiny_d3", "resnet_tiny", "convnext_cpu", "gpt2_tiny", "bert_tiny", "llama_tiny", "convnet", "custom"}  # fmt: skip
    assert set(BIG) | documented <= set(MODEL_CONFIGS)


@pytest.mark.parametrize("name", MODEL_CONFIGS)
def test_every_model_config_composes_validates_and_resolves(name: str):
    from hydra.utils import get_method

    cfg = compose_model(name)
    if (
        cfg.model.scenarios and "train" not in cfg.model.scenarios
    ):  # e.g. llama_7b: inference and generation only
        cfg = compose_model(name, [f"scenario={cfg.model.scenarios[0]}"])
    validate(cfg)
    model = cfg.model
    assert model.id == name  # the file name is the label of its runs
    assert cfg.trainer.batch_size == model.batch_size > 0  # trainer.batch_size follows the model
    assert callable(get_method(model._target_))
    assert (CONF / "model" / f"{name}.yaml").read_text().startswith("# ")  # says what it is
    if model._target_ == "models.timm_models.create":
        from models.timm_models import model_exists

        assert model_exists(model.name)
    elif model._target_ == "models.hf.create":
        from models.hf import model_exists

        assert model_exists(model.name) and model.input.kind == "tokens"


@pytest.mark.parametrize("name", sorted(BIG))
def test_big_models_have_their_size_on_the_meta_device(name: str):
    net = build_on_meta(name)
    params = sum(p.numel() for p in net.parameters())
    assert params / 1e6 == pytest.approx(BIG[name], rel=0.01)
    assert all(p.device.type == "meta" for p in net.parameters())


def test_llama_1b_is_the_documented_config():
    config = build_on_meta("llama_1b").model.config
    assert (config.hidden_size, config.intermediate_size, config.num_hidden_layers) == (2048, 8192, 16)
    assert (config.num_attention_heads, config.num_key_value_heads, config.vocab_size) == (32, 8, 128256)
    assert config.max_position_embeddings == 2048 and config.tie_word_embeddings is True
    assert config.rope_parameters["rope_theta"] == 500000.0
    assert config.use_cache is False


@pytest.mark.parametrize("name", SMALL)
def test_small_models_build_and_give_logits_of_their_spec(name: str):
    from losses import build_loss
    from pipeline.axes.data import make_device_batch

    spec = model_node(name).input
    net = build(name)
    generator = torch.Generator().manual_seed(0)
    batch = make_device_batch(
        spec, 2, device=torch.device("cpu"), float_dtype=torch.float32, generator=generator
    )
    logits = net(batch["inputs"])
    assert tuple(logits.shape) == logits_shape(spec, 2)
    loss = build_loss(LossConfig(id="ce"), spec)(batch, logits)
    assert torch.isfinite(loss)
    loss.backward()
    assert all(p.grad is not None for p in net.parameters() if p.requires_grad)


@pytest.mark.parametrize("name, key", [("gpt2", "resid_pdrop"), ("gpt2", "embd_pdrop"), ("gpt2", "attn_pdrop"), ("gpt2_tiny", "attn_pdrop"), ("bert_base", "hidden_dropout_prob"), ("bert_base", "attention_probs_dropout_prob"), ("bert_tiny", "hidden_dropout_prob"), ("llama_1b", "attention_dropout"), ("llama_tiny", "attention_dropout")])  # fmt: skip
def test_hf_dropout_is_off_so_paired_loss_curves_match(name: str, key: str):
    from models.hf import make_config

    node = model_node(name)
    config = make_config(node.name, dataclasses.asdict(node.input), **node.kwargs)
    assert getattr(config, key) == 0.0


def test_hf_heads_follow_the_target():
    from models.hf import create

    spec = {"kind": "tokens", "vocab_size": 100, "seq_len": 8, "num_classes": 3}
    kw = {"num_hidden_layers": 1, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 32}
    ids = torch.randint(100, (2, 8))
    for target, head, shape in [
        ("next_token", "LlamaForCausalLM", (2, 8, 100)),
        ("class", "LlamaForSequenceClassification", (2, 3)),
    ]:
        net = create("llama", {**spec, "target": target}, **kw)
        assert type(net.model).__name__ == head and tuple(net(ids).shape) == shape
    net = create("bert", {**spec, "target": "masked_token"}, **kw)
    assert type(net.model).__name__ == "BertForMaskedLM" and tuple(net(ids).shape) == (2, 8, 100)


@pytest.mark.parametrize(
    "name, key, limit", [("gpt2", "n_positions", 1024), ("llama_tiny", "max_position_embeddings", 64)]
)
def test_hf_sequence_longer_than_the_positions_names_the_key(name: str, key: str, limit: int):
    from models.hf import create

    node = model_node(name, [f"model.input.seq_len={limit + 1}"])
    with pytest.raises(ValueError) as info, torch.device("meta"):
        create(node.name, dataclasses.asdict(node.input), **node.kwargs)
    assert isinstance(info.value, ConfigError) and info.value.key == "model.input.seq_len"
    assert f"{key}={limit}" in str(info.value) and f"model.kwargs.{key}" in str(info.value)


def test_hf_unknown_model_type_names_the_key():
    from models.hf import create, model_exists

    assert model_exists("gpt2") and model_exists("llama") and not model_exists("gpt5")
    with pytest.raises(ConfigError, match=r"^model\.name='gpt5'"):
        create("gpt5", {"kind": "tokens", "vocab_size": 10, "seq_len": 4, "target": "next_token"})


def test_convnet_is_the_articles_network():
    net = build("convnet")
    convs = [m for m in net if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels) for c in convs] == [(3, 8), (8, 12), (12, 16), (16, 20), (20, 24), (24, 28), (28, 32), (32, 10)]  # fmt: skip
    assert all(c.kernel_size == (3, 3) and c.padding == (1, 1) for c in convs)
    assert (
        sum(isinstance(m, torch.nn.MaxPool2d) for m in net)
        == sum(isinstance(m, torch.nn.ReLU) for m in net)
        == 8
    )
    assert tuple(net(torch.randn(2, 3, 256, 256)).shape) == (2, 10)


def test_convnet_refuses_images_its_pools_cannot_bring_to_one_pixel():
    with pytest.raises(
        ConfigError, match=r"^model\.input\.height=32 is not allowed: must be in \[256, 511\]"
    ):
        build("convnet", ["model.input.height=32"])


# ---------------------------------------------------------------------------------------- regional scope
REGIONS = [
    ("vit_tiny", 2, "Block"),
    ("resnet_tiny", 8, "BasicBlock"),
    ("convnext_cpu", 8, "ConvNeXtBlock"),
    ("gpt2_tiny", 2, "GPT2Block"),
    ("bert_tiny", 2, "BertLayer"),
    ("llama_tiny", 2, "LlamaDecoderLayer"),
    ("vit_b16", 12, "Block"),
    ("resnet50", 16, "Bottleneck"),
    ("convnext_tiny", 18, "ConvNeXtBlock"),
    ("gpt2", 12, "GPT2Block"),
    ("bert_base", 12, "BertLayer"),
    ("llama_1b", 16, "LlamaDecoderLayer"),
]


@pytest.mark.parametrize("name, count, block", REGIONS)
def test_regional_scope_finds_the_repeated_blocks(name: str, count: int, block: str):
    from pipeline.axes.compile import repeated_blocks

    net = build_on_meta(name)
    blocks = repeated_blocks(net)
    assert len(blocks) == count and {type(b).__name__ for b in blocks} == {block}


@pytest.mark.parametrize("name", ["convnet", "custom"])
def test_regional_scope_on_a_model_without_repeated_blocks_says_so(name: str):
    from pipeline.axes.compile import compile_regions

    net = build(name)
    with pytest.raises(ValueError, match=r"compile\.scope=regional: \w+ has no repeated blocks"):
        compile_regions(net, {"backend": "aot_eager"})


# ---------------------------------------------------------------------------------------- the real CLI
@pytest.fixture(scope="module")
def small_models_sweep(tmp_path_factory):
    """One multirun over every small model (one Hydra start-up for all): 2 steps each, aot_eager."""
    tmp = tmp_path_factory.mktemp("small_models")
    store = sqlite_uri(tmp / "mlflow.db")
    proc = run_cli([f"model={','.join(SMALL)}", *CLI_STEPS], tmp, store, multirun=True)
    jobs = {r.data.tags["model"]: r for r in runs(store) if r.data.tags.get("sweep_parent") != "true"}
    return proc, jobs


@pytest.mark.slow
@pytest.mark.parametrize("name", SMALL)
def test_small_model_trains_two_steps_through_the_cli(small_models_sweep, name: str):
    proc, jobs = small_models_sweep
    assert name in jobs, output(proc)
    run = jobs[name]
    assert run.info.status == "FINISHED", run.data.tags.get("error_message") or output(proc)
    assert run.data.metrics["step/count"] == 1 and run.data.metrics["diagnose/frames_compiled"] >= 1
    assert run.data.params["model._target_"] == compose_model(name).model._target_
    assert run_info(run)["info"]["parameters"] > 0


@pytest.mark.slow
def test_every_small_model_sweep_exits_zero(small_models_sweep):
    proc, jobs = small_models_sweep
    assert proc.returncode == 0 and len(jobs) == len(SMALL), output(proc)


@pytest.mark.slow
def test_hf_models_compile_regionally_through_the_cli(tmp_path: Path, store: str):
    proc = run_cli(
        ["model=gpt2_tiny,bert_tiny,llama_tiny", "compile.scope=regional", *CLI_STEPS],
        tmp_path,
        store,
        multirun=True,
    )
    assert proc.returncode == 0, output(proc)
    jobs = [r for r in runs(store) if r.data.tags.get("sweep_parent") != "true"]
    assert len(jobs) == 3
    for run in jobs:
        assert run.info.status == "FINISHED", run.data.tags.get("error_message")
        assert run_info(run)["info"]["compiled_regions"] == 2


@pytest.mark.slow
def test_convnet_regional_fails_with_a_clear_message(tmp_path: Path, store: str):
    proc = run_cli(["model=convnet", "compile.scope=regional", *CLI_STEPS], tmp_path, store)
    assert proc.returncode == 1, output(proc)
    (run,) = runs(store)
    assert run.info.status == "FAILED"
    message = run.data.tags["error_message"]
    assert message.startswith("compile.scope=regional: ConvNet has no repeated blocks"), message
    assert "compile.scope=regional: ConvNet has no repeated blocks" in proc.stdout


@pytest.mark.slow
def test_a_custom_factory_from_a_test_module_runs_through_the_cli(tmp_path: Path, store: str):
    args = [
        "model=custom",
        "model.id=my_cnn",
        "model._target_=tests.custom_model_factory.build",
        "+model.kwargs.width=16",
        "model.input.height=16",
        "model.input.width=16",
        "model.input.num_classes=5",
        "model.batch_size=4",
        *CLI_STEPS[:2],
        *CLI_STEPS[3:],
    ]
    proc = run_cli(args, tmp_path, store)
    assert proc.returncode == 0, output(proc)
    (run,) = runs(store)
    assert run.info.status == "FINISHED", run.data.tags.get("error_message")
    assert run.info.run_name.startswith("my_cnn·") and run.data.tags["model"] == "my_cnn"
    assert run.data.params["trainer.batch_size"] == "4"  # follows model.batch_size
    assert run_info(run)["info"]["parameters"] == parameter_count(3, 5, 16)
