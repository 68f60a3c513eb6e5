"""Log from many processes at once to an MLflow tracking server, the way a sweep's jobs do, and check
that nothing was lost and no request failed ("database is locked" and the like).

    .venv/bin/python scripts/mlflow-load-check.py http://127.0.0.1:5000 [--procs 8] [--metrics 300]

Each process creates a run (with a parent, as a sweep's job does), logs ~200 params in batches, a
per-step metric series one call at a time and in batches, tags, and an artifact, then ends the run;
one more process keeps searching runs meanwhile, as an open UI does. Exit 0 when every run is
complete in the store, 1 otherwise.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
import traceback
import uuid
from pathlib import Path

# mlflow 3.17's client telemetry thread, failing to reach its config URL (closed networks), drops an
# environment variable while other threads iterate os.environ (requests does, on every request):
# KeyError '_MLFLOW_TELEMETRY_SESSION_ID' in a random request. Off before mlflow is imported.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def job(uri: str, experiment_id: str, parent_id: str, index: int, n_metrics: int, queue) -> None:
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    started = time.time()
    try:
        client = MlflowClient(uri)
        run = client.create_run(
            experiment_id, run_name=f"load·{index}", tags={"mlflow.parentRunId": parent_id, "job": str(index)}
        )
        run_id = run.info.run_id
        params = [Param(f"group{g}.key{k}", f"value {g}.{k}") for g in range(10) for k in range(20)]
        for i in range(0, len(params), 100):
            client.log_batch(run_id, params=params[i : i + 100])
        now = int(time.time() * 1000)
        single = n_metrics // 10  # one request per point, like mlflow.log_metric in a loop
        for step in range(single):
            client.log_metric(run_id, "loss", 1.0 / (step + 1), timestamp=now, step=step)
        batch = [Metric("loss", 1.0 / (s + 1), now, s) for s in range(single, n_metrics)]
        batch += [Metric(f"summary_{k}", float(k), now, 0) for k in range(30)]
        for i in range(0, len(batch), 1000):
            client.log_batch(run_id, metrics=batch[i : i + 1000])
        client.log_batch(run_id, tags=[RunTag(f"env.k{k}", "v" * 50) for k in range(40)])
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "result.json"
            path.write_text('{"ok": true}\n' * 200)
            client.log_artifact(run_id, str(path))
        client.set_terminated(run_id, "FINISHED")
        queue.put((index, run_id, (started, time.time()), None))
    except Exception:
        queue.put((index, None, (started, time.time()), traceback.format_exc()))


def reader(uri: str, experiment_id: str, stop, queue) -> None:
    from mlflow.tracking import MlflowClient

    client, searches, errors = MlflowClient(uri), 0, []
    while not stop.is_set():
        try:
            client.search_runs([experiment_id], max_results=100)
            searches += 1
        except Exception as exc:
            errors.append(repr(exc))
        time.sleep(0.2)
    queue.put(("reader", searches, errors))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("uri", help="tracking server URL, e.g. http://127.0.0.1:5000")
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--metrics", type=int, default=300, help="points of the per-step series per run")
    args = parser.parse_args()

    from mlflow.tracking import MlflowClient

    client = MlflowClient(args.uri)
    experiment_id = client.create_experiment(f"load-check-{uuid.uuid4().hex[:8]}")
    parent = client.create_run(experiment_id, run_name="sweep load-check", tags={"sweep_parent": "true"})
    ctx = mp.get_context("spawn")
    queue, reader_queue, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    watcher = ctx.Process(target=reader, args=(args.uri, experiment_id, stop, reader_queue))
    watcher.start()
    started = time.monotonic()
    procs = [
        ctx.Process(target=job, args=(args.uri, experiment_id, parent.info.run_id, i, args.metrics, queue))
        for i in range(args.procs)
    ]
    for p in procs:
        p.start()
    results = [queue.get(timeout=600) for _ in procs]
    wall = time.monotonic() - started
    for p in procs:
        p.join()
    stop.set()
    _, searches, reader_errors = reader_queue.get(timeout=60)
    watcher.join()
    client.set_terminated(parent.info.run_id, "FINISHED")

    failed = [r for r in results if r[3]]
    for index, _, _, error in failed:
        print(f"job {index} FAILED:\n{error}", file=sys.stderr)
    problems = [f"job {i} failed" for i, *_ in failed]
    for index, run_id, _, _ in results:
        if run_id is None:
            continue
        run = client.get_run(run_id)
        history = client.get_metric_history(run_id, "loss")
        artifacts = [a.path for a in client.list_artifacts(run_id)]
        if run.info.status != "FINISHED":
            problems.append(f"job {index}: status {run.info.status}")
        if len(run.data.params) != 200 or len(run.data.metrics) != 31:
            problems.append(f"job {index}: {len(run.data.params)} params, {len(run.data.metrics)} metrics")
        if sorted(p.step for p in history) != list(range(args.metrics)):
            problems.append(f"job {index}: loss history has {len(history)} of {args.metrics} points")
        if artifacts != ["result.json"]:
            problems.append(f"job {index}: artifacts {artifacts}")
    children = client.search_runs([experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    if len(children) != args.procs:
        problems.append(f"{len(children)} child runs under the parent, expected {args.procs}")
    problems += [f"reader: {e}" for e in reader_errors]
    spans = [r[2] for r in results]
    per_job = sorted(end - start for start, end in spans)
    window = max(end for _, end in spans) - min(start for start, _ in spans)
    requests = args.procs * (1 + 2 + args.metrics // 10 + 2 + 2 + 1)
    print(
        f"{args.procs} processes x ({args.metrics} metric points, 200 params, 1 artifact): "
        f"{window:.1f} s from the first request to the last ({wall:.1f} s with process start-up), "
        f"a job {per_job[0]:.1f}-{per_job[-1]:.1f} s, ~{requests / window:.0f} write requests/s; "
        f"{searches} concurrent searches; experiment {experiment_id}"
    )
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    print("ok" if not problems else f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
