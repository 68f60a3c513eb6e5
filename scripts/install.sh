#!/usr/bin/env bash
# Create the project's virtual environment (.venv) and install the project into it, without ever
# pulling a CUDA build of torch onto a machine that has no GPU.
#
# torch is installed first, on its own: TORCH_SPEC (default torch==2.13.0) from TORCH_INDEX when set
# (e.g. https://download.pytorch.org/whl/cpu for a CPU-only machine that reaches it). The installed
# version is then pinned as a constraint, so timm/transformers/torchvision cannot replace it.
# An already-importable torch in the venv is kept as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
TORCH_INDEX=${TORCH_INDEX:-}
PYTHON=${PYTHON:-python3}

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
py="$VENV/bin/python"
"$py" -m pip install -q --upgrade pip setuptools wheel
if ! "$py" -c "import torch" 2>/dev/null; then
  echo "install: $TORCH_SPEC${TORCH_INDEX:+ from $TORCH_INDEX}"
  "$py" -m pip install -q "$TORCH_SPEC" ${TORCH_INDEX:+--index-url "$TORCH_INDEX"}
fi
torch_version=$("$py" -c "import torch; print(torch.__version__)")
echo "torch==$torch_version" > "$VENV/constraints.txt"
echo "install: project with torch pinned at $torch_version"
"$py" -m pip install -q -c "$VENV/constraints.txt" -e ".[dev]"
"$py" -c "import models._compat as c; c.ensure_torchvision_importable(); import torch, timm, transformers, hydra, mlflow; print('install: ok (torch', torch.__version__, '| timm', timm.__version__, '| transformers', transformers.__version__, '| mlflow', mlflow.__version__, ')')"
