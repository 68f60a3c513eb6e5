"""Hugging Face transformers models, built from a config object only (random weights, nothing is
downloaded): `model.name` is the HF model type (`gpt2`, `bert`, `llama`, ... any key of
`transformers.CONFIG_MAPPING`) and `model.kwargs` are fields of its config class.

The head follows the input spec's `target`: `next_token` -> causal LM, `masked_token` -> masked LM,
`class` -> sequence classification with `num_classes` labels. The model is wrapped so that
`model(input_ids)` returns the logits tensor only, as the training step expects.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

AUTO_CLASSES = {
    "next_token": "AutoModelForCausalLM",
    "masked_token": "AutoModelForMaskedLM",
    "class": "AutoModelForSequenceClassification",
}
# The config fields that bound the sequence length, by the name the config classes use.
MAX_POSITION_KEYS = ("n_positions", "max_position_embeddings")
SPECIAL_TOKEN_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id")


class LogitsOnly(nn.Module):
    """`forward(input_ids) -> logits`: drops the rest of the HF output (hidden states, cache, loss)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).logits


def make_config(name: str, input_spec: dict[str, Any], **config_kwargs: Any) -> Any:
    """The HF config for model type `name`, with the vocabulary of the input spec and no KV cache;
    raises a ConfigError (a ValueError) naming the key when the sequence does not fit."""
    from transformers import CONFIG_MAPPING, AutoConfig

    from pipeline.config.errors import ConfigError

    if name not in CONFIG_MAPPING:
        raise ConfigError(
            "model.name",
            name,
            "must be an HF model type (a key of transformers.CONFIG_MAPPING): gpt2, bert, llama, ...",
        )
    if input_spec.get("kind", "tokens") != "tokens":
        raise ConfigError(
            "model.input.kind", input_spec["kind"], "HF models (models.hf.create) take `tokens`"
        )
    vocab = config_kwargs.setdefault("vocab_size", input_spec["vocab_size"])
    defaults = CONFIG_MAPPING[name]()
    for key in SPECIAL_TOKEN_KEYS:  # e.g. GPT-2's 50256 does not exist in a tiny test vocabulary
        default = getattr(defaults, key, None)
        if key not in config_kwargs and isinstance(default, int) and default >= vocab:
            config_kwargs[key] = None
    config_kwargs.setdefault("use_cache", False)
    if input_spec["target"] == "class":
        config_kwargs.setdefault("num_labels", input_spec["num_classes"])
    config = AutoConfig.for_model(name, **config_kwargs)
    if input_spec["target"] == "class" and getattr(config, "pad_token_id", None) is None:
        # Sequence classifiers pick the last non-pad token; some refuse batches > 1 without a pad id.
        config.pad_token_id = 0
    for key in MAX_POSITION_KEYS:
        limit = getattr(config, key, None)
        if isinstance(limit, int) and input_spec["seq_len"] > limit:
            raise ConfigError(
                "model.input.seq_len",
                input_spec["seq_len"],
                f"must be <= the {name} config's {key}={limit} (raise model.kwargs.{key} or shorten the sequence)",
            )
    return config


def create(name: str, input_spec: dict[str, Any], **config_kwargs: Any) -> nn.Module:
    """A randomly initialized HF model of type `name`, its head chosen by `input_spec['target']`."""
    import transformers

    config = make_config(name, input_spec, **config_kwargs)
    auto = getattr(transformers, AUTO_CLASSES[input_spec["target"]])
    return LogitsOnly(auto.from_config(config))


def model_exists(name: str) -> bool:
    """Whether `name` is an HF model type (a key of `transformers.CONFIG_MAPPING`)."""
    from transformers import CONFIG_MAPPING

    return name in CONFIG_MAPPING
