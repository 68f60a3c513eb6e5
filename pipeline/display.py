"""Figures and lines as people read them, one rule everywhere (torch-free): a figure with a 95% interval
is rounded at its half-width's first significant digit, within MIN_DIGITS..MAX_DIGITS significant digits
(184.18 within [101.39, 259.15] is `184 [101, 259]`), one without gets PLAIN_DIGITS; lines fit the terminal.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import textwrap

TERMINAL_WIDTH = 120  # at most; a narrower terminal (or COLUMNS) is respected
MAX_DIGITS = 4  # never more: a fifth digit of a timing is noise on any host
MIN_DIGITS = 3
PLAIN_DIGITS = 3  # a figure whose interval is unknown, or too wide to say anything
DASH = "–"


def _magnitude(value: float) -> int:
    """The power of ten of the value's first significant digit."""
    return math.floor(math.log10(abs(value)) + 1e-9) if value else 0  # 0.0999...96 is 0.1


def decimals_for(value: float, low: float | None = None, high: float | None = None) -> int:
    """The decimal places (negative: tens, hundreds) `value` is shown with, given its interval."""
    top = _magnitude(value)
    digits = PLAIN_DIGITS
    if low is not None and high is not None and math.isfinite(low) and math.isfinite(high) and high > low:
        digits = top - _magnitude((high - low) / 2) + 1  # down to the half-width's first significant digit
    digits = min(MAX_DIGITS, max(MIN_DIGITS, digits))
    return digits - 1 - top


def capped(value: float, decimals: int) -> int:
    """`decimals`, fewer where `value` would show more than MAX_DIGITS significant digits (9.9996 at three
    places is 10.000)."""
    if not math.isfinite(value) or not value:
        return decimals
    decimals = min(decimals, MAX_DIGITS - 1 - _magnitude(value))
    rounded = round(value, decimals)
    if rounded and _magnitude(rounded) + decimals + 1 > MAX_DIGITS:
        decimals -= 1
    return decimals


def at(value: float, decimals: int) -> str:
    """`value` at `decimals` places (negative: rounded to tens, hundreds, ...)."""
    if not math.isfinite(value):
        return DASH if math.isnan(value) else ("inf" if value > 0 else "-inf")
    text = f"{round(value, decimals):.{max(decimals, 0)}f}"
    return "0" if text.strip("-0.") == "" else text


def figure(value: float | None, low: float | None = None, high: float | None = None) -> str:
    """The figure alone, rounded as its interval allows (`184`, `10.39`, `0.000929`)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DASH
    text = at(value, capped(value, decimals_for(value, low, high)))
    if low is None or high is None:  # no interval claims a precision: no trailing zeros (0.93, not 0.930)
        text = text.rstrip("0").rstrip(".") if "." in text else text
    return text


def rounded(value: float, low: float, high: float) -> tuple[str, str, str]:
    """The figure and its interval's ends at one number of places (`184`, `101`, `259`)."""
    places = min(capped(x, decimals_for(value, low, high)) for x in (value, low, high))
    return at(value, places), at(low, places), at(high, places)


def with_interval(value: float, low: float, high: float, *, undetermined: bool = False) -> str:
    """`184 [101, 259]`; `[undetermined]` for an interval too wide to say anything (docs/verdicts.md)."""
    if undetermined or not (math.isfinite(low) and math.isfinite(high)):
        return f"{figure(value)} [undetermined]"  # rounded as a figure without an interval
    shown, low_shown, high_shown = rounded(value, low, high)
    return f"{shown} [{low_shown}, {high_shown}]"


# What a result's words call its unit (the work's unit, as the scenario states it).
UNIT_WORDS = {"training step": "step", "forward call": "call"}


def unit_word(unit: str | None) -> str:
    """`step`, `call`, `decode step`: a unit of work as a line names it."""
    return UNIT_WORDS.get(unit or "training step", unit or "step")


# A sweep of other units says its own word for "step" in these phrases only (names like `step/noisy` stay).
STEP_PHRASES = (
    "step-time",
    "step times",
    "step time",
    "measured steps",
    "tenth of steps",
    "fastest step",
    "of its steps",
    "every step",
    "the steps spread",
    "more steps",
    "autocorrelated steps",
    "stalls and steps from",
    "over the measured steps",
)


def in_unit_words(text: str, word: str) -> str:
    """`text` saying `word` (`call`) where it says a training step, and where it says an inference call
    (`call cycle`: one call of each batch size)."""
    for phrase in STEP_PHRASES:
        text = text.replace(phrase, phrase.replace("step", word))
    return text.replace("one call", f"one {word}") if word != "step" else text


def first_few(names: list[str], most: int = 3) -> str:
    """`a, b, c and 2 more`: the first `most` names of a list a line cannot hold whole."""
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def terminal_width() -> int:
    return min(TERMINAL_WIDTH, shutil.get_terminal_size((TERMINAL_WIDTH, 24)).columns)


def wrapped(text: str, width: int | None = None) -> list[str]:
    """`text` in lines of at most `width` columns (the terminal's: a terminal, or COLUMNS set; else whole,
    as a log file keeps it), continuations indented; a path or URL is never cut."""
    width = width or (terminal_width() if os.environ.get("COLUMNS") or sys.stdout.isatty() else None)
    if width is None:
        return [text]
    return textwrap.wrap(
        text, width, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False
    ) or [""]
