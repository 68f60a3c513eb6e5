"""The code's shape holds: one package talks to MLflow, the job's parent and the sweep never import
torch, imports follow the flow (no module imports a later stage's), only the scenario registry knows a
scenario by name, and docs/design.md's map names every module there is (and none that is not)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PIPELINE = ROOT / "pipeline"
# What runs in the job's parent process, in the sweep callbacks and in `python -m pipeline.report`:
# none of it may import torch when imported (the parent never initializes CUDA and starts fast).
TORCH_FREE = [
    "pipeline.run",
    "pipeline.report",
    "pipeline.status",
    "pipeline.identity",
    "pipeline.redaction",
    "pipeline.provenance",
    "pipeline.progress",
    "pipeline.display",
    "pipeline.jobdir",
    "pipeline.sweep_context",
    "pipeline.tracking",
    "pipeline.tracking.client",
    "pipeline.tracking.queries",
    "pipeline.tracking.payload",
    "pipeline.tracking.store",
    "pipeline.tracking.http",
    "pipeline.config.schema",
    "pipeline.config.fields",
    "pipeline.config.checks",
    "pipeline.config.compose",
    "pipeline.config.errors",
    "pipeline.config.known_good",
    "pipeline.config.reference",
    "pipeline.scenarios",
    "pipeline.scenarios.base",
    "pipeline.scenarios.train.config",
    "pipeline.scenarios.inference.config",
    "pipeline.scenarios.generate.config",
    "pipeline.job.parent",
    "pipeline.job.preflight",
    "pipeline.job.supervisor",
    "pipeline.job.signals",
    "pipeline.job.progress",
    "pipeline.job.outcome",
    "pipeline.job.result",
    "pipeline.job.gpu_pool",
    "pipeline.job.lifeline",
    "pipeline.job.ranks",  # torch's launcher is imported once the lifeline holds
    "pipeline.job.worker_start",
    "pipeline.job.template",  # imports torch when it runs, not when imported
    "pipeline.job.worker",  # the worker's entry imports torch only once it runs a job
    "pipeline.measure.registry",
    "pipeline.measure.stats",
    "pipeline.measure.objective",
    "pipeline.sweep.callbacks",
    "pipeline.sweep.state",
    "pipeline.sweep.summary",
    "pipeline.sweep.render",
    "pipeline.sweep.plots",
    "pipeline.sweep.pareto",
    "pipeline.sweep.finish",
    "pipeline.sweep.sync",
    "pipeline.sweep.view",
    "pipeline.sweep.lease",
    "pipeline.sweep.slurm",
    "hydra_plugins.pipeline_launchers.launchers",
]


def modules(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def imported_names(path: Path) -> set[str]:
    """Every module an `import` statement in the file names, at any depth (functions included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_only_the_tracking_package_imports_mlflow():
    importers = [
        str(path.relative_to(ROOT))
        for package in ("pipeline", "models", "losses", "hydra_plugins")
        for path in modules(ROOT / package)
        if any(name == "mlflow" or name.startswith("mlflow.") for name in imported_names(path))
    ]
    assert importers and all(path.startswith("pipeline/tracking/") for path in importers), importers


def test_only_the_nvml_module_imports_pynvml():
    """NVML is opened and shut in one place (pipeline/nvml.py), so no caller leaves it initialized."""
    importers = [
        str(path.relative_to(ROOT))
        for package in ("pipeline", "models", "losses", "hydra_plugins")
        for path in modules(ROOT / package)
        if "pynvml" in imported_names(path)
    ]
    assert importers == ["pipeline/nvml.py"], importers


def test_the_parent_and_sweep_modules_do_not_import_torch():
    probe = (
        "import json, sys\n"
        f"for name in {TORCH_FREE!r}:\n"
        "    __import__(name)\n"
        "print(json.dumps(sorted(m for m in ('torch', 'timm', 'transformers', 'mlflow') if m in sys.modules)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("name", TORCH_FREE)
def test_each_torch_free_module_exists(name: str):
    """The list above names real modules (a renamed module would make the probe vacuous)."""
    path = ROOT / name.replace(".", "/")
    assert path.with_suffix(".py").exists() or (path / "__init__.py").exists()


# The stages, lowest first: docs/design.md's flow with the job (parent and worker) over the step and the
# tracking it drives. A module may import modules of its own stage and of the stages below it, never of
# a later one. The first pattern a module matches gives its stage.
STAGES = ["foundation", "config", "scenario step", "tracking", "job", "sweep", "entry"]
PLACES: list[tuple[str, str]] = [
    (r"pipeline(\.(status|redaction|provenance|progress|jobdir|display|nvml))?", "foundation"),
    (r"pipeline\.measure\.(registry|stats|objective)", "foundation"),
    (r"pipeline\.config(\..*)?", "config"),
    (r"pipeline\.scenarios(\.base|\.\w+\.config)?", "config"),  # the registry, the scenarios' configs
    (r"pipeline\.(identity|sweep_context)", "config"),
    (r"pipeline\.(axes|measure|diagnose|scenarios)(\..*)?", "scenario step"),
    (r"(models|losses)(\..*)?", "scenario step"),
    (r"pipeline\.tracking(\..*)?", "tracking"),
    (r"pipeline\.job(\..*)?", "job"),
    (r"pipeline\.sweep(\..*)?", "sweep"),
    (r"pipeline\.(run|report)|hydra_plugins(\..*)?", "entry"),
]


def stage_of(module: str) -> int | None:
    for pattern, stage in PLACES:
        if re.fullmatch(pattern, module):
            return STAGES.index(stage)
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_stages_cover_every_module():
    unplaced = [
        module_name(p)
        for package in ("pipeline", "models", "losses", "hydra_plugins")
        for p in modules(ROOT / package)
        if stage_of(module_name(p)) is None
    ]
    assert not unplaced, f"modules in no stage of STAGES: {unplaced}"


def test_no_module_imports_a_later_stage():
    """Imports follow the flow: tracking takes a plain payload (never the job), the job never reaches
    into the sweep, a scenario never into the job's parent, the config never into the model library
    or the step's axes."""
    against = []
    for package in ("pipeline", "models", "losses", "hydra_plugins"):
        for path in modules(ROOT / package):
            importer = module_name(path)
            own = stage_of(importer)
            for name in imported_names(path):
                imported = stage_of(name)
                if own is not None and imported is not None and imported > own:
                    against.append(f"{importer} ({STAGES[own]}) imports {name} ({STAGES[imported]})")
    assert not against, "\n".join(against)


def test_the_stage_rule_would_catch_the_imports_it_forbids():
    """The rule is not vacuous: the five imports the redesign removed, and a step reaching tracking, are
    each against it."""
    for importer, imported in [
        ("pipeline.scenarios.protocol", "pipeline.tracking.client"),
        ("pipeline.tracking.client", "pipeline.job.outcome"),
        ("pipeline.job.parent", "pipeline.sweep.state"),
        ("pipeline.scenarios.base", "pipeline.job.progress"),
        ("pipeline.config.checks", "models"),
        ("pipeline.config.checks", "pipeline.axes.compile"),
    ]:
        assert stage_of(imported) > stage_of(importer), (importer, imported)


def test_only_the_scenario_registry_names_scenarios():
    """No code outside pipeline/scenarios/ holds a scenario's name: what differs between scenarios is
    asked of the scenario's config (its work, its checks, its capabilities), never of its name."""
    from pipeline.scenarios import available

    names = set(available())
    assert {"train", "inference", "generate"} <= names
    found = []
    for package in ("pipeline", "models", "losses", "hydra_plugins"):
        for path in modules(ROOT / package):
            if path.is_relative_to(PIPELINE / "scenarios"):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and node.value in names:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not found, "\n".join(found)


def job_and_sweep_file_names() -> set[str]:
    """The file names pipeline/jobdir.py gives the job's and the sweep's folders."""
    file_name = re.compile(r"[a-z_]+\.(json|csv|log|txt|pid|md)|\.[a-z_]+")
    return {
        node.value
        for node in ast.walk(ast.parse((PIPELINE / "jobdir.py").read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and file_name.fullmatch(node.value)
        and node.value not in {".json", ".csv", ".log", ".txt", ".md"}
    }


def test_only_the_folder_module_spells_the_job_and_sweep_folders_file_names():
    """Every file of a job's folder and of a sweep's is named once, in pipeline/jobdir.py (`JobDir`,
    `SweepDir`); other modules ask those for a path."""
    names = job_and_sweep_file_names()
    assert {"result.json", "worker.log", "sweep.json", "summary.md", ".template", ".lease"} <= names
    found = []
    for path in modules(PIPELINE):
        if path == PIPELINE / "jobdir.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not found, "\n".join(found)


def test_design_map_names_every_module_and_only_modules_that_exist():
    """docs/design.md's map is `ls pipeline/` with a role per module: none missing, none stale."""
    design = (ROOT / "docs" / "design.md").read_text()
    named = set(re.findall(r"\b(pipeline/[\w/]*\w\.py)\b", design))
    existing = {str(p.relative_to(ROOT)) for p in modules(PIPELINE) if p.name != "__init__.py"}
    assert not existing - named, f"docs/design.md does not mention {sorted(existing - named)}"
    assert not named - existing, f"docs/design.md names modules that do not exist: {sorted(named - existing)}"


# What applies an axis to a variant: only pipeline/scenarios/variant.py calls these (the model's dtype and
# precision, its parallel wrap, its optimizer, torch.compile and the compile call's timing).
AXIS_CALLS = {"apply_compile", "parallelize", "build_optimizer", "convert", "perf_counter"}


def axis_calls(path: Path) -> list[str]:
    """The axis-applying calls in a module (`f(...)` or `x.f(...)` with f in AXIS_CALLS), with their lines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if name in AXIS_CALLS:
                found.append(f"{path.name}:{node.lineno}: {name}()")
    return found


def scenario_modules() -> list[Path]:
    """Every scenario's implementation: the built-in ones under pipeline/scenarios/<name>/ and the example."""
    built_in = [p for p in modules(PIPELINE / "scenarios") if p.parent != PIPELINE / "scenarios"]
    return [*built_in, ROOT / "tests" / "scenario_fwd_bwd.py"]


def test_no_scenario_applies_an_axis_itself():
    """A scenario names its step and its timed unit (a Recipe); pipeline/scenarios/variant.py applies the
    model's dtype, the precision, the parallel wrap, the optimizer and compilation, in one order, and times
    the compile call."""
    found = [call for path in scenario_modules() for call in axis_calls(path)]
    assert not found, "\n".join(found)


def test_the_axis_rule_would_catch_a_scenario_that_applies_one(tmp_path: Path):
    rogue = tmp_path / "rogue.py"
    rogue.write_text(
        "def make(settings, net, head, step):\n"
        "    started = time.perf_counter()\n"
        "    return apply_compile(settings, model=precision.convert(net), loss=head, make_step=step)\n"
    )
    assert sorted(c.split(": ")[1] for c in axis_calls(rogue)) == [
        "apply_compile()",
        "convert()",
        "perf_counter()",
    ]


def direction_guesses(path: Path) -> list[str]:
    """Where a module writes which way a metric is better instead of reading the registry: a literal
    `higher_is_better=True/False`, or a unit tested for `/s` (a rate's unit standing in for its direction)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.keyword)
            and node.arg == "higher_is_better"
            and isinstance(node.value, ast.Constant)
        ):
            found.append(f"{path.name}:{node.value.lineno}: higher_is_better={node.value.value}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "endswith"
            and any(isinstance(a, ast.Constant) and a.value == "/s" for a in node.args)
        ):
            found.append(f"{path.name}:{node.lineno}: endswith('/s')")
    return found


def test_only_the_registry_says_which_way_a_metric_is_better():
    """Each metric declares its better side once, in pipeline/measure/registry.py (lower() or higher());
    the objective, the verdict, tables and plots read it (Objective.higher_is_better), never guess it."""
    found = [g for path in modules(PIPELINE) if path.name != "registry.py" for g in direction_guesses(path)]
    assert not found, "\n".join(found)


def test_the_direction_rule_would_catch_a_guess(tmp_path: Path):
    rogue = tmp_path / "rogue.py"
    rogue.write_text(  # objective.py before the registry declared directions
        "def objective_named(metric):\n"
        "    higher = METRICS[metric].unit.endswith('/s') or metric == 'flops/mfu'\n"
        "    return Objective(metric=metric, label=metric, higher_is_better=higher)\n"
        "SAMPLES = Objective(metric='throughput/samples_per_s', label='', higher_is_better=True)\n"
    )
    assert sorted(g.split(": ")[1] for g in direction_guesses(rogue)) == [
        "endswith('/s')",
        "higher_is_better=True",
    ]


def test_every_objective_a_sweep_can_rank_by_has_a_better_side():
    from pipeline.measure.objective import OBJECTIVES, objective_named
    from pipeline.measure.registry import METRICS

    assert {o.metric: o.higher_is_better for o in OBJECTIVES.values()} == {
        "step/p50_ms": False,
        "latency/p50_ms": False,
        "throughput/samples_per_s": True,
        "throughput/tokens_per_s": True,
    }
    assert (
        objective_named("flops/mfu").higher_is_better
        and objective_named("parity/top1_agree").higher_is_better
    )
    assert not objective_named("memory/ratio_vs_eager").higher_is_better
    with pytest.raises(ValueError, match="no better side"):
        objective_named("step/count")
    assert METRICS["step/noisy"].better is None and METRICS["speedup/vs_eager"].better == "higher"


# A metric naming one end of a figure's 95% interval, spelled in code ("step/p50_ci95_low_ms", or built
# as f"{base}_ci95_low_ms").
INTERVAL_NAME = re.compile(r"""["'][^"'\s]*[/}][^"'\s]*ci95_""")
# Where interval metrics are made: the registry that declares them, the records that measure them and
# the scenarios that log them (every other module of pipeline/measure/ reads them like any reader).
INTERVAL_MAKERS = (
    PIPELINE / "measure" / "registry.py",
    PIPELINE / "measure" / "stats.py",
    PIPELINE / "measure" / "paired.py",
    PIPELINE / "scenarios",
)


def interval_spellings(path: Path) -> list[str]:
    """Where a module spells an interval's metric name instead of asking the registry (`estimate`)."""
    return [
        f"{path.name}:{number}: {line.strip()}"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if INTERVAL_NAME.search(line)
    ]


def test_only_the_registry_pairs_a_figure_with_its_interval():
    """A figure's 95% interval is declared once, beside the figure in the registry (`interval=`); the
    job's words and tags, the summary, the verdict's inputs, tables and plots read it through
    `registry.estimate`, never by spelling or building the interval's names."""
    found = [
        spelled
        for path in modules(PIPELINE)
        if not any(path.is_relative_to(maker) for maker in INTERVAL_MAKERS)
        for spelled in interval_spellings(path)
    ]
    assert not found, "\n".join(found)


def test_the_interval_rule_would_catch_a_spelled_interval(tmp_path: Path):
    rogue = tmp_path / "rogue.py"
    rogue.write_text(  # outcome.py and summary.py before the registry declared intervals
        "def estimate(m, base):\n"
        "    return m[f'{base}_ms'], m.get(f'{base}_ci95_low_ms'), m.get(f'{base}_ci95_high_ms')\n"
        "low = m.get('speedup/ci95_low', s)\n"
        "columns = ['figure_ci95_low']\n"
    )
    assert [spelled.split(":")[1] for spelled in interval_spellings(rogue)] == ["2", "3"]


def test_every_interval_the_registry_declares_is_a_pair_of_registered_metrics_in_the_figures_unit():
    from pipeline.measure.registry import METRICS, SWEEP_METRICS

    table = {**METRICS, **SWEEP_METRICS}
    declared = {name: m.interval for name, m in table.items() if m.interval is not None}
    assert {"step/p50_ms", "latency/p50_ms", "speedup/vs_eager", "sweep/geomean_speedup"} <= set(declared)
    for name, (low, high) in declared.items():
        assert "low" in low and "high" in high, name
        assert table[low].unit == table[high].unit == table[name].unit, name
    ends = {end for pair in declared.values() for end in pair}
    undeclared = [n for n in table if "ci95_" in n and n not in ends]
    assert not undeclared, f"interval metrics that no figure declares as its interval: {undeclared}"


def test_each_scenarios_yaml_and_class_name_agree():
    """conf/scenario/<name>.yaml names a config class whose `name` is <name> (run names and tags use the
    class's, Hydra's choice the file's): the built-in ones and the example's (tests/conf/scenario/)."""
    from hydra.utils import get_class
    from omegaconf import OmegaConf

    files = [
        *sorted((ROOT / "conf" / "scenario").glob("*.yaml")),
        *sorted((ROOT / "tests" / "conf" / "scenario").glob("*.yaml")),
    ]
    assert len(files) >= 4

    def target(path: Path) -> str:  # a `@package _global_` file holds its node under `scenario`
        node = OmegaConf.load(path)
        return node["scenario"]["_target_"] if "scenario" in node else node["_target_"]

    disagree = [
        f"{path.relative_to(ROOT)}: {cls.__name__}.name = {cls.name!r}"
        for path in files
        for cls in [get_class(target(path))]
        if cls.name != path.stem
    ]
    assert not disagree, "\n".join(disagree)
