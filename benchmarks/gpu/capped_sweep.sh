# Sourced by the GPU campaign scripts (search31.sh, suite30.sh): one multirun with a time cap of its own.
#   capped_sweep <name> <cap s> <overrides...>   runs into $out/<name> (log $out/<name>.log), logging to $M,
# then prints its exit, its jobs' last lines and its summary's bullet lines. SIGINT at the cap: the sweep
# closes its runs KILLED and keeps what finished, and the summary is written from its job folders.
capped_sweep() {
  local name=$1 cap=$2; shift 2
  local started; started=$(date +%s)
  timeout --signal=INT --kill-after=30 "$cap" python3 -m pipeline.run -m "$@" "$M" "hydra.sweep.dir=$out/$name" \
    > "$out/$name.log" 2>&1
  echo "$name exit=$? in $(( $(date +%s) - started )) s"
  # a sweep stopped at its cap writes no summary (the user's Ctrl-C path: `--sync` closes it): summarize
  # what its job folders hold, so that the cut sweep still has its table and verdict
  [ -f "$out/$name/summary.md" ] || python3 -m pipeline.report --results "$out/$name" > /dev/null 2>&1
  grep -E "^[a-z_0-9/].*: (FINISHED|FAILED|KILLED)" "$out/$name.log" | cut -c1-260
  sed -n '/^- /p;/^| /p' "$out/$name/summary.md" 2>/dev/null | cut -c1-300
}
