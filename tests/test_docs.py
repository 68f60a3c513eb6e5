"""The README's config reference is generated from the schema and must match it."""

from __future__ import annotations

from pipeline import docs
from pipeline.schema import Config


def test_readme_config_reference_matches_the_schema():
    assert docs.main(["--check"]) == 0, "run `make docs`"


def test_the_reference_lists_every_key_of_the_schema():
    text = docs.render()
    for path, *_ in docs.rows(Config, "", {}):
        assert f"| `{path}` |" in text
    assert "`max-autotune-no-cudagraphs`" in text and "`model`: " in text


def test_a_stale_reference_is_caught():
    stale = docs.README.read_text().replace("| `trainer.steps` | `100` |", "| `trainer.steps` | `99` |")
    assert docs.updated_readme(stale) != stale
