#!/usr/bin/env bash
# Source this on the GPU host (no network): installs the carried wheelhouse (.whl/, built by
# ../shared/gpu/make-wheelhouse.sh) into /tmp/site once per machine and prints what the figures will
# be measured on.
if [ ! -f /tmp/site/.installed ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
  touch /tmp/site/.installed
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used,utilization.gpu,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv || true
python3 -c "import torch, timm, transformers, sys; print('python', sys.version.split()[0], '| torch', torch.__version__, '| cuda', torch.version.cuda, '| timm', timm.__version__, '| transformers', transformers.__version__)" || true
