"""Bad input, said in one line: the key, the bad value and what is allowed."""

from __future__ import annotations

import difflib
from typing import Any

from pipeline.redaction import MASK, looks_secret


class ConfigError(ValueError):
    """Bad input. `str(err)` is the one line shown to the user; `errors` holds every error found when
    a check collected several (the first is the one raised). The value of a secret-looking key is
    masked in the line (`shown`)."""

    def __init__(self, key: str, value: Any, allowed: str):
        self.key, self.value, self.allowed = key, value, allowed
        self.errors: list[ConfigError] = [self]
        super().__init__(f"{key}={self.shown!r} is not allowed: {allowed}")

    @property
    def shown(self) -> Any:
        """The value as it may be written anywhere."""
        return MASK if looks_secret(self.key) else self.value


def not_one_of(key: str, value: Any, choices: Any) -> ConfigError:
    """`value` is not among `choices`: the allowed values, with the closest one first where it is a typo."""
    close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
    hint = f"did you mean {key}={close[0]}? " if close else ""
    return ConfigError(key, value, f"{hint}allowed values are " + ", ".join(map(str, choices)))
