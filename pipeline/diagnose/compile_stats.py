"""What torch recorded about compilation in this process: frames, graphs, graph breaks, recompiles,
compile seconds by phase, inductor cache hits, failed frames (`torch._dynamo.utils`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def _is_forward(entry: Any) -> bool:
    return getattr(entry, "is_forward", True) is not False


def _total(name: str, forward: bool | None = None) -> float:
    """`name` summed over torch's compilation records: the forward ones, the backward ones, or all."""
    from torch._dynamo.utils import get_compilation_metrics

    entries = [e for e in get_compilation_metrics() if forward is None or forward == _is_forward(e)]
    return sum((getattr(e, name, None) or 0 for e in entries), 0.0)


@dataclass(frozen=True, kw_only=True)
class CompileStats:
    """torch's own compile records so far in this process (`torch._dynamo.utils`)."""

    frames_compiled: int  # forward entries (first compiles and recompiles); a backward is its own entry
    graph_breaks: int
    graph_break_reasons: dict[str, int]
    unique_graphs: int
    backend_graphs: int  # graphs the backend compiled (AOTAutograd): DDPOptimizer's splits each count
    compiled_autograd_captures: int  # backward graphs compiled autograd captured
    torch_compile_time_s: float  # Dynamo frame compiles plus the backward compiles AOTAutograd runs lazily
    recompile_reasons: list[str]

    @classmethod
    def now(cls) -> CompileStats:
        from torch._dynamo.utils import counters, get_compilation_metrics

        forward = [e for e in get_compilation_metrics() if _is_forward(e)]
        breaks = dict(counters["graph_break"])
        return cls(
            frames_compiled=len(forward),
            graph_breaks=sum(breaks.values()),
            graph_break_reasons=breaks,
            unique_graphs=counters["stats"].get("unique_graphs", 0),
            backend_graphs=counters["aot_autograd"].get("total", 0),
            compiled_autograd_captures=counters["compiled_autograd"].get("captures", 0),
            torch_compile_time_s=_total("entire_frame_compile_time_s", True)
            + _total("backward_cumulative_compile_time_us", False) / 1e6,
            recompile_reasons=[e.recompile_reason for e in forward if getattr(e, "recompile_reason", None)],
        )


@dataclass(frozen=True, kw_only=True)
class CompileDiagnosis:
    """What compilation did in a job: statistics after the warm-up and at the end (recompiles in
    between), seconds by phase, the inductor cache, and torch's own log records."""

    after_warmup: CompileStats
    final: CompileStats
    phases: dict[str, float]
    cache: CacheState
    logged: dict[str, Any]  # graph breaks with lines, recompiles, CUDA-graph skips (CompileLogRecorder)
    failed: list[dict[str, str]]
    applies: frozenset[str] = frozenset()  # what this job can have (`collect`)

    @classmethod
    def collect(
        cls, *, after_warmup: CompileStats, logged: dict[str, Any], applies: set[str]
    ) -> CompileDiagnosis:
        """`applies`: what this job can have (`inductor`, `aot_autograd`, `triton`, `autotune`,
        `cudagraphs`, `compiled_autograd`); the others' phases and counts are left out rather than
        logged as zeros, and so is the backward's compile time where nothing compiled one."""
        from torch._dynamo.utils import get_compilation_metrics

        phases = compile_phases()
        for phase, needs in PHASE_NEEDS.items():
            if needs not in applies:
                phases.pop(phase, None)
        if all(_is_forward(e) for e in get_compilation_metrics()):  # nothing compiled a backward
            phases.pop("compile/backward_s", None)
        return cls(
            after_warmup=after_warmup,
            final=CompileStats.now(),
            phases=phases,
            cache=CacheState.now(),
            logged=logged,
            failed=frames_failed(),
            applies=frozenset(applies),
        )

    def metrics(self) -> dict[str, float]:
        m = {
            "compile/torch_total_s": self.after_warmup.torch_compile_time_s,
            "diagnose/graph_breaks": self.final.graph_breaks,
            "diagnose/unique_graphs": self.final.unique_graphs,
            "diagnose/frames_compiled": self.final.frames_compiled,
            "diagnose/recompiles_after_warmup": self.final.frames_compiled
            - self.after_warmup.frames_compiled,
            **self.phases,
            "diagnose/frames_failed": len(self.failed),
        }
        if "compile/cudagraph_record_s" in self.phases:  # a mode with CUDA graphs
            m["diagnose/cudagraph_skips"] = len(self.logged["cudagraph_skips"])
        if "aot_autograd" in self.applies:
            m["diagnose/backend_graphs"] = self.final.backend_graphs
        if "compiled_autograd" in self.applies:
            m["diagnose/compiled_autograd_captures"] = self.final.compiled_autograd_captures
        if "inductor" in self.applies:  # the FX-graph and AOTAutograd caches are inductor's
            m["compile/cache_hits"], m["compile/cache_misses"] = self.cache.hits, self.cache.misses
        return m

    def diagnostics(self) -> dict[str, Any]:
        return {
            **self.logged,
            "graph_break_reasons": self.final.graph_break_reasons,
            "recompile_reasons": self.final.recompile_reasons,
            "frames_failed": self.failed,
        }


# Phases only some jobs have: AOTAutograd's (not Dynamo-only `eager`), inductor's (not aot_eager's),
# Triton kernels (CUDA), autotuning (max-autotune modes), CUDA-graph recording (modes with CUDA graphs).
PHASE_NEEDS = {
    "compile/aot_autograd_s": "aot_autograd",
    "compile/inductor_s": "inductor",
    "compile/codegen_s": "inductor",
    "compile/triton_s": "triton",
    "compile/autotune_s": "autotune",
    "compile/cudagraph_record_s": "cudagraphs",
}


def compile_phases() -> dict[str, float]:
    """Compile seconds by phase, from torch's CompilationMetrics (where this torch version has them)."""
    frame = _total("entire_frame_compile_time_s", True)
    backend = _total("backend_compile_time_s", True)
    aot_us = _total("aot_autograd_cumulative_compile_time_us", True)
    inductor_fwd_us = _total("inductor_cumulative_compile_time_us", True)
    inductor_bwd_us = _total("inductor_cumulative_compile_time_us", False)
    return {
        "compile/dynamo_s": max(0.0, frame - backend),
        "compile/aot_autograd_s": max(0.0, (aot_us - inductor_fwd_us) / 1e6),
        "compile/inductor_s": (inductor_fwd_us + inductor_bwd_us) / 1e6,
        "compile/codegen_s": _total("inductor_code_gen_cumulative_compile_time_us") / 1e6,
        "compile/triton_s": _total("triton_compile_time_us") / 1e6,
        "compile/autotune_s": (
            _total("compile_time_autotune_time_us") + _total("runtime_triton_autotune_time_us")
        )
        / 1e6,
        "compile/backward_s": _total("backward_cumulative_compile_time_us", False) / 1e6,
        "compile/cudagraph_record_s": _total("runtime_cudagraphify_time_us") / 1e6,
    }


@dataclass(frozen=True, kw_only=True)
class CacheState:
    hits: int
    misses: int
    state: str  # warm, cold or unused

    @classmethod
    def now(cls) -> CacheState:
        """Inductor FX-graph and AOTAutograd cache hits and misses in this process; the state is what the
        on-disk cache held at the start, judged by the first graph that used it (`warm`, `cold`, `unused`)."""
        from torch._dynamo.utils import counters, get_compilation_metrics

        inductor, aot = counters["inductor"], counters["aot_autograd"]
        hits = inductor.get("fxgraph_cache_hit", 0) + aot.get("autograd_cache_hit", 0)
        misses = inductor.get("fxgraph_cache_miss", 0) + aot.get("autograd_cache_miss", 0)
        used = [
            e
            for e in get_compilation_metrics()
            if getattr(e, "inductor_fx_local_cache_hit_count", None)
            or getattr(e, "inductor_fx_local_cache_miss_count", None)
        ]
        cold = used[0].inductor_fx_local_cache_miss_count if used else misses
        state = "unused" if not hits and not misses else "cold" if cold else "warm"
        return cls(hits=hits, misses=misses, state=state)


def frames_failed() -> list[dict[str, str]]:
    """Frames whose compilation failed (torch ran them eagerly, or raised)."""
    from torch._dynamo.utils import get_compilation_metrics

    return [
        {
            "frame": f"{e.co_filename}:{e.co_firstlineno} {e.co_name}",
            "fail": f"{e.fail_type}: {e.fail_reason}"[:400],
        }
        for e in get_compilation_metrics()
        if getattr(e, "fail_type", None)
    ]


def reset_compile_state() -> None:
    """Forget what an analysis compiled, so the job's own statistics start from zero."""
    import torch._dynamo
    from torch._dynamo.utils import clear_compilation_metrics, counters

    torch._dynamo.reset()
    counters.clear()
    clear_compilation_metrics()
