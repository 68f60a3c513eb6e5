"""The docs match the code: docs/reference.md is generated from the schema and the registry, and every
test the docs cite as proof exists."""

from __future__ import annotations

import re
from pathlib import Path

from pipeline.config import reference as docs
from pipeline.config.schema import Config

ROOT = Path(__file__).resolve().parent.parent


def test_the_config_and_metrics_reference_matches_the_schema_and_the_registry():
    assert docs.main(["--check"]) == 0, "run `make docs`"


def test_the_reference_lists_every_key_of_the_schema():
    text = docs.render()
    for path, *_ in docs.rows(Config, "", {}):
        assert f"| `{path}` |" in text
    assert "`max-autotune-no-cudagraphs`" in text and "`model`: " in text


def test_a_stale_reference_is_caught():
    stale = docs.REFERENCE.read_text().replace("| `trainer.steps` | `100` |", "| `trainer.steps` | `99` |")
    assert docs.updated_reference(stale) != stale


def _cited_tests(text: str) -> list[tuple[str, str]]:
    """(file, test name) for each `tests/x.py::test_y` in the text; `::test_z` cites the last file."""
    cited, last_file = [], None
    for file, name in re.findall(r"`(tests/[\w/]+\.py)?::(test_\w+)`", text):
        last_file = file or last_file
        cited.append((last_file, name))
    return cited


def test_every_test_the_fault_table_cites_exists():
    cited = _cited_tests((ROOT / "docs/reliability.md").read_text())
    assert len(cited) >= 20
    for file, name in cited:
        assert file is not None, f"docs/reliability.md: ::{name} cites no file"
        source = (ROOT / file).read_text()
        assert re.search(rf"^def {name}\(", source, re.M), (
            f"docs/reliability.md cites {file}::{name}, which does not exist"
        )


def test_cited_tests_are_read_with_their_file():
    cited = _cited_tests("`tests/test_job.py::test_one` and `::test_two`")
    assert cited == [("tests/test_job.py", "test_one"), ("tests/test_job.py", "test_two")]


def test_the_job_cost_figures_the_docs_quote_are_what_job_cost_py_computes():
    """README.md, docs/results.md and benchmarks/RESULTS.md quote benchmarks/job_cost.py's medians of its recorded run
    (issue 29: figures the scripts no longer printed)."""
    import json
    import statistics

    recorded = json.loads((ROOT / "benchmarks/results/cpu-2026-11-23-jobcost/job_cost.json").read_text())
    medians = {s["worker_start"]: f"{statistics.median(s['job_wall_s']):.2f}" for s in recorded["sweeps"]}
    readme = " ".join((ROOT / "README.md").read_text().split())
    quoted = re.findall(r"median `job_wall_s` ([\d.]+) s against ([\d.]+) s spawned", readme)
    assert quoted == [(medians["template"], medians["spawn"])]
    results_page = " ".join((ROOT / "docs/results.md").read_text().split())
    assert f"{medians['template']} s forked against {medians['spawn']} s spawned" in results_page
    results = (ROOT / "benchmarks/RESULTS.md").read_text()
    assert f"median {medians['template']} s with the template against {medians['spawn']} s spawned" in results
