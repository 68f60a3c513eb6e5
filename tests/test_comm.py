"""A distributed job's communication figures: nccl-tests' bus bandwidth, the probe's interpolation, exposed
collective time read from profiler traces (a GPU's NCCL kernels, the CPU's gloo events), the figures
against the probe, and the job's step times as its slowest rank's own."""

from __future__ import annotations

import math

import pytest

from pipeline.diagnose import comm_probe
from pipeline.diagnose.comm import (
    ALL_GATHER,
    ALL_REDUCE,
    BROADCAST,
    REDUCE_SCATTER,
    CommFigures,
    algbw_gbps,
    bus_factor,
    busbw_gbps,
    collective_kind,
    comm_phrase,
    rank_comm,
    read_trace,
)
from pipeline.diagnose.comm_probe import Probe, ProbeRow
from pipeline.measure.registry import METRICS, SERIES

GIB = 2**30


def test_bus_bandwidth_is_nccl_tests_definition():
    """nccl-tests' doc/PERFORMANCE.md: algbw = S / t; busbw = algbw x 2(n-1)/n for an all-reduce,
    x (n-1)/n for an all-gather or reduce-scatter (S their whole buffer), x 1 for a broadcast."""
    assert algbw_gbps(GIB, 0.004) == pytest.approx(268.435456)
    assert busbw_gbps(ALL_REDUCE, GIB, 0.004, 2) == pytest.approx(268.435456)  # 2(n-1)/n = 1 on two ranks
    assert busbw_gbps(ALL_REDUCE, GIB, 0.004, 8) == pytest.approx(268.435456 * 1.75)
    assert busbw_gbps(ALL_GATHER, GIB, 0.004, 2) == pytest.approx(268.435456 / 2)
    assert busbw_gbps(REDUCE_SCATTER, GIB, 0.004, 4) == pytest.approx(268.435456 * 0.75)
    assert busbw_gbps(BROADCAST, GIB, 0.004, 4) == pytest.approx(268.435456)
    assert bus_factor(ALL_REDUCE, 1) == 0.0  # one rank moves nothing over a bus
    assert busbw_gbps("other", GIB, 0.004, 2) is None
    with pytest.raises(ValueError):
        bus_factor(ALL_REDUCE, 0)


def test_collectives_are_named_as_the_traces_name_them():
    assert (
        collective_kind("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
        == ALL_REDUCE
    )
    assert collective_kind("_allgather_base") == ALL_GATHER
    assert collective_kind("allgather_into_tensor_coalesced") == ALL_GATHER
    assert collective_kind("reduce_scatter_tensor_coalesced") == REDUCE_SCATTER
    assert collective_kind("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL") == REDUCE_SCATTER
    assert collective_kind("gloo:all_gather") == ALL_GATHER
    assert collective_kind("nccl:broadcast") == BROADCAST
    assert collective_kind("ncclDevKernel_SendRecv") == "other"


def probe(busbw: dict[str, list[tuple[int, float]]], world: int = 2) -> Probe:
    rows = [
        ProbeRow(kind, size, size / (bw * 1e9) * 1e6, bw, bw)
        for kind, points in busbw.items()
        for size, bw in points
    ]
    return Probe(machine={"host": "test"}, world_size=world, rows=rows)


def test_the_probe_interpolates_between_sizes_on_a_log_scale_and_holds_its_ends(tmp_path):
    p = probe({ALL_REDUCE: [(2**20, 10.0), (2**22, 40.0)], ALL_GATHER: [(2**20, 5.0)]})
    assert p.busbw(ALL_REDUCE, 2**21) == pytest.approx(20.0)  # halfway in log size: the geometric mean
    assert p.busbw(ALL_REDUCE, 2**10) == 10.0 and p.busbw(ALL_REDUCE, 2**30) == 40.0
    assert p.busbw(ALL_GATHER, 2**25) == 5.0
    assert p.busbw(REDUCE_SCATTER, 2**20) is None  # not probed: nothing to compare with
    assert p.peak_busbw() == 40.0
    comm_probe.write(tmp_path / "probe.json", p)
    again = Probe.load(tmp_path / "probe.json")
    assert again is not None
    assert again.rows == p.rows and again.busbw(ALL_REDUCE, 2**21) == pytest.approx(20.0)


def kernel(name: str, ts: float, dur: float, **args) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7, "args": args}


def test_exposed_communication_on_a_gpu_is_collective_time_with_no_other_kernel_running():
    """Compute kernels at 0-10 and 12-20 us, a copy at 30-31; an all-reduce kernel at 8-14 (hidden 8-10 and
    12-14, exposed 10-12) and an all-gather at 25-33 (exposed but for the copy): 2 + 7 us exposed of 14."""
    events = [
        kernel("ampere_bf16_gemm", 0, 10),
        kernel("triton_poi_fused_add_0", 12, 8),
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 30, "dur": 1, "pid": 0, "tid": 7},
        kernel(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            8,
            6,
            **{
                "Collective name": "allreduce",
                "In msg nelems": 1000,
                "Out msg nelems": 1000,
                "dtype": "Float",
            },
        ),
        # no arguments of its own: those of the CPU op that launched it (record_param_comms), by External id
        kernel("ncclDevKernel_AllGather_RING_LL", 25, 8, **{"External id": 41}),
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "record_param_comms",
            "ts": 24,
            "dur": 1,
            "pid": 1,
            "tid": 1,
            "args": {
                "External id": 41,
                "Collective name": "_allgather_base",
                "In msg nelems": 500,
                "Out msg nelems": 1000,
                "dtype": "BFloat16",
            },
        },
    ]
    trace = read_trace(events, world=2)
    assert [(c.kind, c.size_bytes) for c in trace.collectives] == [(ALL_REDUCE, 4000), (ALL_GATHER, 2000)]
    assert trace.collective_us == pytest.approx(14)
    assert trace.exposed_us == pytest.approx(2 + 7)


def test_exposed_communication_on_the_cpu_is_glooss_time_while_the_steps_thread_ran_no_aten_op():
    """gloo runs collectives on its own thread: an all-gather of a 100-float share (800 bytes gathered on
    two ranks) at 0-10 us while the step's thread (its pid) ran aten ops at 0-4 and 6-7: 5 us exposed; an
    op on another thread does not hide it."""
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "gloo:all_gather",
            "ts": 0,
            "dur": 10,
            "pid": 5,
            "tid": 9,
            "args": {"Input Dims": [[100]], "Input type": ["float"]},
        },
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 4, "pid": 5, "tid": 5},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "ts": 6, "dur": 1, "pid": 5, "tid": 5},
        {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "ts": 4, "dur": 2, "pid": 5, "tid": 9},
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "DistributedDataParallel.forward",
            "ts": 0,
            "dur": 10,
            "pid": 5,
            "tid": 5,
        },
    ]
    trace = read_trace(events, world=2)
    assert [(c.kind, c.size_bytes) for c in trace.collectives] == [(ALL_GATHER, 800)]
    assert trace.exposed_us == pytest.approx(5)


def test_a_jobs_bus_bandwidth_is_read_against_the_probes_at_the_same_sizes():
    """Two ranks, each with 4 all-reduces of 1 GiB over 2 profiled steps: 8 ms each on rank 0 and 10 ms on
    rank 1, where the probe says 200 GB/s (5.37 ms): achieved = bus bytes / time, and its ratio to the probe."""
    machine = probe({ALL_REDUCE: [(2**20, 50.0), (2**30, 200.0)]})
    per_rank = []
    for ms in (8.0, 10.0):
        events = [
            kernel(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                i * 100_000,
                ms * 1000,
                **{
                    "Collective name": "allreduce",
                    "In msg nelems": GIB // 4,
                    "Out msg nelems": GIB // 4,
                    "dtype": "Float",
                },
            )
            for i in range(4)
        ]
        per_rank.append(rank_comm(read_trace(events, world=2), steps=2, world=2, wall_s=0.05, probe=machine))
    assert per_rank[0].exposed_ms == pytest.approx(16.0)  # 4 x 8 ms over 2 steps, nothing to hide them
    assert per_rank[0].size_bytes == 2 * GIB
    figures = CommFigures(ranks=per_rank, probe_peak_gbps=machine.peak_busbw())
    m = figures.metrics()
    achieved = 8 * GIB / (4 * 0.008 + 4 * 0.010) / 1e9
    assert m["comm/busbw_gbps"] == pytest.approx(achieved)
    assert m["comm/probe_busbw_gbps"] == pytest.approx(200.0)
    assert m["comm/busbw_vs_probe"] == pytest.approx(achieved / 200.0)
    assert m["comm/exposed_ms"] == pytest.approx(20.0) and m["comm/exposed_pct"] == pytest.approx(80.0)
    assert m["comm/overlapped_pct"] == pytest.approx(0.0)
    assert m["comm/profiled_step_ms"] == pytest.approx(25.0)
    assert m["comm/probe_peak_busbw_gbps"] == 200.0
    assert figures.series()["rank/comm_exposed_ms"] == pytest.approx([16.0, 20.0])
    assert set(m) <= set(METRICS) and set(figures.series()) <= set(SERIES)  # each with its unit and meaning
    said = comm_phrase(m)
    assert said is not None and said.startswith("comm exposed 20.00 ms/step (80% of a step), busbw 119 GB/s")
    assert "(60% of this machine's at those sizes)" in said


def test_no_probe_no_ratio_and_no_sizes_no_bandwidth():
    events = [kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 1000)]  # no arguments anywhere
    mine = rank_comm(read_trace(events, world=2), steps=1, world=2, wall_s=0.01, probe=None)
    m = CommFigures(ranks=[mine, mine]).metrics()
    assert m["comm/exposed_ms"] == pytest.approx(1.0)
    assert not {"comm/busbw_gbps", "comm/busbw_vs_probe", "comm/probe_peak_busbw_gbps"} & set(m)
    assert not math.isnan(m["comm/exposed_pct"])


def test_the_jobs_steps_are_its_slowest_ranks_own_and_a_delay_is_counted_once():
    """Ranks coupled by collectives run at one pace, but a delay on one rank shows in its lap of step i and
    in its peer's lap of step i+1 (it waits at its next collective): each step's maximum over the ranks, what
    the job reported before, counted every delay twice (here 120 ms for 91 ms of steps). The job's steps are
    the rank with the largest median's own: they add up to that rank's measured time."""
    from pipeline.measure.ranks import slowest_rank

    rank0 = [10.0, 20.0, 10.0, 20.0, 10.0, 20.0]
    rank1 = [20.0, 10.0, 20.0, 10.0, 20.0, 11.0]
    assert sum(max(a, b) for a, b in zip(rank0, rank1, strict=True)) == 120.0
    assert slowest_rank([rank0, rank1]) == 1  # medians 15 and 15.5
    assert slowest_rank([[5.0, 5.0], [5.0, 5.0]]) == 0
