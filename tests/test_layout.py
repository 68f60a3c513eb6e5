"""The code's shape holds: one module talks to MLflow, the job's parent and the sweep never import torch,
and docs/design.md's map names every module there is (and none that is not)."""

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
    "pipeline.tracking",
    "pipeline.config.schema",
    "pipeline.config.checks",
    "pipeline.config.errors",
    "pipeline.config.known_good",
    "pipeline.config.reference",
    "pipeline.job.parent",
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


def test_only_the_tracking_module_imports_mlflow():
    importers = [
        str(path.relative_to(ROOT))
        for package in ("pipeline", "models", "losses", "hydra_plugins")
        for path in modules(ROOT / package)
        if any(name == "mlflow" or name.startswith("mlflow.") for name in imported_names(path))
    ]
    assert importers == ["pipeline/tracking.py"]


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
    assert (ROOT / (name.replace(".", "/") + ".py")).exists()


def test_design_map_names_every_module_and_only_modules_that_exist():
    """docs/design.md's map is `ls pipeline/` with a role per module: none missing, none stale."""
    design = (ROOT / "docs" / "design.md").read_text()
    named = set(re.findall(r"\b(pipeline/[\w/]*\w\.py)\b", design))
    existing = {str(p.relative_to(ROOT)) for p in modules(PIPELINE) if p.name != "__init__.py"}
    assert not existing - named, f"docs/design.md does not mention {sorted(existing - named)}"
    assert not named - existing, f"docs/design.md names modules that do not exist: {sorted(named - existing)}"
