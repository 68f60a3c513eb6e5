"""Status words, defined once. A job's run ends in one of MLflow's terminal statuses; a job's outcome
(what the job's parent returns to Hydra and the exit code is made from) adds the ways a job can end
without a run of its own."""

from __future__ import annotations

# MLflow run statuses (also the `status` of a result file).
RUNNING, FINISHED, FAILED, KILLED = "RUNNING", "FINISHED", "FAILED", "KILLED"
# Outcomes that are not run statuses.
SKIPPED = "SKIPPED"  # resumed sweep: this configuration already FINISHED
NOT_SYNCED = "NOT_SYNCED"  # the result is kept on disk; MLflow could not take it
BAD_INPUT = "BAD_INPUT"  # the config was refused before anything started

# Error types the project gives a run, where more than one module names them.
RESULT_NOT_LOGGED = "ResultNotLogged"  # the result is kept on disk; MLflow lacks it (`--sync` uploads it)
JOB_LOST = "JobLost"  # the job ended without recording any result (killed outright, its node failed)
NON_FINITE_LOSS = "NonFiniteLoss"  # the training loss became NaN or infinite: FAILED, its figures kept

# Exit codes of `python -m pipeline.run`.
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
