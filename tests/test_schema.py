"""The config contract: defaults, groups, and bad input that names the key, the value and what is allowed."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from pipeline.config.compose import describe_compose_error
from pipeline.config.errors import ConfigError
from pipeline.config.schema import COMPILE_MODES
from pipeline.job.preflight import validate
from tests.conftest import compose


def test_defaults_are_the_documented_contract():
    cfg = compose()
    assert cfg.model.id == "vit_b16" and cfg.model.name == "vit_base_patch16_224"
    assert (cfg.model.input.height, cfg.model.input.num_classes) == (224, 1000)
    assert cfg.loss.id == "ce" and cfg.precision.id == "amp" and cfg.precision.autocast_dtype == "bfloat16"
    assert cfg.compile.mode == "default" and cfg.compile.backend == "inductor"
    assert cfg.compile.fullgraph is False and cfg.compile.dynamic is None and cfg.compile.scope == "model"
    assert (cfg.trainer.steps, cfg.trainer.warmup_steps, cfg.trainer.batch_size) == (100, 10, 64)
    assert cfg.trainer.optimizer._target_ == "torch.optim.Adam"
    assert cfg.data.loader is False and cfg.device == "auto"
    validate(cfg)


def test_batch_size_follows_the_model_unless_set():
    assert compose(["model=vit_tiny"]).trainer.batch_size == 8
    assert compose(["model=vit_tiny", "trainer.batch_size=3"]).trainer.batch_size == 3


@pytest.mark.parametrize(
    "precision, autocast, params, tf32, scaler",
    [
        ("amp", "bfloat16", "float32", False, False),
        ("fp32", None, "float32", False, False),
        ("tf32", None, "float32", True, False),
        ("amp_fp16", "float16", "float32", False, True),
        ("bf16", None, "bfloat16", False, False),
    ],
)
def test_precision_options(precision, autocast, params, tf32, scaler):
    p = compose([f"precision={precision}"]).precision
    assert (p.autocast_dtype, p.param_dtype, p.tf32, p.grad_scaler) == (autocast, params, tf32, scaler)


def test_mlflow_default_is_an_absolute_sqlite_path_under_outputs(monkeypatch, tmp_path):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    uri = compose().mlflow.tracking_uri
    assert uri == f"sqlite:///{tmp_path.resolve()}/outputs/mlflow.db"
    # resolvable without Hydra's runtime config, as in a multirun callback or a job on another launcher
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().cfg = None
    assert OmegaConf.create({"u": "${oc.env:MLFLOW_TRACKING_URI,${default_store:}}"}).u == uri


def test_mlflow_tracking_uri_env_wins(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5999")
    assert compose().mlflow.tracking_uri == "http://127.0.0.1:5999"


def bad(overrides: list[str]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        validate(compose(overrides))
    return info.value


@pytest.mark.parametrize(
    "overrides, key, value, allowed",
    [
        (["trainer.steps=0"], "trainer.steps", 0, "> 0"),
        (["trainer.steps=-5"], "trainer.steps", -5, "> 0"),
        (["trainer.steps=5", "trainer.warmup_steps=5"], "trainer.warmup_steps", 5, "< trainer.steps=5"),
        (["trainer.batch_size=0"], "trainer.batch_size", 0, "> 0"),
        (["compile.mode=fast"], "compile.mode", "fast", "max-autotune-no-cudagraphs"),
        (["compile.backend=nope"], "compile.backend", "nope", "inductor"),
        (
            ["compile.mode=max_autotune"],
            "compile.mode",
            "max_autotune",
            "did you mean compile.mode=max-autotune? ",
        ),
        (
            ["compile.backend=indcutor"],
            "compile.backend",
            "indcutor",
            "did you mean compile.backend=inductor? ",
        ),
        (["compile.scope=everything"], "compile.scope", "everything", "model_and_loss"),
        (["device=tpu"], "device", "tpu", "auto, cuda, cpu"),
        (["compile.mode=eager", "compile.fullgraph=true"], "compile.fullgraph", True, "compile.mode=eager"),
        (["compile.mode=eager", "compile.dynamic=true"], "compile.dynamic", True, "compile.mode=eager"),
        (
            ["compile.backend=aot_eager", "compile.mode=max-autotune"],
            "compile.mode",
            "max-autotune",
            "inductor",
        ),
        (["data.loader=true", "data.non_blocking=true"], "data.non_blocking", True, "pin_memory"),
        (  # a scenario's own key, in words (never OmegaConf's "AnyNode is not a ListConfig")
            ["scenario=inference", "scenario.batch_sizes=4"],
            "scenario.batch_sizes",
            4,
            "expected a list of integers",
        ),
        (
            ["scenario=inference", "scenario.batch_size=abc"],
            "scenario.batch_size",
            "abc",
            "an integer or null",
        ),
    ],
)
def test_bad_values_name_key_value_and_what_is_allowed(overrides, key, value, allowed):
    err = bad(overrides)
    assert (err.key, err.value) == (key, value)
    assert allowed in err.allowed
    assert key in str(err) and repr(value) in str(err)


def test_every_mode_with_a_dash_is_accepted():
    for mode in COMPILE_MODES:
        validate(compose([f"compile.mode={mode}"]))


def test_all_errors_are_collected():
    err = bad(["trainer.steps=0", "trainer.batch_size=-1", "compile.mode=nope"])
    assert {e.key for e in err.errors} == {"trainer.steps", "trainer.batch_size", "compile.mode"}


def compose_error(overrides: list[str]) -> str:
    with pytest.raises(Exception) as info:
        compose(overrides)
    return describe_compose_error(info.value)


def test_unknown_group_option_lists_the_options():
    message = compose_error(["model=vit_huge"])
    assert message.startswith("model=vit_huge is not an option of the `model` group: allowed values are ")
    assert {"vit_b16", "vit_tiny"} <= set(message.split(": allowed values are ")[1].split(", "))
    message = compose_error(["precision=fp4"])
    assert (
        message.startswith("precision=fp4 is not an option")
        and "amp, amp_fp16, bf16, fp16, fp32, fp8, tf32" in message
    )


def test_misspelt_key_lists_the_keys_that_exist():
    message = compose_error(["trainer.stepz=3"])
    assert (
        message.startswith("trainer.stepz is not a config key")
        and "steps, warmup_steps, batch_size" in message
    )


def test_wrong_type_names_the_expected_type():
    assert compose_error(["trainer.steps=abc"]) == "trainer.steps='abc' is not allowed: expected an integer"
    assert (
        compose_error(["compile.dynamic=maybe"])
        == "compile.dynamic='maybe' is not allowed: expected true/false or null"
    )


@pytest.mark.parametrize(
    "overrides, key, value, allowed",
    [
        (
            ["model.name=vit_base_patch16_2244"],
            "model.name",
            "vit_base_patch16_2244",
            "close: vit_base_patch16_224",
        ),
        (["model=gpt2_tiny", "model.name=gpt3"], "model.name", "gpt3", "HF model type"),
        (["model=gpt2_tiny", "model.input.seq_len=4096"], "model.input.seq_len", 4096, "n_positions"),
        (
            ["model._target_=models.nowhere.build"],
            "model._target_",
            "models.nowhere.build",
            "importable factory",
        ),
        (["compile.scope=step", "compile.fullgraph=true"], "compile.fullgraph", True, "backward()"),
    ],
)
def test_models_that_do_not_exist_fail_before_anything_runs(overrides, key, value, allowed):
    err = bad(overrides)
    assert (err.key, err.value) == (key, value)
    assert allowed in err.allowed


def test_a_teachers_problems_name_the_teacher():
    err = bad(
        [
            "model=vit_tiny",
            "loss=distillation",
            "model@loss.teacher=vit_tiny_d3",
            "loss.teacher.name=vit_nope",
        ]
    )
    assert err.key == "loss.teacher.name"


def test_compile_options_take_the_mapping_form_and_only_inductor_options():
    """`compile.options={...}` composes (Hydra's struct mode refused it as "not a config key"); each
    key is checked against the installed torch's inductor config before anything starts, and a backend
    that would ignore options refuses them."""
    cfg = validate(
        compose(["model=vit_tiny", "compile.options={max_autotune: true, triton.cudagraphs: false}"])
    )
    assert cfg.compile.inductor_options() == {"max_autotune": True, "triton.cudagraphs": False}
    nested = validate(compose(["model=vit_tiny", "+compile.options.triton.cudagraphs=false"]))
    assert nested.compile.inductor_options() == {"triton.cudagraphs": False}  # as torch takes it
    with pytest.raises(ConfigError) as err:
        validate(compose(["model=vit_tiny", "compile.options={max_autotun: true}"]))
    assert err.value.key == "compile.options.max_autotun" and "close: max_autotune" in err.value.allowed
    with pytest.raises(ConfigError) as err:
        validate(compose(["model=vit_tiny", "compile.options={max_autotune: 1}"]))
    assert "takes bool" in str(err.value)
    with pytest.raises(ConfigError) as err:
        validate(
            compose(["model=vit_tiny", "compile.backend=aot_eager", "compile.options={max_autotune: true}"])
        )
    assert err.value.key == "compile.options" and "would ignore them" in err.value.allowed


def test_unknown_keys_are_refused_except_under_open_mappings():
    """`+key=value` adds any key: the schema's keys only, but for the open mappings (the scenario's
    config class checks its own keys)."""
    assert bad(["+devcie=cpu"]).key == "devcie"
    assert bad(["+loss.teacher_x=1"]).key == "loss.teacher_x"
    assert bad(["+scenario.stepz=1"]).key == "scenario.stepz"
    for fine in ("+model.kwargs.qkv_bias=true", "+trainer.optimizer.kwargs.weight_decay=0.1"):
        validate(compose([fine]))
    validate(compose(["+compile.options.max_autotune=true"]))


@pytest.mark.slow
def test_no_config_file_adds_a_key_the_schema_lacks():
    """Every option of every config group composes to keys of the schema only (94 compositions)."""
    from pathlib import Path

    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import open_dict

    from pipeline.config.schema import register_configs, unknown_keys

    register_configs()  # conf/config.yaml extends the schema's `base_config`, whatever ran before
    conf = Path(__file__).resolve().parent.parent / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):  # once: composing is the cost
        for group in (
            "model",
            "loss",
            "precision",
            "scenario",
            "parallel",
            "experiment",
            "inductor",
            "sweep",
        ):
            for path in sorted((conf / group).rglob("*.yaml")):
                option = path.relative_to(conf / group).with_suffix("").as_posix()
                cfg = hydra_compose("config", overrides=[f"{group}={option}"])
                with open_dict(cfg):
                    cfg.pop("hydra", None)
                assert unknown_keys(cfg) == [], f"{group}={option}"


def test_a_compiled_optimizer_step_beside_fused_adam_is_refused_in_one_line():
    """torch.compile does not trace Adam's fused kernel (torch disables it: the step graph-breaks and runs
    eagerly), so compile.optimizer=true with trainer.optimizer.fused=true would be measured as something
    it is not; the foreach step compiles, and fused Adam alone runs."""
    with pytest.raises(ConfigError) as err:
        validate(compose(["model=vit_tiny", "compile.optimizer=true", "trainer.optimizer.fused=true"]))
    assert "compile.optimizer" in str(err.value) and "trainer.optimizer.fused=false" in str(err.value)
    validate(compose(["model=vit_tiny", "compile.optimizer=true", "trainer.optimizer.fused=false"]))
    validate(compose(["model=vit_tiny", "compile.optimizer=false", "trainer.optimizer.fused=true"]))
