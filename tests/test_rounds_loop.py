"""benchmarks/rounds_loop.py, the plain loop a cycling unit's figures are checked against: every way it
times is reported per unit, and the host work it puts between a round's lead-in and its start (`--gaps-ms`)
stays outside the round's time, as the pipeline's Timer must keep its own."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.slow  # the default suite's 5 minutes (CI runs it: make test-all)
def test_the_rounds_loop_times_each_way_per_unit_and_keeps_the_gap_out_of_the_round():
    command = [sys.executable, "benchmarks/rounds_loop.py", "--device", "cpu", "--model", "test_resnet"]
    command += ["--image-size", "32", "--batch-sizes", "1,2", "--compile", "eager", "--units", "1,3"]
    command += ["--gaps-ms", "0,500", "--rotate", "2", "--rounds", "3", "--warmup", "1"]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.splitlines()[-1])
    p50 = report["p50_ms"]
    ways = ["sync", "b2b 1 gap 0", "b2b 1 gap 500", "b2b 3 gap 0", "b2b 3 gap 500", "b2b 3 rotated"]
    assert list(p50) == ways and all(ms > 0 for ms in p50.values()), p50
    assert p50["b2b 1 gap 500"] < p50["sync"] + 300, p50  # 500 ms of host work before the start: not timed
    assert report["host_cpu_ms"] > 0 and report["rounds"] == 3
