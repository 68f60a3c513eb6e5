"""What `scripts/install.sh` installs (issue 29, item 2): torch and torchvision as one matching pair, so
that `import timm, torchvision` works in plain Python in the installed venv, on a CPU machine too, with
no compatibility step of the project's in between."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

VENV = ROOT / ".venv"


def venv_python() -> Path:
    """The installed venv's interpreter (`make install`'s .venv; this interpreter where the tests run
    from another one)."""
    python = VENV / "bin" / "python"
    return python if python.exists() else Path(sys.executable)


def test_timm_and_torchvision_import_in_plain_python_in_the_installed_venv(tmp_path: Path):
    # -I: no project folder on sys.path, no user site: the venv alone, as a user's own script sees it
    code = (
        "import timm, torchvision, torch; from torchvision.ops import nms; "
        "print(torch.__version__, torchvision.__version__, torch.cuda.is_available())"
    )
    proc = subprocess.run(
        [str(venv_python()), "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    torch_version, vision_version, _ = proc.stdout.split()
    # the pair torchvision's releases follow: 0.(minor + 15) for torch 2.minor
    minor = int(torch_version.split(".")[1])
    assert vision_version.split(".")[:2] == ["0", str(minor + 15)], proc.stdout
    assert not (ROOT / "models" / "_compat.py").exists()  # no workaround left to go through


def test_the_install_pins_the_pair_it_installed():
    constraints = VENV / "constraints.txt"
    if not constraints.exists():  # tests run from another interpreter than make install's
        return
    pins = dict(line.split("==") for line in constraints.read_text().split())
    assert set(pins) == {"torch", "torchvision"}
