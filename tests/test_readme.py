"""README.md cannot drift from what the tool does: every command block in it has a CPU form beside it,
an HTML comment right above the block,

    <!-- cpu:
    .venv/bin/python -m pipeline.run experiment=cpu_smoke trainer.steps=4 ...
    .venv/bin/python -m pipeline.run compile.mode=fast  # exit 2
    -->

one command a line (`# exit N`: the exit code the README says it has; 0 otherwise), the same commands
with tiny models and few steps, a dry run (`report --plan`) where only a GPU host could run them, and
`make -n` for make targets. The fast test checks that every block has one; the slow tests run them, in
the README's order, in groups: a block that reads what an earlier one made (a sweep it names, the job or
sweep folders) runs after it in its folder (its own outputs/ and MLflow store); the others alone."""

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


def made_and_read(block: Block) -> tuple[set[str], set[str]]:
    """What a block's CPU form makes that a later block may read (its sweep ids, `runs` for a single job's
    folder, `sweeps` for a sweep's), and what it reads of an earlier block's."""
    made: set[str] = set()
    read: set[str] = set()
    for command, _ in block.cpu:
        if " -m pipeline.run " in command + " " and " --help" not in command:
            ids = set(re.findall(r"sweep\.id=([\w.-]+)", command))
            (read if "sweep.resume=true" in command else made).update(ids)
            made.add("sweeps" if " -m pipeline.run -m " in command else "runs")
        read.update(
            re.findall(r"--(?:sweep|compare) ([\w.-]+)(?: ([\w.-]+))?", command)[0]
            if "--sweep " in command or "--compare " in command
            else ()
        )
        read.update(
            token
            for token, spelled in (("runs", "outputs/runs"), ("sweeps", "outputs/multirun"))
            if spelled in command
        )
        if "--sync" in command:
            read.add("sweeps")
    return made, read - {""}


def chains(found: list[Block]) -> list[list[Block]]:
    """The README's blocks in groups that run in order in one folder: a block that reads what an earlier one
    made joins that block's group; the others stand alone. Each group is a test of its own, so the slow
    suite's two workers share them out."""
    group = list(range(len(found)))

    def root(i: int) -> int:
        while group[i] != i:
            i = group[i]
        return i

    maker: dict[str, int] = {}
    for i, block in enumerate(found):
        made, read = made_and_read(block)
        if read - {"runs", "sweeps"}:  # the sweeps it names are the sweeps it reads
            read.discard("sweeps")
        for token in read:
            assert token in maker, f"README.md:{block.line}: reads {token!r}, which no earlier block makes"
            group[root(i)] = root(maker[token])
        for token in made:  # a sweep id: the block that made it; any single job or sweep: the first
            maker[token] = maker.get(token, i) if token in ("runs", "sweeps") else i
    by_root: dict[int, list[Block]] = {}
    for i, block in enumerate(found):
        by_root.setdefault(root(i), []).append(block)
    return list(by_root.values())


def test_blocks_that_read_what_another_made_run_in_its_folder():
    text = (
        "<!-- cpu:\n.venv/bin/python -m pipeline.run -m a=1,2 sweep.id=x\n-->\n```bash\nx\n```\n"
        "<!-- cpu:\n.venv/bin/python -m pipeline.report --plan a=1,2\n-->\n```bash\np\n```\n"
        "<!-- cpu:\n.venv/bin/python -m pipeline.run b=1\n-->\n```bash\nr\n```\n"
        "<!-- cpu:\n.venv/bin/python -m pipeline.report --sweep x\nls outputs/runs/*/*/\n-->\n```bash\ns\n```\n"
    )
    found = blocks(text)
    assert [[b.code.strip() for b in chain] for chain in chains(found)] == [["x", "r", "s"], ["p"]]
    assert len(chains(blocks())) >= 4  # the README's own blocks do not all wait on one another


README_CHAINS = chains(blocks())


@pytest.mark.slow
@pytest.mark.parametrize("chain", README_CHAINS, ids=[f"README.md:{c[0].line}" for c in README_CHAINS])
def test_the_readmes_commands_run_in_their_cpu_forms(tmp_path: Path, chain: list[Block]):
    work = tmp_path / "newcomer"
    work.mkdir()
    for name in ("Makefile", "scripts", "pyproject.toml"):
        (work / name).symlink_to(ROOT / name)
    (work / ".venv").symlink_to(Path(sys.prefix))  # the venv these tests run in
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.update(PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", PIPELINE_GPU_LOCK_DIR=str(tmp_path / "locks"))
    for block in chain:
        for command, expected in block.cpu:
            proc = subprocess.run(
                ["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=600
            )
            assert proc.returncode == expected, (
                f"README.md:{block.line}: `{command}` exited {proc.returncode}, not {expected}\n"
                f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
            )
            assert "Traceback" not in proc.stdout + proc.stderr, f"README.md:{block.line}: {command}"
    if any(made_and_read(block)[0] for block in chain):  # the commands' own store, not the repository's
        assert (work / "outputs" / "mlflow.db").exists()
