#!/usr/bin/env bash
# Stop the single-node test cluster of scripts/slurm-up.sh: cancel its jobs, then stop slurmd,
# slurmctld and slurmdbd, and the munged and mariadbd that slurm-up.sh started (each through its pid
# file: nothing else is touched; a munged or MariaDB that was running before slurm-up.sh is left
# alone). Idempotent.
#
#   sudo scripts/slurm-down.sh
#   SLURM_DOWN_KEEP_JOBS=1 scripts/slurm-down.sh   # do not cancel jobs: slurmctld saves them, and the
#                                                  # next slurm-up.sh recovers them
set -euo pipefail

say() { echo "slurm-down: $*"; }
[[ $(id -u) -eq 0 ]] || {
    echo "slurm-down: error: run as root" >&2
    exit 1
}
# A daemon runs when its pid names a live (not zombie) process of that name.
running() { # pid, process name
    local stat
    [[ $1 =~ ^[0-9]+$ ]] || return 1
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    [[ $stat == "$1 ($2) "* && ${stat#*) } != [ZX]* ]]
}
alive() { [[ -f $1 ]] && running "$(cat "$1" 2>/dev/null)" "$2"; } # pid file, process name
stop_daemon() {                                                      # pid file, process name
    local pidfile=$1 name=$2 pid
    if ! alive "$pidfile" "$name"; then
        rm -f "$pidfile"
        return 0
    fi
    pid=$(cat "$pidfile")
    say "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 300); do
        running "$pid" "$name" || break
        sleep 0.1
    done
    if running "$pid" "$name"; then
        say "$name did not stop in 30 s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}

if [[ -z ${SLURM_DOWN_KEEP_JOBS:-} ]] && alive /run/slurmctld.pid slurmctld; then
    jobs=$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ' || true)
    if [[ -n ${jobs// /} ]]; then
        say "cancelling jobs: $jobs"
        # shellcheck disable=SC2086
        scancel $jobs || true
        # slurmd delivers SIGTERM and, KillWait later, SIGKILL: wait, so that no job outlives slurmd.
        for _ in $(seq 120); do
            [[ -z $(squeue -h -o %A 2>/dev/null) ]] && break
            sleep 1
        done
    fi
fi

stop_daemon /run/slurmd.pid slurmd
stop_daemon /run/slurmctld.pid slurmctld
stop_daemon /run/slurmdbd.pid slurmdbd
if [[ -f /run/mysqld/started-by-slurm-up ]]; then
    stop_daemon /run/mysqld/mysqld.pid mariadbd
    rm -f /run/mysqld/started-by-slurm-up
fi
if [[ -f /run/munge/started-by-slurm-up ]]; then
    stop_daemon /run/munge/munged.pid munged
    rm -f /run/munge/started-by-slurm-up
fi
say "stopped"
