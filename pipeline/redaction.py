"""Secrets never leave the machine: secret-looking keys' values are masked and URIs lose their passwords
wherever a value is written: by key in structured data (:func:`redacted`), as `key=value` pairs in free
text (:func:`redact_text`), by value in text that may quote one without its key (:func:`scrub`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import urllib.parse
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

_SECRET = re.compile(
    r"(SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|COOKIE|(^|_|\.)PWD$|(^|_|\.)(API_?|PRIVATE_?)?KEY$)",
    re.IGNORECASE,
)
# The words of a snake_case, kebab-case or camelCase name: `token` as a word is a secret (`hf_token`,
# `HF_TOKEN`, `apiToken`); counts of tokens are not (`new_tokens`, `tokens_per_s`, `tokenizer`).
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
MASK = "***"
# `key=value` or `key: value` in free text; the key may be quoted, dotted or prefixed (`+a.b`, `"a"`).
_KEY = re.compile(r"""(?P<key>["']?[+~]{0,2}[\w.-]+["']?)(?P<sep>\s*=\s*|:\s+|:(?=["']))""")
# Its value: quoted, a mapping or list, or up to the next space (a swept `k=a,b` is one value), the
# next `,` `}` `]` inside a mapping, or the next `·` of a run name (`...·db_password=***·seed=1`).
_VALUE = re.compile(r"""'[^']*'|"[^"]*"|\{[^}]*\}|\[[^\]]*\]|[^\s,}\]·]+(?:,[^\s,}\]=:·]+)*""")
# Hydra writes overrides with `\:`, `\=`, ... in its log lines (`#0 : a=http\://u\:pw@host`).
_HYDRA_ESCAPE = re.compile(r"\\([\\:=,()\[\]{}' ])")
_URI = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"]+")
MIN_SCRUBBED_LENGTH = 4  # shorter values (`1`, `on`) would mask unrelated text
# Prose words that look like a secret key before `:` or `=` (`not a config key: ...`); a config key so
# named is dotted, prefixed or spelled otherwise (`model.kwargs.key`, `+key`, `api_key`) and stays masked.
_PROSE_WORDS = {"key"}


def looks_secret(key: str) -> bool:
    """A dotted key any of whose parts names a secret (`model.kwargs.hf_token`, `db.password`); a count
    of tokens (`scenario.new_tokens`) is none."""
    return any(
        _SECRET.search(part) or any(word.lower() == "token" for word in _WORD.findall(part))
        for part in key.strip("'\"").lstrip("+~").split(".")
    )


def redact_uri(uri: str) -> str:
    """Drop a password from a URI (`postgresql://user:pw@host/db` -> `postgresql://user:***@host/db`)."""
    password = _password(uri)
    if not password:
        return uri
    parts = urllib.parse.urlsplit(uri)
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{password}@", f":{MASK}@")))


def _password(uri: str) -> str | None:
    try:
        return urllib.parse.urlsplit(uri).password
    except ValueError:  # not a URI after all (e.g. an unparsable port)
        return None


def redacted(data: Any, path: str = "") -> Any:
    """A copy with the values of secret-looking keys masked and passwords dropped from URIs."""
    if isinstance(data, dict):
        return {k: redacted(v, f"{path}.{k}" if path else str(k)) for k, v in data.items()}
    if isinstance(data, list):
        return [redacted(v, path) for v in data]
    if path and looks_secret(path):
        return MASK
    if isinstance(data, str):
        return redact_text(data)
    return data


def redact_text(text: str) -> str:
    """Free text with the values of secret-looking `key=value` / `key: value` pairs masked (also inside
    a mapping: `{db_password: x}`) and URI passwords dropped."""
    text = _URI.sub(lambda m: redact_uri(m[0]), text)
    out, pos = [], 0
    for key in _KEY.finditer(text):
        if key.start() < pos or key["key"] in _PROSE_WORDS or not looks_secret(key["key"]):
            continue
        value = _VALUE.match(text, key.end())
        if value is not None:
            out += [text[pos : key.end()], MASK]
            pos = value.end()
    return "".join(out) + text[pos:]


def secret_values(data: Any, path: str = "") -> set[str]:
    """The string values of secret-looking keys in `data` (a config as plain data), and URI passwords:
    what :func:`scrub` removes from text that may quote them without their key."""
    found: set[str] = set()
    if isinstance(data, dict):
        found = found.union(*(secret_values(v, f"{path}.{k}" if path else str(k)) for k, v in data.items()))
    elif isinstance(data, list):
        found = found.union(*(secret_values(v, path) for v in data))
    elif isinstance(data, str | int | float) and not isinstance(data, bool):
        text = str(data)
        found = {password for password in map(_password, _URI.findall(text)) if password}
        if path and looks_secret(path):
            found.add(text)
    return {v for v in found if len(v) >= MIN_SCRUBBED_LENGTH}


def scrub(text: str, values: Iterable[str]) -> str:
    """`text` redacted (:func:`redact_text`), and every known secret value in it masked."""
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, MASK)
    return redact_text(text)


# ----------------------------------------------------------------------------- files and logs
@contextlib.contextmanager
def private_files() -> Iterator[None]:
    """Files made in the block are this user's only (0600; folders 0700), for those holding the config
    unredacted. The umask is the process's: for short, single-threaded writes."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


def write_private(path: Path, text: str) -> None:
    """`text` into `path`, readable by this user only (0600), whatever mode the file had."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def write_atomic(path: Path, text: str, *, make_parents: bool = True) -> None:
    """`text` into `path` through a temp file beside it (`.<name>.<pid>`, mode by the umask) and a rename:
    a reader sees the old file or the new one, never half of it."""
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        partial.write_text(text)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise


def make_private(paths: Iterable[Path]) -> None:
    """Files another program wrote with the config unredacted (Hydra's `.hydra/*.yaml`): this user's only."""
    for path in paths:
        with contextlib.suppress(OSError):
            path.chmod(0o600)


def redact_log_records() -> None:
    """Every log record of this process redacted as free text before any handler writes it (Hydra's
    `#0 : <overrides>` launch lines, a library's URL with its password)."""
    make = logging.getLogRecordFactory()
    if getattr(make, "redacting", False):
        return

    def redacting(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: logging reports it as it would have
            return record
        clean = redact_text(message)
        plain = _HYDRA_ESCAPE.sub(r"\1", message)
        if plain != message and redact_text(plain) != plain:  # a secret hidden by Hydra's escapes
            clean = redact_text(plain)
        if clean != message:
            record.msg, record.args = clean, None
        return record

    redacting.redacting = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(redacting)
