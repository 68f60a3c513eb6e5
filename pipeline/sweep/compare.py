"""Two sweeps, configuration by configuration (`python -m pipeline.report --compare A B`): configurations
matched by pool hash (else run name), each with the ratio B / A of the objective and its 95% interval,
flagged by the verdict's own rule (`regression`, `improvement`, `same`, `undecided`), and what changed
in the environment; a time per unit is compared only where a unit did the same work in both. Torch-free."""

from __future__ import annotations

import csv
import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.display import figure, with_interval
from pipeline.measure.objective import Work
from pipeline.measure.stats import undetermined
from pipeline.sweep.plots import save_figure
from pipeline.sweep.render import interval_cells
from pipeline.sweep.summary import Summary
from pipeline.sweep.verdict import Z95, Estimate, Rule, compare

REGRESSION, IMPROVEMENT, SAME, UNDECIDED = "regression", "improvement", "same", "undecided"
ENVIRONMENT_KEYS = (
    "torch",
    "triton",
    "cuda_version",
    "cudnn_version",
    "driver_version",
    "gpu_name",
    "timm",
    "transformers",
    "python",
)
# compare.csv's columns after the configuration and its flag: each figure with its 95% interval's ends
CSV_FIGURES = ("a", "a_low", "a_high", "b", "b_low", "b_high", "ratio_b_over_a", "ratio_low", "ratio_high")


@dataclass(frozen=True, kw_only=True)
class Change:
    name: str
    a: Estimate
    b: Estimate
    ratio: float  # B / A of the objective
    low: float
    high: float
    flag: str

    @property
    def undetermined(self) -> bool:
        """The ratio's interval is too wide to say anything."""
        return undetermined(self.low, self.high)

    def line(self, unit_word: str) -> str:
        a, b = (figure(e.value, e.low, e.high) for e in (self.a, self.b))
        ratio = with_interval(self.ratio, self.low, self.high, undetermined=self.undetermined)
        return f"{self.flag:11} {self.name}: {a} -> {b} {unit_word}, B/A {ratio}"


@dataclass(kw_only=True)
class SweepComparison:
    a: str
    b: str
    objective: str
    higher_is_better: bool
    changes: list[Change] = field(default_factory=list)
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)
    # matched, but a unit did other work in each (a time per unit compares nothing then): name -> A, B
    other_work: dict[str, tuple[str, str]] = field(default_factory=dict)
    environment: dict[str, tuple[str, str]] = field(default_factory=dict)  # what differs: key -> (A, B)


def change(a: Estimate, b: Estimate, rule: Rule, *, higher_is_better: bool) -> Change:
    """One configuration in sweep A and in sweep B, judged by the verdict's own rule (docs/verdicts.md):
    a noisy figure widens by the host's slowing rather than vetoing; `improvement` when B is better."""
    ratio = b.value / a.value
    half = Z95 * math.hypot(a.log_se, b.log_se)
    low, high = ratio * math.exp(-half), ratio * math.exp(half)
    alone = {"eager_name": None, "speedup": None, "base": None}  # two sweeps: no shared paired baseline
    result = compare(
        dataclasses.replace(a, name="A", **alone),
        dataclasses.replace(b, name="B", **alone),
        dataclasses.replace(rule, higher_is_better=higher_is_better),
    )
    flag = {"B": IMPROVEMENT, "A": REGRESSION}.get(
        result.better or "", SAME if result.reason == "tie" else UNDECIDED
    )
    return Change(name=b.name, a=a, b=b, ratio=ratio, low=low, high=high, flag=flag)


def compare_sweeps(a: Summary, b: Summary, rule: Rule) -> SweepComparison:
    if a.objective.metric != b.objective.metric:
        raise ValueError(
            f"the sweeps rank by different objectives ({a.objective.metric} and {b.objective.metric}): not comparable"
        )
    higher = a.objective.higher_is_better
    found = SweepComparison(a=a.sweep_id, b=b.sweep_id, objective=a.objective.label, higher_is_better=higher)
    in_a, in_b = ({c.rows[0].pool_hash or c.name: c for c in s.configurations} for s in (a, b))
    for key, config_b in in_b.items():
        config_a = in_a.get(key)
        if config_a is None:
            found.only_in_b.append(config_b.name)
            continue
        work_a, work_b = work_words(config_a.rows[0].work), work_words(config_b.rows[0].work)
        if not higher and work_a != work_b:  # a rate compares across work; a time per unit does not
            found.other_work[config_b.name] = (work_a, work_b)
        else:
            found.changes.append(change(config_a.estimate, config_b.estimate, rule, higher_is_better=higher))
    found.only_in_a = [c.name for key, c in in_a.items() if key not in in_b]
    env_a, env_b = (next((r.environment for r in s.rows if r.environment), {}) for s in (a, b))
    found.environment = {
        k: (env_a.get(k, "?"), env_b.get(k, "?")) for k in ENVIRONMENT_KEYS if env_a.get(k) != env_b.get(k)
    }
    return found


def work_words(work: Work | None) -> str:
    """What one unit did, as a comparison line says it: `14 samples per call cycle`."""
    if work is None:
        return "unknown work"
    tokens = f" ({work.tokens:g} tokens)" if work.tokens else ""
    return f"{work.samples:g} samples{tokens} per {work.unit}"


def lines(found: SweepComparison) -> list[str]:
    out = [f"compare {found.a} (A) with {found.b} (B), objective: {found.objective}"]
    if found.environment:
        out.append("changed: " + ", ".join(f"{k} {va} -> {vb}" for k, (va, vb) in found.environment.items()))
    else:
        out.append("changed: nothing in torch, triton, CUDA, driver, GPU or library versions")
    flags = [c.flag for c in found.changes]
    counts = {flag: flags.count(flag) for flag in (REGRESSION, IMPROVEMENT, SAME, UNDECIDED)}
    out.append(", ".join(f"{n} {flag}" for flag, n in counts.items()) + f" of {len(found.changes)} matched")
    unit = "ms" if not found.higher_is_better else "/s"
    order = {REGRESSION: 0, IMPROVEMENT: 1, UNDECIDED: 2, SAME: 3}
    out += [c.line(unit) for c in sorted(found.changes, key=lambda c: (order[c.flag], c.name))]
    for side, names in (("A", found.only_in_a), ("B", found.only_in_b)):
        if names:
            out.append(f"only in {side}: " + ", ".join(names))
    out += [
        f"not compared, a unit did other work: {name}: A {a}, B {b}"
        for name, (a, b) in found.other_work.items()
    ]
    return out


def write(found: SweepComparison, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md = out_dir / "compare.md"
    md.write_text("# " + "\n\n".join(lines(found)) + "\n")
    table = out_dir / "compare.csv"
    with open(table, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["config", "flag", *CSV_FIGURES])
        for c in found.changes:
            writer.writerow(
                [
                    c.name,
                    c.flag,
                    *interval_cells(c.a.value, c.a.low, c.a.high),
                    *interval_cells(c.b.value, c.b.low, c.b.high),
                    *interval_cells(c.ratio, c.low, c.high),
                ]
            )
    return [md, table, plot(found, out_dir / "compare.png")]


def plot(found: SweepComparison, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    colors = {REGRESSION: "tab:red", IMPROVEMENT: "tab:green", SAME: "tab:gray", UNDECIDED: "tab:olive"}
    changes = sorted(found.changes, key=lambda c: c.ratio)
    fig, ax = plt.subplots(figsize=(11, max(3.0, 0.4 * len(changes) + 1.8)))
    ax.barh(
        [c.name for c in changes],
        [c.ratio - 1 for c in changes],
        left=1,
        xerr=[
            [0.0 if c.undetermined else c.ratio - c.low for c in changes],
            [0.0 if c.undetermined else c.high - c.ratio for c in changes],
        ],
        color=[colors[c.flag] for c in changes],
        capsize=3,
    )
    ax.axvline(1.0, color="black", lw=0.8, label="1.0: unchanged")
    ax.set_xlabel(f"B / A of the {found.objective}; whiskers: 95% interval (none: undetermined)")
    ax.set_title(f"{found.b} (B) against {found.a} (A)")
    ax.legend(handles=[Patch(color=v, label=k) for k, v in colors.items()], fontsize=8, loc="lower right")
    return save_figure(fig, path)
