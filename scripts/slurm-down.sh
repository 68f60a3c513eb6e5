#!/usr/bin/env bash
# Stop the single-node test cluster started by scripts/slurm-up.sh: cancel its jobs, stop slurmd,
# slurmctld and munged (each through its pid file, so nothing else is touched). Idempotent.
#
#   sudo scripts/slurm-down.sh            # stop everything
#   SLURM_DOWN_KEEP_JOBS=1 scripts/slurm-down.sh   # do not cancel jobs (slurmctld saves them; a later
#                                                  # slurm-up.sh recovers them)
#   SLURM_DOWN_KEEP_MUNGE=1 scripts/slurm-down.sh  # leave munged running
set -euo pipefail

CTLD_PID=/run/slurmctld.pid
SLURMD_PID=/run/slurmd.pid
MUNGE_PID=/run/munge/munged.pid

# A daemon runs when its pid names a live (not zombie) process of that name: a killed daemon
# lingers as a zombie for a while, and a stale pid file may name an unrelated process.
running() {  # pid, process name
    local stat
    [[ $1 =~ ^[0-9]+$ ]] || return 1
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    [[ $stat == "$1 ($2) "* && ${stat#*) } != [ZX]* ]]
}
alive() { [[ -f $1 ]] && running "$(cat "$1" 2>/dev/null)" "$2"; }  # pid file, process name
say() { echo "slurm-down: $*"; }
[[ $(id -u) -eq 0 ]] || { echo "slurm-down: error: run as root" >&2; exit 1; }


stop_daemon() {  # pid file, name
    local pidfile=$1 name=$2 pid
    if ! alive "$pidfile" "$name"; then
        rm -f "$pidfile"
        return 0
    fi
    pid=$(cat "$pidfile")
    say "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 150); do running "$pid" "$name" || break; sleep 0.1; done
    if running "$pid" "$name"; then
        say "$name did not stop in 15 s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}

if [[ -z ${SLURM_DOWN_KEEP_JOBS:-} ]] && alive "$CTLD_PID" slurmctld && command -v squeue >/dev/null; then
    jobs=$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
    if [[ -n ${jobs// /} ]]; then
        say "cancelling jobs: $jobs"
        # shellcheck disable=SC2086
        scancel $jobs 2>/dev/null || true
        # Let slurmd deliver SIGTERM and, after KillWait, SIGKILL, so no job outlives its daemon.
        for _ in $(seq 90); do
            [[ -z $(squeue -h -o %A 2>/dev/null) ]] && break
            sleep 1
        done
    fi
fi

stop_daemon "$SLURMD_PID" slurmd
stop_daemon "$CTLD_PID" slurmctld
if [[ -z ${SLURM_DOWN_KEEP_MUNGE:-} ]]; then
    stop_daemon "$MUNGE_PID" munged
fi
say "stopped"
