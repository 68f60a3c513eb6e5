#!/usr/bin/env bash
# One quiet GPU, the instrument's own benchmarks (issue 9), all from one host:
#   overhead vs the bare loop, stability over 3 repeats, job cost; compile cache cold/warm (default and
#   max-autotune-no-cudagraphs); the fastest configuration beside the article's seed loop.
# Usage on the GPU host: bash benchmarks/gpu/single.sh <out dir>
set -uo pipefail
out=${1:?out dir}; mkdir -p "$out"
source benchmarks/gpu/setup.sh || exit 1
timeout 250 python3 benchmarks/bench.py --sections overhead --reps amp:3 --out "$out" > "$out/bench-overhead.log" 2>&1; echo "overhead exit=$?"
timeout 300 python3 benchmarks/bench.py --sections cache,fastest --out "$out" > "$out/bench-rest.log" 2>&1; echo "cache,fastest exit=$?"
python3 benchmarks/bench.py --report "$out" && sed -n '1,200p' benchmarks/RESULTS.md | cut -c1-260 | grep -vE "^\| (eager|default) \| [0-9] \|" | head -60
cp benchmarks/RESULTS.md "$out/RESULTS.md"
