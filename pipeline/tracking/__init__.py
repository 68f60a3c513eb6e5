"""Stage 6: the only package that talks to MLflow. Callers get the project's own records
(:class:`RunRecord`), never MLflow's objects, and never reach for the client; a job hands its run a
plain :class:`RunPayload` (built by :mod:`pipeline.job.outcome`), so nothing here knows a job.

- `client`: the :class:`Tracker` facade (runs, params, metrics, tags, artifacts, the experiment),
  every name and value redacted on the way out;
- `queries`: the project's questions of the store (a sweep's parent and children, a job's run);
- `payload`: what a run gets, as plain data;
- `store`: a sqlite store's set-up under a lock, and its repair;
- `http`: reaching a server (its health, bounded retries).
"""

from __future__ import annotations

import os

# MLflow's telemetry thread edits os.environ from a background thread while HTTP requests read it (an
# intermittent "_MLFLOW_TELEMETRY_SESSION_ID" failure on closed networks); this project sends none.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# MLflow prints "View run ... at: <tracking URI>" when a run ends, a password in the URI included; the
# project prints its own (redacted) link.
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")

from pipeline.tracking.client import RunRecord, Tracker
from pipeline.tracking.http import check_reachable, retry_bound
from pipeline.tracking.payload import RunPayload
from pipeline.tracking.store import TrackingUnavailable, mlflow_client

__all__ = [
    "RunPayload",
    "RunRecord",
    "Tracker",
    "TrackingUnavailable",
    "check_reachable",
    "mlflow_client",
    "retry_bound",
]
