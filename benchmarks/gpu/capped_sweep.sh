# Sourced by the GPU campaign scripts (search31.sh, suite30.sh): one multirun with a time cap of its own.
#   capped_sweep <name> <cap s> <overrides...>   runs into $out/<name> (log $out/<name>.log), logging to $M,
# then prints its exit, its jobs' last lines and its summary's bullet lines. SIGINT at the cap: the sweep
# closes its runs KILLED and keeps what finished.
capped_sweep() {
  local name=$1 cap=$2; shift 2
  local started; started=$(date +%s)
  timeout --signal=INT --kill-after=30 "$cap" python3 -m pipeline.run -m "$@" "$M" "hydra.sweep.dir=$out/$name" \
    > "$out/$name.log" 2>&1
  echo "$name exit=$? in $(( $(date +%s) - started )) s"
  grep -E "^[a-z_0-9/].*: (FINISHED|FAILED|KILLED)" "$out/$name.log" | cut -c1-260
  sed -n '/^- /p;/^| /p' "$out/$name/summary.md" 2>/dev/null | cut -c1-300
}
