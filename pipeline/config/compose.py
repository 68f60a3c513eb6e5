"""Hydra's composition errors (an unknown key, a wrong type, a missing group option, an override that
does not parse, a key removed with `~`, a config file that is not YAML) in one line naming the key, the
bad value and what is allowed, read from the schema; control characters in it are escaped."""

from __future__ import annotations

import difflib
import textwrap
import unicodedata
from dataclasses import fields, is_dataclass
from typing import Any

from omegaconf import OmegaConf

from pipeline.config.fields import type_words
from pipeline.config.schema import schema_node
from pipeline.scenarios import CONF


def nested_options(group: str, option: str) -> list[str]:
    """Where a group's option lives in a subgroup of it (`model=resnet18` -> `timm/resnet18`); a typo's
    nearest option is suggested otherwise."""
    if not group or not option or "/" in option:
        return []
    return sorted(
        str(p.relative_to(CONF / group).with_suffix("")) for p in (CONF / group).glob(f"*/{option}.yaml")
    )


def describe_compose_error(err: BaseException) -> str:
    """One line for a Hydra composition error: the key, the bad value, what is allowed."""
    return printable(_describe(err))


def printable(text: str) -> str:
    """`text` on one line, its control characters (line breaks, ANSI escapes) written as escapes."""
    return "".join(
        c if unicodedata.category(c) not in ("Cc", "Cf") else c.encode("unicode_escape").decode()
        for c in text
    )


def config_error_lines(errors: list[Any]) -> str:
    """Each error (ConfigError) as its `config error: ...` line, the way every refusal is printed."""
    return "\n".join(f"config error: {printable(str(e))}" for e in errors)


def yaml_error(err: BaseException) -> BaseException | None:
    """The YAML syntax error behind a composition error, if that is what it is."""
    import yaml

    seen = err
    while seen is not None:
        if isinstance(seen, yaml.YAMLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _describe(err: BaseException) -> str:
    from hydra.errors import MissingConfigException, OverrideParseException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ConfigTypeError, ValidationError

    bad_yaml = yaml_error(err)
    if bad_yaml is not None:  # `<file>, line L, column C: <problem>`: the first place the parser stopped
        mark = getattr(bad_yaml, "problem_mark", None) or getattr(bad_yaml, "context_mark", None)
        problem = getattr(bad_yaml, "problem", None) or str(bad_yaml).splitlines()[0]
        where = (
            f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}"
            if mark is not None
            else "a config file"
        )
        return f"{where} is not valid YAML: {problem}"
    cause = err.__cause__ or err
    if isinstance(cause, ConfigTypeError) and "does not support deletion" in str(cause):
        key = getattr(cause, "full_key", "") or "?"
        return f"~{key}: a key of the schema cannot be removed; set it instead ({key}=<value>)"
    if isinstance(err, MissingConfigException) and err.options is not None:
        missing = str(err.missing_cfg_file or "")
        group, _, option = missing.rpartition("/")
        nested = nested_options(group, option) or difflib.get_close_matches(option, err.options, n=1)
        hint = f"did you mean {' or '.join(f'{group}={n}' for n in nested)}? " if nested else ""
        subgroups = sorted(p.name for p in (CONF / group).glob("*/") if p.is_dir()) if group else []
        more = "".join(f", {group}={sub}/<name>" for sub in subgroups)
        return (
            f"{group}={option} is not an option of the `{group}` group: {hint}allowed values are "
            f"{', '.join(err.options)}{more} (--help lists them)"
        )
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)) and getattr(cause, "full_key", None):
        path = cause.full_key.split(".")
        parent = schema_node(path[:-1])
        is_section = isinstance(parent, type) and is_dataclass(parent)
        allowed = ", ".join(f.name for f in fields(parent)) if is_section else ""
        where = ".".join(path[:-1]) or "the top level"
        return f"{cause.full_key} is not a config key: {where} has {allowed or 'no such key'}"
    if isinstance(cause, ValidationError) and getattr(cause, "full_key", None):
        value = getattr(cause, "value", None)
        tp = schema_node(cause.full_key.split("."))
        expected = type_words(tp) if tp is not None else "another type"
        return f"{cause.full_key}={value!r} is not allowed: expected {expected}"
    if isinstance(err, OverrideParseException):
        first = str(err).splitlines()[0]
        if first.startswith("LexerNoViableAltException"):
            return (
                f"cannot parse the override: {first}: quote a value holding spaces or characters other than "
                "letters, digits and _-+./:@ (`model.id='café'`; in a shell: \"model.id='café'\")"
            )
        return f"cannot parse the override: {first}"
    return " ".join(str(err).split())


HELP_WIDTH = 100  # `--help` fits a terminal this wide


def config_groups(width: int = HELP_WIDTH) -> str:
    """`--help`'s config groups (`group: option, ...`, a subgroup as `model/timm: ...`), each wrapped
    within `width` columns; Hydra's own listing puts a group on one line (model/timm's: 800 columns)."""
    lines = []
    for folder in sorted(
        p for p in CONF.rglob("*") if p.is_dir() and "hydra" not in p.relative_to(CONF).parts
    ):
        options = sorted(p.stem for p in folder.glob("*.yaml"))
        if options:
            group = folder.relative_to(CONF).as_posix()
            lines += textwrap.wrap(f"{group}: {', '.join(options)}", width, subsequent_indent="    ")
    return "\n".join(lines)


OmegaConf.register_new_resolver("config_groups", config_groups, replace=True)  # conf/hydra/help
