"""A distributed job's launcher: torch's own (`torch.distributed.run`, what `torchrun` runs), started by
the supervisor in place of the worker and tied to it like a worker.

    python -m pipeline.job.ranks --nproc 2 --failures ranks_failed.json -- --config ... --result ...

runs torchrun's agent in this process, tied to the job's parent by the lifeline and re-pointed as the
ranks' lifeline; the ranks' exits (first failure first) go to `--failures`. Torch-free at import.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from pipeline.job import lifeline
from pipeline.job.result import write_timeout
from pipeline.job.supervisor import NVLINK_MULTICAST_OFF, signal_description


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nproc", type=int, required=True, help="worker processes (ranks)")
    parser.add_argument("--failures", required=True, help="where the ranks' failures are written")
    parser.add_argument("--timeout-s", type=float, required=True, help="the job's trainer.timeout_s")
    parser.add_argument(
        "--result", required=True, help="rank 0's result file (the timeout backstop writes it)"
    )
    parser.add_argument("worker_args", nargs=argparse.REMAINDER, help="-- then the worker's arguments")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)  # SLURM's warning: the job's parent decides
    lifeline.hold(timeout_s=args.timeout_s, on_timeout=lambda why: write_timeout(args.result, why))
    os.environ[lifeline.PARENT_ENV] = str(os.getpid())  # the ranks' lifeline is this agent
    os.environ.update(NVLINK_MULTICAST_OFF)
    # The host's CPUs shared among the ranks (torchrun would set 1 thread per rank, and say so), so
    # that a CPU job's ranks get the threads a one-process job would have in all.
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // args.nproc)))
    # torchrun's command line for one node, `nproc` worker processes, then the worker's own arguments
    torchrun = ["--standalone", f"--nproc-per-node={args.nproc}", "--module", "pipeline.job.worker"]
    torchrun += (
        [a for a in args.worker_args if a != "--"] if args.worker_args[:1] == ["--"] else args.worker_args
    )
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    try:
        run(parse_args(torchrun))
    except ChildFailedError as exc:  # torch's ProcessFailure records as plain data, the first failure first
        rows = [
            {
                "rank": rank,
                "exitcode": f.exitcode,
                "exit": signal_description(f.exitcode),
                "pid": f.pid,
                "timestamp": f.timestamp,
                "message": f.message if isinstance(f.message, str) else json.dumps(f.message)[:500],
            }
            for rank, f in exc.failures.items()
        ]
        rows.sort(key=lambda r: (r["timestamp"], r["rank"]))
        Path(args.failures).write_text(json.dumps(rows, indent=1))
        return 1
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
