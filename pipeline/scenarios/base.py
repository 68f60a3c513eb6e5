"""What a scenario is, torch-free: its config class (named by `conf/scenario/<name>.yaml`'s `_target_`)
holds its keys, its checks against the rest of the config (`fits`), the work of one unit (`work`) and, as
`runner`, where its implementation lives (imported only in the worker)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import yaml

from pipeline.config.errors import ConfigError
from pipeline.config.fields import doc
from pipeline.measure.objective import Work
from pipeline.provenance import PROJECT_ROOT

if TYPE_CHECKING:
    from pipeline.config.schema import Config

NO_LOSS_SCOPES = ("model", "regional", "step")  # what a scenario without a loss can compile


@functools.cache
def model_options() -> dict[str, dict[str, Any]]:
    """Each option of the `model` group (`vit_tiny`, `timm/resnet18`) with its file's keys, as written; a
    file that is not a YAML mapping is left out (Hydra refuses it where it is used)."""
    folder = PROJECT_ROOT / "conf" / "model"
    options = {}
    for path in sorted(folder.rglob("*.yaml")):
        try:
            keys = yaml.safe_load(path.read_text())
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if isinstance(keys, dict):
            options[str(path.relative_to(folder).with_suffix(""))] = keys
    return options


def models_listing(scenario: str) -> list[str]:
    """The model options whose config lists this opt-in scenario in `scenarios`."""
    return [name for name, keys in model_options().items() if scenario in (keys.get("scenarios") or [])]


@dataclass(kw_only=True)
class ScenarioConfig:
    """A scenario's settings. Subclasses add their keys (each a `doc` field) and set the class variables."""

    _target_: str = doc("", "dotted path of the scenario's config class (named by conf/scenario/<name>.yaml)")

    name: ClassVar[str]  # run names, the `scenario` tag
    runner: ClassVar[str]  # "module:Class" of its implementation (imported in the worker only)
    unit: ClassVar[str]  # what one unit of its work is, in words ("training step")
    trains: ClassVar[bool] = False  # it has a loss, an optimizer and weights it trains
    runs_distributed: ClassVar[bool] = False  # parallel=ddp/fsdp can run it
    opt_in: ClassVar[bool] = False  # a model runs it only when its config lists it in `model.scenarios`

    def check(self, at: str) -> Iterator[ConfigError]:
        """Combinations of this scenario's own keys."""
        return iter(())

    def fits(self, cfg: Config) -> Iterator[ConfigError]:
        """Whether the rest of the config (model, compile settings, loss, precision) can run this scenario."""
        if self.opt_in and self.name not in cfg.model.scenarios:
            yield ConfigError(
                "scenario",
                self.name,
                f"model={cfg.model.id} does not list it in its config's `scenarios` "
                f"({', '.join(cfg.model.scenarios) or 'none'}); models that do: {', '.join(models_listing(self.name))}",
            )
            return
        if not self.trains:
            if cfg.compile.scope not in NO_LOSS_SCOPES:
                yield ConfigError(
                    "compile.scope",
                    cfg.compile.scope,
                    f"scenario={self.name} has no loss: {', '.join(NO_LOSS_SCOPES)}",
                )
            if cfg.compile.optimizer:
                yield ConfigError("compile.optimizer", True, f"scenario={self.name} has no optimizer")
            if cfg.loss.teacher is not None:
                yield ConfigError(
                    "loss", cfg.loss.id, f"scenario={self.name} has no loss: leave loss=cross_entropy"
                )
        if cfg.parallel.distributed and not self.runs_distributed:
            yield ConfigError(
                "parallel", cfg.parallel.strategy, f"scenario={self.name} runs on one device: parallel=none"
            )

    def resolved(self, cfg: Config) -> ScenarioConfig:
        """This config with the nulls its scenario fills from the rest of the config filled in: what the
        job runs (its run's params say it). Scenarios with such keys override it."""
        return self

    def samples_per_unit(self, cfg: Config) -> float:
        """Samples one unit processes on one rank (a training step's batch, by default)."""
        return float(cfg.trainer.batch_size)

    def tokens_per_sample(self, cfg: Config) -> int | None:
        """Tokens in one sample of a unit: the sequence of a token model, none for images."""
        spec = cfg.model.input
        return spec.seq_len if spec.kind == "tokens" else None

    def work(self, cfg: Config) -> Work:
        """What one unit of this job does, over every rank."""
        samples = self.samples_per_unit(cfg) * cfg.parallel.nproc
        tokens = self.tokens_per_sample(cfg)
        return Work(unit=self.unit, samples=samples, tokens=samples * tokens if tokens else None)
