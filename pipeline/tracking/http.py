"""Reaching an MLflow server: its health check, and HTTP retries bounded to seconds, not MLflow's
minutes, so a server that is gone or hung holds a job for seconds."""

from __future__ import annotations

import base64
import contextlib
import os
import urllib.parse
import urllib.request
from collections.abc import Iterator

from pipeline.redaction import redact_text, redact_uri
from pipeline.tracking.store import TrackingUnavailable, check_sqlite

# MLflow's defaults retry a request for about 4 minutes, holding a job (and its GPUs); these bound it to
# about 33 s (2 retries at 1 and 2 s, 10 s each). Settings in the environment win.
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
def one_attempt() -> Iterator[None]:
    """MLflow's HTTP requests in the block are tried once, for HEALTH_TIMEOUT_S (read at each request):
    for a best-effort call after the store already failed a request."""
    once = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": f"{HEALTH_TIMEOUT_S:g}"}
    before = {name: os.environ.get(name) for name in once}
    os.environ.update(once)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def check_reachable(tracking_uri: str, *, read_only: bool = False) -> None:
    """Fail fast, in one line naming `mlflow.tracking_uri`, when the store cannot be used: a sqlite file
    that cannot be written (`read_only`: read) or stays locked, or a server that fails its health check."""
    if tracking_uri.startswith("sqlite:///"):
        check_sqlite(tracking_uri, write=not read_only)
    if not tracking_uri.startswith(("http://", "https://")):
        return
    shown = redact_uri(tracking_uri)
    try:
        with urllib.request.urlopen(_health_request(tracking_uri), timeout=HEALTH_TIMEOUT_S) as response:
            if response.status != 200:
                raise TrackingUnavailable(f"MLflow server at {shown} answered {response.status} on /health")
    except (TimeoutError, OSError, ValueError) as exc:
        reason = redact_text(str(exc))
        raise TrackingUnavailable(
            f"MLflow server at {shown} is not reachable ({reason}); start one with `make mlflow-server` or set mlflow.tracking_uri"
        ) from exc


def _health_request(tracking_uri: str) -> urllib.request.Request:
    """GET <server>/health; credentials in the URI (`http://user:pw@host:port`) go in a basic
    Authorization header, as MLflow's client sends them."""
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
