"""Reaching an MLflow server: its health check (one line when it does not answer), and HTTP retries
bounded to seconds, not MLflow's minutes: a server that is gone or hung (SIGSTOPped, overloaded)
holds a job for seconds."""

from __future__ import annotations

import base64
import contextlib
import os
import urllib.parse
import urllib.request
from collections.abc import Iterator

from pipeline.redaction import redact_text, redact_uri
from pipeline.tracking.store import TrackingUnavailable, check_sqlite

# A store outage must not hold a job (and its GPU allocation) for minutes: MLflow's own defaults retry
# each HTTP request for about 4 minutes (7 retries, backoff factor 2, 120 s timeout). These bound a
# request to about 33 s (2 retries at 1 and 2 s, 10 s to wait for an answer each time); a job also
# asks the server's health (`HEALTH_TIMEOUT_S`) before it logs its result, so a server that stopped
# answering costs it seconds, and once a request gave up, closing the run is one attempt. Settings in
# the environment win.
HTTP_RETRY_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
}
HEALTH_TIMEOUT_S = 5.0
for _name, _value in HTTP_RETRY_DEFAULTS.items():
    os.environ.setdefault(_name, _value)


def retry_bound(tracking_uri: str) -> str:
    """How long an HTTP store is retried before a job gives up, as its error line says it."""
    if not tracking_uri.startswith(("http://", "https://")):
        return ""
    settings = ", ".join(f"{name}={os.environ[name]}" for name in HTTP_RETRY_DEFAULTS)
    return f"retries bounded by {settings}"


@contextlib.contextmanager
def one_attempt(timeout_s: float = HEALTH_TIMEOUT_S) -> Iterator[None]:
    """MLflow's HTTP requests in the block are tried once, for `timeout_s` (MLflow reads these
    settings at each request): for a best-effort call after the store already failed a request."""
    names = ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")
    before = {name: os.environ.get(name) for name in names}
    os.environ.update(
        {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": f"{timeout_s:g}"}
    )
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def check_reachable(
    tracking_uri: str, timeout_s: float = HEALTH_TIMEOUT_S, *, read_only: bool = False
) -> None:
    """Fail fast, in one line naming `mlflow.tracking_uri`, when the store cannot be used: a sqlite file
    that cannot be written (a read-only directory fails here in milliseconds, where MLflow would retry
    its engine for two minutes; `read_only`: one that cannot be read, never probed for writing), or
    held locked by another process past the bounded wait, or a server that does not answer its health
    check."""
    if tracking_uri.startswith("sqlite:///"):
        check_sqlite(tracking_uri, write=not read_only)
    elif tracking_uri.startswith(("http://", "https://")):
        _check_health(tracking_uri, timeout_s)


def _check_health(tracking_uri: str, timeout_s: float) -> None:
    shown = redact_uri(tracking_uri)
    try:
        with urllib.request.urlopen(_health_request(tracking_uri), timeout=timeout_s) as response:
            if response.status != 200:
                raise TrackingUnavailable(f"MLflow server at {shown} answered {response.status} on /health")
    except (TimeoutError, OSError, ValueError) as exc:
        reason = redact_text(str(exc))
        raise TrackingUnavailable(
            f"MLflow server at {shown} is not reachable ({reason}); start one with `make mlflow-server` or set mlflow.tracking_uri"
        ) from exc


def _health_request(tracking_uri: str) -> urllib.request.Request:
    """GET <server>/health; credentials in the URI (`http://user:pw@host:port`, which MLflow's client
    accepts) go in a basic Authorization header, as MLflow's client sends them."""
    parts = urllib.parse.urlsplit(tracking_uri)
    host = parts.netloc.rpartition("@")[2]
    url = urllib.parse.urlunsplit(parts._replace(netloc=host)).rstrip("/") + "/health"
    request = urllib.request.Request(url)
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    return request
