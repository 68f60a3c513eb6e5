"""The project's questions of the store (a sweep's parent and children, a configuration's finished run,
a job folder's run), every value quoted for MLflow's filter grammar; mixed into the Tracker."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.status import FINISHED

if TYPE_CHECKING:
    from pipeline.tracking.client import RunRecord


class SweepQueries:
    """Queries over `runs(filter_string)`, which the class this is mixed into provides."""

    def runs(self, filter_string: str, max_results: int = 5000) -> list[RunRecord]:
        raise NotImplementedError

    def runs_where(
        self, tags: dict[str, str], *, status: str | None = None, max_results: int = 5000
    ) -> list[RunRecord]:
        """Runs whose tags equal these values (and with this status), newest first; a value the filter
        grammar cannot hold is matched after the search."""
        wanted = {f"tags.{k}": v for k, v in tags.items()}
        if status is not None:
            wanted["attributes.status"] = status
        clauses = [filter_equals(field, value) for field, value in wanted.items()]
        exact = all(clauses)
        found = self.runs(" and ".join(c for c in clauses if c), max_results if exact else 50000)
        matching = [
            r
            for r in found
            if all(r.tags.get(k) == v for k, v in tags.items()) and status in (None, r.status)
        ]
        return matching[:max_results]

    def _newest(self, tags: dict[str, str], *, status: str | None = None) -> RunRecord | None:
        return next(iter(self.runs_where(tags, status=status, max_results=1)), None)

    def sweep_parent(self, sweep_id: str) -> RunRecord | None:
        return self._newest({"sweep_id": sweep_id, "sweep_parent": "true"})

    def sweep_parents(self) -> list[RunRecord]:
        return self.runs("tags.sweep_parent = 'true'")

    def sweep_children(self, sweep_id: str) -> list[RunRecord]:
        return [r for r in self.runs_where({"sweep_id": sweep_id}) if r.tags.get("sweep_parent") != "true"]

    def finished_run_for(self, sweep_id: str, config_hash: str) -> RunRecord | None:
        return self._newest({"sweep_id": sweep_id, "config_hash": config_hash}, status=FINISHED)

    def job_run(self, job_dir: Path) -> RunRecord | None:
        """The newest run of the job that ran in `job_dir` (its `job_dir` tag)."""
        return self._newest({"job_dir": str(job_dir)})


def filter_equals(field: str, value: str) -> str | None:
    """`field = 'value'` for MLflow's filter grammar (double quotes for a value holding `'`); None where
    it cannot hold the value (both quotes, or a backslash: an escape MLflow never undoes)."""
    if "\\" in value or ("'" in value and '"' in value):
        return None
    quote = '"' if "'" in value else "'"
    return f"{field} = {quote}{value}{quote}"
