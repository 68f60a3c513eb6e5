"""Stage 6: the only package that talks to MLflow. Callers get the project's own records
(:class:`RunRecord`), never MLflow's objects; a job hands its run a plain :class:`RunPayload`, so
nothing here knows a job."""

from __future__ import annotations

import os

# MLflow's telemetry thread edits os.environ while HTTP requests read it; this project sends none.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# MLflow's "View run ... at: <tracking URI>" would show a password in the URI; the project prints its own.
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
