#!/usr/bin/env bash
# Bring up a single-node SLURM cluster on this machine, for `hydra/launcher=slurm` sweeps and the
# SLURM integration test. Debian 12 (slurm-wlm 22.05) or Ubuntu 22.04+, run as root; no systemd needed.
#
#   sudo scripts/slurm-up.sh            # install if missing, configure, start, wait until the node is idle
#   sudo scripts/slurm-down.sh          # stop the daemons (scripts/slurm-down.sh)
#
# Idempotent: a second run with the cluster up changes nothing (it only resumes a DOWN/DRAINED node);
# a changed machine (CPUs, memory) rewrites slurm.conf and restarts the daemons; stale pid files and
# sockets of dead daemons are cleaned up.
#
# The cluster: one node named after `hostname -s` (address 127.0.0.1) with this machine's CPUs and
# memory (minus a margin), no GPUs (no GresTypes), one partition `debug` (default, no time limit),
# select/cons_tres with CR_CPU_Memory so several 1-CPU jobs run at once, proctrack/linuxproc and
# task/none (no cgroups, so it runs in containers too; slurm 22.05 then needs no cgroup.conf),
# SlurmUser=root. Finished jobs are recorded by
# jobcomp/filetxt, which `sacct --completion` (sacct -c) reads; there is no slurmdbd, so plain `sacct`
# says accounting is disabled.
#
# Environment:
#   SLURM_PARTITION   partition name (default debug)
#   SLURM_MEM_MARGIN_MB   memory left out of RealMemory (default: max(512, 5% of MemTotal))
#   SLURM_KILL_WAIT   seconds between SIGTERM and SIGKILL at scancel / time limit (default 30)
#   SLURM_UP_CLEAN=1  start slurmctld with cleared state (forget all jobs), e.g. after a broken run
#   SLURM_UP_TIMEOUT  seconds to wait for the node to become idle (default 60)
set -euo pipefail

MARKER="# Written by compile-sweeps scripts/slurm-up.sh"
CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
PARTITION=${SLURM_PARTITION:-debug}
KILL_WAIT=${SLURM_KILL_WAIT:-30}
UP_TIMEOUT=${SLURM_UP_TIMEOUT:-60}
CTLD_SPOOL=/var/spool/slurmctld
SLURMD_SPOOL=/var/spool/slurmd
LOG_DIR=/var/log/slurm
CTLD_PID=/run/slurmctld.pid
SLURMD_PID=/run/slurmd.pid
MUNGE_RUN=/run/munge
MUNGE_KEY=/etc/munge/munge.key

# A daemon runs when its pid names a live (not zombie) process of that name: a killed daemon
# lingers as a zombie for a while, and a stale pid file may name an unrelated process.
running() {  # pid, process name
    local stat
    [[ $1 =~ ^[0-9]+$ ]] || return 1
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    [[ $stat == "$1 ($2) "* && ${stat#*) } != [ZX]* ]]
}
alive() { [[ -f $1 ]] && running "$(cat "$1" 2>/dev/null)" "$2"; }  # pid file, process name
say() { echo "slurm-up: $*"; }
die() { echo "slurm-up: error: $*" >&2; exit 1; }
started=$SECONDS

[[ $(id -u) -eq 0 ]] || die "run as root (it installs packages and starts daemons): sudo $0"

# ------------------------------------------------------------------------------------------ packages
need=()
command -v slurmctld >/dev/null || need+=(slurmctld)
command -v slurmd >/dev/null || need+=(slurmd)
command -v sbatch >/dev/null || need+=(slurm-client)
command -v munged >/dev/null || need+=(munge)
if ((${#need[@]})); then
    command -v apt-get >/dev/null || die "missing ${need[*]} and no apt-get to install them"
    say "installing slurm-wlm ${need[*]} (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # policy-rc.d-less containers may try to start the services through invoke-rc.d: harmless here.
    apt-get install -y -q --no-install-recommends slurm-wlm slurmctld slurmd slurm-client munge >/dev/null
fi
say "$(slurmctld -V)"

# ------------------------------------------------------------------------------------------ munge
if [[ ! -s $MUNGE_KEY ]]; then
    say "creating $MUNGE_KEY"
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null; then
        mungekey --create --keyfile="$MUNGE_KEY" --force
    else
        dd if=/dev/urandom of="$MUNGE_KEY" bs=1 count=1024 status=none
    fi
fi
chown munge:munge "$MUNGE_KEY" /etc/munge
chmod 0400 "$MUNGE_KEY"
chmod 0700 /etc/munge
mkdir -p "$MUNGE_RUN" /var/lib/munge /var/log/munge
chown munge:munge "$MUNGE_RUN" /var/lib/munge /var/log/munge
chmod 0755 "$MUNGE_RUN"

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
if ! munge_ok; then
    # A dead munged leaves its pid file and socket behind; munged refuses to start over them.
    if ! alive "$MUNGE_RUN/munged.pid" munged; then
        rm -f "$MUNGE_RUN/munged.pid" "$MUNGE_RUN/munge.socket.2" "$MUNGE_RUN/munge.socket.2.lock"
    fi
    say "starting munged"
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 50); do munge_ok && break; sleep 0.1; done
    munge_ok || die "munged does not answer (see /var/log/munge/munged.log)"
fi

# ------------------------------------------------------------------------------------------ slurm.conf
NODE=$(hostname -s 2>/dev/null || true)
[[ -n $NODE ]] || NODE=localhost
# What slurmd itself detects: configuring more CPUs or memory than that drains the node.
detected=$(slurmd -C 2>/dev/null | head -1 || true)
CPUS=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$detected")
[[ -n $CPUS ]] || CPUS=$(nproc --all)
MEM_MB=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024))
MARGIN=${SLURM_MEM_MARGIN_MB:-$((MEM_MB / 20 > 512 ? MEM_MB / 20 : 512))}
REAL_MEM=$((MEM_MB - MARGIN))
((REAL_MEM > 256)) || die "only ${MEM_MB} MB of memory ($MARGIN MB margin): too little for a node"
DEF_MEM_PER_CPU=$((REAL_MEM / CPUS))

if [[ -f $CONF ]] && ! grep -qF "$MARKER" "$CONF"; then
    die "$CONF exists and was not written by this script; move it away to let this script configure a test cluster"
fi

new_conf=$(mktemp)
trap 'rm -f "$new_conf"' EXIT
cat >"$new_conf" <<EOF
$MARKER: a single-node test cluster. Rerun the script instead of editing.
ClusterName=compile-sweeps
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
SwitchType=switch/none
# No cgroups: linuxproc tracks a job's processes through /proc (parent pids), task/none binds nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
# Several small jobs at once: CPUs and memory are the consumable resources.
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerType=sched/backfill
# Scheduling and timeouts: quick to notice, quick to return a node, 30 s from SIGTERM to SIGKILL.
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=$KILL_WAIT
MinJobAge=300
MessageTimeout=10
# Finished jobs: a text log that sacct --completion (sacct -c) reads; no slurmdbd.
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$LOG_DIR/jobcomp.log
StateSaveLocation=$CTLD_SPOOL
SlurmdSpoolDir=$SLURMD_SPOOL
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmctldPort=6817
SlurmdPort=6818
DefMemPerCPU=$DEF_MEM_PER_CPU
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$REAL_MEM State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF

mkdir -p "$CONF_DIR" "$CTLD_SPOOL" "$SLURMD_SPOOL" "$LOG_DIR"
changed=0
if ! cmp -s "$new_conf" "$CONF"; then
    install -m 0644 "$new_conf" "$CONF"
    changed=1
    say "wrote $CONF: node $NODE, $CPUS CPUs, RealMemory=$REAL_MEM MB, partition $PARTITION"
fi

# ------------------------------------------------------------------------------------------ daemons
stop_daemon() {  # pid file, name
    local pidfile=$1 name=$2 pid
    alive "$pidfile" "$name" || { rm -f "$pidfile"; return 0; }
    pid=$(cat "$pidfile")
    say "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do running "$pid" "$name" || break; sleep 0.1; done
    if running "$pid" "$name"; then kill -KILL "$pid" 2>/dev/null || true; fi
    rm -f "$pidfile"
}

logtail() {
    for f in "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log"; do
        [[ -f $f ]] && { echo "--- tail $f" >&2; tail -n 25 "$f" >&2; }
    done
}

if ((changed)); then
    stop_daemon "$SLURMD_PID" slurmd
    stop_daemon "$CTLD_PID" slurmctld
fi

if ! alive "$CTLD_PID" slurmctld; then
    rm -f "$CTLD_PID"
    say "starting slurmctld${SLURM_UP_CLEAN:+ (clean state)}"
    slurmctld ${SLURM_UP_CLEAN:+-c} || { logtail; die "slurmctld did not start"; }
fi
for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q "is UP" && break; sleep 0.2; done
scontrol ping 2>/dev/null | grep -q "is UP" || { logtail; die "slurmctld does not answer (scontrol ping)"; }

if ! alive "$SLURMD_PID" slurmd; then
    rm -f "$SLURMD_PID"
    say "starting slurmd -N $NODE"
    slurmd -N "$NODE" || { logtail; die "slurmd did not start"; }
fi

# ------------------------------------------------------------------------------------------ wait for idle
state() { sinfo -h -n "$NODE" -o %T 2>/dev/null | head -1; }
deadline=$((SECONDS + UP_TIMEOUT))
resumed=0
while :; do
    st=$(state)
    case $st in
        idle | mixed | allocated | completing) break ;;
        *drain* | *down* | *fail* | *inval*)
            # A node left DOWN/DRAINED by an earlier run (unexpected reboot, killed slurmd, ...).
            if ((resumed < 3)); then
                reason=$(sinfo -h -n "$NODE" -o %E 2>/dev/null | head -1)
                say "node $NODE is $st (${reason:-no reason}): resuming it"
                scontrol update nodename="$NODE" state=resume 2>/dev/null || true
                resumed=$((resumed + 1))
            fi
            ;;
    esac
    if ((SECONDS > deadline)); then
        sinfo -N -l >&2 || true
        logtail
        die "node $NODE is '${st:-unknown}' after ${UP_TIMEOUT}s, not idle"
    fi
    sleep 0.5
done

say "cluster up in $((SECONDS - started)) s"
sinfo
