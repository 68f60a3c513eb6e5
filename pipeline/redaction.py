"""Secrets never leave the machine: the values of secret-looking keys are masked, and URIs lose their
passwords, wherever a value is written (MLflow params, the uploaded config, the command line)."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

_SECRET = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|(^|_|\.)(API_?)?KEY$)", re.IGNORECASE)
MASK = "***"


def looks_secret(key: str) -> bool:
    """A dotted key any of whose parts names a secret (`model.kwargs.hf_token`, `db.password`)."""
    return any(_SECRET.search(part) for part in key.lstrip("+~").split("."))


def redact_uri(uri: str) -> str:
    """Drop a password from a URI (`postgresql://user:pw@host/db` -> `postgresql://user:***@host/db`)."""
    parts = urllib.parse.urlsplit(uri)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", f":{MASK}@")
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return uri


def redacted(data: Any, path: str = "") -> Any:
    """A copy with the values of secret-looking keys masked and passwords dropped from URIs."""
    if isinstance(data, dict):
        return {k: redacted(v, f"{path}.{k}" if path else str(k)) for k, v in data.items()}
    if isinstance(data, list):
        return [redacted(v, path) for v in data]
    if path and looks_secret(path):
        return MASK
    if isinstance(data, str) and "://" in data:
        return redact_uri(data)
    return data
