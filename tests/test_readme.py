"""README.md cannot drift from what the tool does: every command block in it has a CPU form beside it,
an HTML comment right above the block,

    <!-- cpu:
    .venv/bin/python -m pipeline.run experiment=cpu_smoke trainer.steps=4 ...
    .venv/bin/python -m pipeline.run compile.mode=fast  # exit 2
    -->

one command a line (`# exit N`: the exit code the README says it has; 0 otherwise), the same commands
with tiny models and few steps, a dry run (`report --plan`) where only a GPU host could run them, and
`make -n` for make targets. The fast test checks that every block has one; the slow test runs them all,
in the README's order, in a folder of their own (its own outputs/ and MLflow store)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
BLOCK = re.compile(
    r"(?:^[ \t]*<!-- cpu[^\n]*:\n(?P<cpu>.*?)\n[ \t]*-->\n)?^[ \t]*```bash\n(?P<code>.*?)^[ \t]*```",
    re.S | re.M,
)
EXIT = re.compile(r"\s+#\s*exit (\d+)\s*$")
# What a CPU form may start with: the project's own commands, `make -n`, and a few shell tools.
COMMANDS = (".venv/bin/python ", "make -n ", "ls ", "bash -n ")


@dataclass(frozen=True)
class Block:
    line: int
    code: str
    cpu: list[tuple[str, int]]  # (command, expected exit code)


def blocks(text: str | None = None) -> list[Block]:
    text = README.read_text() if text is None else text
    found = []
    for match in BLOCK.finditer(text):
        commands = []
        for line in (match.group("cpu") or "").splitlines():
            line = line.strip()
            if not line:
                continue
            code = EXIT.search(line)
            commands.append((EXIT.sub("", line), int(code.group(1)) if code else 0))
        found.append(Block(text.count("\n", 0, match.start("code")), match.group("code"), commands))
    return found


def test_every_command_block_of_the_readme_has_a_cpu_form():
    found = blocks()
    assert len(found) >= 10 and len(found) == README.read_text().count("```bash")
    for block in found:
        assert block.cpu, f"README.md:{block.line}: a command block without its CPU form:\n{block.code}"
        for command, _ in block.cpu:
            assert command.startswith(COMMANDS), f"README.md:{block.line}: {command}"


def test_the_cpu_form_comments_are_read_as_written():
    text = "x\n  <!-- cpu (why):\n  ls a  # exit 2\n  make -n b\n  -->\n  ```bash\n  make b\n  ```\n"
    (block,) = blocks(text)
    assert block.cpu == [("ls a", 2), ("make -n b", 0)] and block.code.strip() == "make b"


@pytest.mark.slow
def test_the_readmes_commands_run_in_their_cpu_forms(tmp_path: Path):
    work = tmp_path / "newcomer"
    work.mkdir()
    for name in ("Makefile", "scripts", "pyproject.toml"):
        (work / name).symlink_to(ROOT / name)
    (work / ".venv").symlink_to(Path(sys.prefix))  # the venv these tests run in
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.update(PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", PIPELINE_GPU_LOCK_DIR=str(tmp_path / "locks"))
    for block in blocks():
        for command, expected in block.cpu:
            proc = subprocess.run(
                ["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=600
            )
            assert proc.returncode == expected, (
                f"README.md:{block.line}: `{command}` exited {proc.returncode}, not {expected}\n"
                f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
            )
            assert "Traceback" not in proc.stdout + proc.stderr, f"README.md:{block.line}: {command}"
    assert (work / "outputs" / "mlflow.db").exists()  # the commands' own store, not the repository's
