"""Sweep summaries, read back from MLflow, and results MLflow never got.

    python -m pipeline.report --sweep <sweep id>        # print the summary (--out DIR: write its files there;
                                                        # --publish: into the sweep's folder and its parent run)
    python -m pipeline.report --list                    # the sweeps in the experiment: verdict, swept keys
    python -m pipeline.report --plan [OVERRIDES ...]    # a dry run: the jobs `python -m pipeline.run -m OVERRIDES`
                                                        # would run, each with its time from earlier runs
    python -m pipeline.report --sync [DIR ...]          # upload job results MLflow never received (into the
                                                        # store each job logged to), close runs of jobs killed
                                                        # outright, finish sweeps whose end failed
    python -m pipeline.report --results DIR             # summarize job folders without MLflow
    python -m pipeline.report --compare A B             # two sweeps, configuration by configuration

At the end of every multirun the same summary is printed, written as `summary.md` and `summary.csv`
into the sweep's output folder, and logged (with PNG plots) to the sweep's parent run
(:mod:`pipeline.sweep`). This module is the command line only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

# MLflow's "Downloading artifacts" bars (a run_info.json each, in --compare) say nothing a user needs.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

from pipeline.config.schema import DEFAULT_EXPERIMENT, default_store
from pipeline.display import first_few
from pipeline.jobdir import JOB_CONFIG, RESULT, RUN_INFO, SweepDir, job_files
from pipeline.redaction import redact_uri
from pipeline.sweep.compare import compare_sweeps
from pipeline.sweep.compare import lines as comparison_lines
from pipeline.sweep.compare import write as write_comparison
from pipeline.sweep.finish import build_summary, finish_left_sweeps, publish, write_summary
from pipeline.sweep.render import print_table
from pipeline.sweep.state import REFUSED_PLAN, axes_from_tag, axis_keys, plan_lines
from pipeline.sweep.summary import Row, Summary, kind_of_jobs, row_from_result, summarize
from pipeline.sweep.sync import Folders, Store, close_lost_jobs, folders_by_store, name_unsaid, sync_results
from pipeline.sweep.verdict import Rule
from pipeline.sweep_context import SweepContext
from pipeline.tracking import Tracker, TrackingUnavailable


def _without_multirun_flag(argv: list[str]) -> list[str]:
    """`--plan -m OVERRIDE ...` as `--plan OVERRIDE ...`: the run command's own words pasted (a plan is a multirun)."""
    if "--plan" not in argv:
        return argv
    start = argv.index("--plan")
    return argv[: start + 1] + [a for a in argv[start + 1 :] if a not in ("-m", "--multirun")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--tracking-uri",
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or outputs/mlflow.db; "
        "--sync: the store each job logged to, as its folder says)",
    )
    parser.add_argument(
        "--experiment",
        help=f"MLflow experiment, as the jobs' mlflow.experiment (default: {DEFAULT_EXPERIMENT}; "
        "--sync: each job's own)",
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--sweep", metavar="ID", help="summarize this sweep (its `sweep_id` tag)")
    what.add_argument("--list", action="store_true", help="list the sweeps in the experiment")
    what.add_argument(
        "--sync",
        nargs="*",
        metavar="DIR",
        help="upload job results under these folders (default outputs/) that never reached MLflow, close the runs of jobs killed without a result, finish sweeps whose end failed",
    )
    what.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="compare sweep B with sweep A: the ratio per matched configuration with its interval, regressions and improvements, what changed",
    )
    what.add_argument(
        "--plan",
        nargs="*",
        metavar="OVERRIDE",
        help="a dry run: the jobs `python -m pipeline.run -m OVERRIDE ...` would run, each with its time estimated from earlier runs of its configuration in the store (or unknown); nothing runs",
    )
    what.add_argument(
        "--results",
        metavar="DIR",
        type=Path,
        help="summarize the job folders under DIR from their result files, without MLflow",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="--sweep: write the summary files here; --compare: where compare.md, .csv and .png go",
    )
    parser.add_argument(
        "--publish",
        action="store_true",
        help="--sweep: write the summary files into the sweep's folder (or --out) and log them, the aggregates and the verdict to its parent run again",
    )
    args = parser.parse_args(_without_multirun_flag(sys.argv[1:] if argv is None else argv))
    if args.results is not None:
        return summarize_folders(args.results, args.out)
    if args.plan is not None:
        lines = plan_lines(args.plan, args.tracking_uri)
        print("\n".join(lines))
        return 2 if lines[0].startswith("config error:") or REFUSED_PLAN in lines[-1] else 0  # refused

    if args.sync is not None:
        return sync([Path(d) for d in (args.sync or ["outputs"])], args.tracking_uri, args.experiment)
    # what a job would log to
    uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or default_store()
    experiment = args.experiment or DEFAULT_EXPERIMENT
    # --list, --sweep (without --publish) and --compare only read: nothing is set up or created in the store
    read_only = bool(args.list or args.compare is not None or (args.sweep and not args.publish))
    try:
        tracker = Tracker(uri, experiment, read_only=read_only)
    except TrackingUnavailable as err:
        print(f"mlflow error: {err}", file=sys.stderr)
        return 1
    if args.list:
        for run in tracker.sweep_parents():
            print(list_line(run.tags, run.status))
        return 0

    if args.compare is not None:
        return compare(tracker, *args.compare, out_dir=args.out)
    parent = tracker.sweep_parent(args.sweep)
    if parent is None:
        print(
            f"no sweep with sweep_id={args.sweep!r} in experiment {experiment!r} at {uri}; `--list` shows the sweeps",
            file=sys.stderr,
        )
        return 1
    summary = build_summary(tracker, args.sweep)
    print_table(summary)
    if args.publish:
        out_dir = args.out or Path(parent.tags.get("sweep_dir") or f"outputs/sweeps/{args.sweep}")
        files = publish(tracker, parent.run_id, summary, out_dir)
        print(f"wrote {', '.join(str(p) for p in files)}; logged to parent run {parent.run_id}")
    elif args.out is not None:
        files = write_summary(summary, args.out)
        print(f"wrote {', '.join(str(p) for p in files)}")
    return 0


def sync(dirs: list[Path], uri: str | None, experiment: str | None) -> int:
    """`--sync`: every result under `dirs` uploaded into the store its job logged to (all into `uri`
    where one is given), the runs jobs left RUNNING closed and the sweeps whose end never happened
    finished there. 1 when anything could not be uploaded or finished."""
    if uri:
        groups = {Store(uri, experiment or DEFAULT_EXPERIMENT): Folders(dirs, dirs)}
        uploaded = failed = 0
    else:
        named = folders_by_store(dirs)
        uploaded, failed = 0, name_unsaid(named.pop(None, Folders()))
        groups = {Store(s.uri, experiment or s.experiment): f for s, f in named.items() if s is not None}
    for store, folders in groups.items():
        if not uri:
            print(
                f"into {redact_uri(store.uri)}, experiment {store.experiment}: the store these jobs logged to"
            )
        try:
            tracker = Tracker(store.uri, store.experiment)
        except TrackingUnavailable as err:
            failed += 1
            jobs = first_few([str(job) for job in folders.jobs or folders.sweeps])
            print(
                f"mlflow error: {err}; {jobs} logged there: run this again once it answers, or name the "
                "store to upload them to with --tracking-uri",
                file=sys.stderr,
            )
            continue
        up, bad = sync_results(tracker, folders.jobs)
        close_lost_jobs(tracker, folders.jobs)
        uploaded, failed = uploaded + up, failed + bad + finish_left_sweeps(tracker, folders.sweeps)
    if not uploaded and not failed:
        print(f"nothing to sync under {', '.join(map(str, dirs))}: every job result is in MLflow")
    return 1 if failed else 0


def list_line(tags: dict[str, str], status: str) -> str:
    """One sweep: id, status, verdict (the fastest configuration's name), jobs, what it swept, folder."""
    verdict = tags.get("verdict", "-")
    if verdict == "fastest" and tags.get("fastest_config"):
        verdict += f" {tags['fastest_config']}"
    swept = ", ".join(axis_keys(axes_from_tag(tags.get("sweep_axes", "")))) or "-"
    name = f"sweep={tags['sweep_name']}  " if tags.get("sweep_name") else ""
    return (
        f"{tags.get('sweep_id')}  {status:9}  verdict: {verdict}  jobs={tags.get('jobs', '?')} "
        f"failed={tags.get('jobs_failed', '?')}  {name}swept: {swept}  {tags.get('sweep_dir', '')}"
    )


def compare(tracker: Tracker, sweep_a: str, sweep_b: str, *, out_dir: Path | None) -> int:
    """`--compare A B`: print the comparison and write compare.md, .csv and .png."""
    for sweep_id in (sweep_a, sweep_b):
        if tracker.sweep_parent(sweep_id) is None:
            print(f"no sweep with sweep_id={sweep_id!r}; `--list` shows the sweeps", file=sys.stderr)
            return 1
    a, b = build_summary(tracker, sweep_a), build_summary(tracker, sweep_b)
    for summary in (a, b):
        attach_environment(tracker, summary)
    try:
        found = compare_sweeps(a, b, Rule())
    except ValueError as err:
        print(f"cannot compare: {err}", file=sys.stderr)
        return 1
    print("\n".join(comparison_lines(found)))
    files = write_comparison(found, out_dir or Path("outputs") / "compare" / f"{sweep_a}_vs_{sweep_b}")
    print(f"wrote {', '.join(str(p) for p in files)}")
    return 0


def attach_environment(tracker: Tracker, summary: Summary) -> None:
    """The environment a sweep ran in (versions, GPU, driver), from one finished job's run_info.json."""
    for row in summary.rows:
        info = tracker.read_json_artifact(row.run_id, RUN_INFO) if row.run_id else None
        if info and info.get("environment"):
            row.environment = {k: str(v) for k, v in info["environment"].items()}
            return


def summarize_folders(root: Path, out_dir: Path | None) -> int:
    """The summary of the job folders under `root` from their result files (no MLflow); a folder whose
    files cannot be read is named and left out (exit code 1). A sweep's folder is judged as its end
    would have, and its files go beside the sweep's own summary, never over it (or to `--out`)."""
    rows: list[Row] = []
    problems: list[str] = []
    for path in job_files(root, RESULT):
        try:
            row = row_from_result(path)
        except OSError as exc:
            problems.append(f"{path} cannot be read ({exc.strerror or exc})")
        except ValueError as exc:
            problems.append(f"{path}: {exc}")
        else:
            if row is not None:
                rows.append(row)
    for config in job_files(root, JOB_CONFIG):
        if not (config.parent / RESULT).exists():
            problems.append(
                f"{config.parent} holds no {RESULT} (its job has not ended, or was killed outright)"
            )
    for problem in problems:
        print(f"results error: {problem}; left out of the summary", file=sys.stderr)
    if not rows:
        print(f"no job results under {root}", file=sys.stderr)
        return 1
    try:
        sweep = SweepContext.load(root)
    except (OSError, ValueError, TypeError) as exc:
        print(
            f"results error: {SweepDir(root).sweep_file} cannot be read ({exc}): summarized as a folder of jobs",
            file=sys.stderr,
        )
        problems.append(str(exc))
        sweep = None
    if sweep is None:  # a folder of job folders, not one sweep's: what the jobs say
        summary = summarize(root.resolve().name, rows, kind=_kind_of_folders(root))
    else:  # as the sweep's own end would have judged it: its kind, objective and verdict settings
        summary = summarize(
            sweep.sweep_id,
            rows,
            varied=sweep.axes,
            rule=Rule(min_effect_pct=sweep.min_effect_pct),
            configured=sweep.objective,
            kind=sweep.kind or _kind_of_folders(root),
        )
        if sweep.ended_wall_s is not None:
            summary.aggregates["sweep/wall_s"] = sweep.ended_wall_s
    if problems:
        summary.notes.append(
            f"left out: {len(problems)} job folder(s) whose files cannot be read: {'; '.join(problems)}"
        )
    print_table(summary)
    target = out_dir if out_dir is not None else (SweepDir(root).from_results if sweep is not None else root)
    try:
        files = write_summary(summary, target)
    except OSError as exc:
        print(
            f"results error: could not write the summary files in {target} ({exc.strerror or exc}): the summary "
            "above is all there is; --out DIR writes them elsewhere",
            file=sys.stderr,
        )
        return 1
    own = SweepDir(root).summary_files[0]
    kept = f"; the sweep's own {own} is kept as its end wrote it" if target != root else ""
    print(f"wrote {files[0]}, {files[1]} and {len(files) - 2} plots{kept}")
    return 1 if problems else 0


def _kind_of_folders(root: Path) -> str:
    """`sweep.kind` as the job folders' configs give it."""
    kinds: list[str | None] = []
    for path in job_files(root, JOB_CONFIG):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            kinds.append(json.loads(path.read_text()).get("sweep", {}).get("kind"))
    return kind_of_jobs(kinds)


if __name__ == "__main__":
    sys.exit(main())
