"""Reaching an MLflow server: its health check (one line when it does not answer), and HTTP retries
bounded to seconds, not MLflow's four minutes."""

from __future__ import annotations

import base64
import os
import urllib.parse
import urllib.request

from pipeline.redaction import redact_text, redact_uri
from pipeline.tracking.store import TrackingUnavailable, check_sqlite_writable

# A store outage must not hold a job (and its GPU allocation) for minutes: MLflow's own defaults retry
# each HTTP request for about 4 minutes (7 retries, backoff factor 2, 120 s timeout). These bound it
# to seconds (3 retries at 1, 2, 4 s, a 30 s timeout per attempt); settings in the environment win.
HTTP_RETRY_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}
for _name, _value in HTTP_RETRY_DEFAULTS.items():
    os.environ.setdefault(_name, _value)


def retry_bound(tracking_uri: str) -> str:
    """How long an HTTP store is retried before a job gives up, as its error line says it."""
    if not tracking_uri.startswith(("http://", "https://")):
        return ""
    settings = ", ".join(f"{name}={os.environ[name]}" for name in HTTP_RETRY_DEFAULTS)
    return f"retries bounded by {settings}"


def check_reachable(tracking_uri: str, timeout_s: float = 5.0) -> None:
    """Fail fast, in one line naming `mlflow.tracking_uri`, when the store cannot be used: a sqlite file
    that cannot be written (a read-only directory fails here in milliseconds, where MLflow would retry
    its engine for two minutes), or a server that does not answer its health check."""
    if tracking_uri.startswith("sqlite:///"):
        check_sqlite_writable(tracking_uri)
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
