#!/usr/bin/env bash
# Create the project's virtual environment (.venv) and install the project into it.
#
# torch and torchvision are installed first, together, as a matching pair in one pip call from one
# index (timm imports torchvision, whose compiled ops only load beside the torch build they were built
# for): TORCH_SPEC, by default by machine (x86_64: torch==2.14.1 torchvision==0.29.1; aarch64:
# torch==2.9.1 torchvision==0.24.1), from TORCH_INDEX when set (e.g. https://download.pytorch.org/whl/cpu
# for the CPU-only builds of both, where that index is reachable; PyPI's x86_64 builds carry CUDA's
# libraries, about 5.5 GB, and run on a CPU as well). The installed versions are then pinned as
# constraints, so timm/transformers cannot replace either.
# A torch and torchvision already in the venv that import together (a GPU host's own build) are kept;
# a pair that does not (a CPU torch beside a CUDA torchvision) is replaced by TORCH_SPEC's.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
case "$(uname -m)" in
  aarch64 | arm64) default_spec="torch==2.9.1 torchvision==0.24.1" ;;
  *) default_spec="torch==2.14.1 torchvision==0.29.1" ;;
esac
TORCH_SPEC=${TORCH_SPEC:-$default_spec}
TORCH_INDEX=${TORCH_INDEX:-}
PYTHON=${PYTHON:-python3}

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
py="$VENV/bin/python"
"$py" -m pip install -q --upgrade pip setuptools wheel
if ! "$py" -c "import torch, torchvision" 2>/dev/null; then
  if "$py" -c "import torch" 2>/dev/null; then
    echo "install: torch $("$py" -c "import torch; print(torch.__version__)") has no torchvision that loads beside it: replacing both"
  fi
  echo "install: $TORCH_SPEC${TORCH_INDEX:+ from $TORCH_INDEX}"
  # shellcheck disable=SC2086 # TORCH_SPEC is a list of requirements
  "$py" -m pip install -q $TORCH_SPEC ${TORCH_INDEX:+--index-url "$TORCH_INDEX"}
fi
"$py" -c 'from importlib.metadata import version; print("torch==" + version("torch")); print("torchvision==" + version("torchvision"))' > "$VENV/constraints.txt"
echo "install: project with $(paste -sd' ' "$VENV/constraints.txt") pinned"
"$py" -m pip install -q -c "$VENV/constraints.txt" -e ".[dev]"
"$py" -c "import torch, torchvision, timm, transformers, hydra, mlflow; print('install: ok (torch', torch.__version__, '| torchvision', torchvision.__version__, '| timm', timm.__version__, '| transformers', transformers.__version__, '| mlflow', mlflow.__version__, ')')"
