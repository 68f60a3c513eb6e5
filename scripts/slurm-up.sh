#!/usr/bin/env bash
# Bring up a single-node SLURM cluster on this machine, for `hydra/launcher=slurm` sweeps and the
# SLURM integration test (tests/test_slurm.py). Debian 12 (slurm-wlm 22.05); run as root; no systemd.
#
#   sudo scripts/slurm-up.sh      # install what is missing, configure, start, wait until the node is idle
#   sudo scripts/slurm-down.sh    # cancel the jobs, stop the daemons
#
# Idempotent: run again with the cluster up, it changes nothing but resuming a DOWN/DRAINED node; a
# changed machine (CPUs, memory) rewrites the config and restarts the SLURM daemons; the pid files
# and sockets of dead daemons are cleaned up.
#
# The cluster: one node named after `hostname -s` (address 127.0.0.1) with this machine's CPUs and
# memory (minus a margin); no GPUs (no GresTypes: sbatch rejects any GPU request, so sweeps need
# hydra.launcher.gpus_per_node=0); one partition `debug` (default, no time limit); select/cons_tres
# with CR_CPU_Memory, so several 1-CPU jobs run at once; proctrack/linuxproc and task/none (no
# cgroups, so it runs in containers too, and slurm 22.05 then needs no cgroup.conf); SlurmUser=root.
# Accounting through slurmdbd on a local MariaDB, so `sacct` works as on a real cluster: submitit
# (and so Hydra's submitit launcher) polls sacct to notice jobs that ended without a result (scancel,
# time limit, node failure), and waits forever for them without it.
#
# Daemons (pid file; log): munged (/run/munge/munged.pid; /var/log/munge/munged.log), mariadbd
# (/run/mysqld/mysqld.pid; /var/log/slurm/mariadb.log), slurmdbd, slurmctld, slurmd
# (/run/<name>.pid; /var/log/slurm/<name>.log).
#
# Environment:
#   SLURM_PARTITION       partition name (default debug)
#   SLURM_MEM_MARGIN_MB   memory left out of the node's RealMemory (default max(512, 5% of MemTotal))
#   SLURM_KILL_WAIT       seconds from SIGTERM to SIGKILL at scancel and at the time limit (default 30)
#   SLURM_UP_CLEAN=1      start slurmctld with cleared state (forgets queued and running jobs)
#   SLURM_UP_TIMEOUT      seconds to wait for each daemon and for the node (default 60)
set -euo pipefail

MARKER="# Written by compile-sweeps scripts/slurm-up.sh"
CLUSTER=compile-sweeps
CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
DBD_CONF=$CONF_DIR/slurmdbd.conf
PARTITION=${SLURM_PARTITION:-debug}
KILL_WAIT=${SLURM_KILL_WAIT:-30}
UP_TIMEOUT=${SLURM_UP_TIMEOUT:-60}
CTLD_SPOOL=/var/spool/slurmctld
SLURMD_SPOOL=/var/spool/slurmd
LOG_DIR=/var/log/slurm
CTLD_PID=/run/slurmctld.pid
SLURMD_PID=/run/slurmd.pid
DBD_PID=/run/slurmdbd.pid
MUNGE_RUN=/run/munge
MUNGE_KEY=/etc/munge/munge.key
MYSQL_RUN=/run/mysqld
MYSQL_PID=$MYSQL_RUN/mysqld.pid
MYSQL_DATA=/var/lib/mysql
DB_NAME=slurm_acct_db
DB_USER=slurm

say() { echo "slurm-up: $*"; }
die() {
    echo "slurm-up: error: $*" >&2
    exit 1
}
# A daemon runs when its pid names a live (not zombie) process of that name: a killed daemon
# lingers as a zombie for a while, and a stale pid file may name an unrelated process.
running() { # pid, process name
    local stat
    [[ $1 =~ ^[0-9]+$ ]] || return 1
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    [[ $stat == "$1 ($2) "* && ${stat#*) } != [ZX]* ]]
}
alive() { [[ -f $1 ]] && running "$(cat "$1" 2>/dev/null)" "$2"; } # pid file, process name
wait_for() {                                                         # seconds, what, command...
    local seconds=$1 what=$2 deadline
    shift 2
    deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
    say "$what: up"
}
stop_daemon() { # pid file, process name
    local pidfile=$1 name=$2 pid
    alive "$pidfile" "$name" || {
        rm -f "$pidfile"
        return 0
    }
    pid=$(cat "$pidfile")
    say "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 150); do
        running "$pid" "$name" || break
        sleep 0.1
    done
    if running "$pid" "$name"; then kill -KILL "$pid" 2>/dev/null || true; fi
    rm -f "$pidfile"
}
logtail() { # files...
    local f
    for f in "$@"; do
        [[ -f $f ]] && {
            echo "--- last lines of $f" >&2
            tail -n 25 "$f" >&2
        }
    done
    return 0
}
started=$SECONDS

[[ $(id -u) -eq 0 ]] || die "run as root (it installs packages and starts daemons): sudo $0"

# ------------------------------------------------------------------------------------------ packages
need=()
for cmd in slurmctld slurmd slurmdbd sbatch sacct munged mariadbd; do
    command -v "$cmd" >/dev/null || need+=("$cmd")
done
if ((${#need[@]})); then
    command -v apt-get >/dev/null || die "missing ${need[*]}, and no apt-get to install them"
    say "installing (missing: ${need[*]}): apt-get install slurm-wlm slurmctld slurmd slurm-client slurmdbd munge mariadb-server"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # Where no init system runs, the packages' attempts to start their services fail harmlessly.
    apt-get install -y -q --no-install-recommends \
        slurm-wlm slurmctld slurmd slurm-client slurmdbd munge mariadb-server >/dev/null
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
mkdir -p "$MUNGE_RUN" /var/lib/munge /var/log/munge
chown munge:munge "$MUNGE_KEY" /etc/munge "$MUNGE_RUN" /var/lib/munge /var/log/munge
chmod 0400 "$MUNGE_KEY"
chmod 0700 /etc/munge
chmod 0755 "$MUNGE_RUN"
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
if ! munge_ok; then
    # A dead munged leaves its pid file and socket behind, and a new one refuses to start over them.
    if ! alive "$MUNGE_RUN/munged.pid" munged; then
        rm -f "$MUNGE_RUN/munged.pid" "$MUNGE_RUN/munge.socket.2" "$MUNGE_RUN/munge.socket.2.lock"
    fi
    say "starting munged"
    runuser -u munge -- /usr/sbin/munged
    touch "$MUNGE_RUN/started-by-slurm-up" # so that slurm-down.sh stops only a munged started here
    wait_for 10 munged munge_ok || {
        logtail /var/log/munge/munged.log
        die "munged does not answer"
    }
fi

# ------------------------------------------------------------------------------------------ MariaDB
mkdir -p "$MYSQL_RUN" "$LOG_DIR"
chown mysql:mysql "$MYSQL_RUN"
db_ok() { mariadb-admin --connect-timeout=2 ping; }
if ! db_ok >/dev/null 2>&1; then
    if [[ ! -d $MYSQL_DATA/mysql ]]; then
        say "initializing $MYSQL_DATA"
        mariadb-install-db --user=mysql --datadir="$MYSQL_DATA" >/dev/null
    fi
    if ! alive "$MYSQL_PID" mariadbd; then
        rm -f "$MYSQL_PID" "$MYSQL_RUN/mysqld.sock"
        touch "$LOG_DIR/mariadb.log"
        chown mysql:mysql "$LOG_DIR/mariadb.log"
        say "starting mariadbd"
        touch "$MYSQL_RUN/started-by-slurm-up" # so that slurm-down.sh stops only a mariadbd started here
        setsid /usr/sbin/mariadbd --user=mysql --pid-file="$MYSQL_PID" --log-error="$LOG_DIR/mariadb.log" \
            --innodb-buffer-pool-size=128M --innodb-lock-wait-timeout=900 </dev/null >/dev/null 2>&1 &
    fi
    wait_for "$UP_TIMEOUT" mariadbd db_ok || {
        logtail "$LOG_DIR/mariadb.log"
        die "mariadbd does not answer (mariadb-admin ping)"
    }
fi

# ------------------------------------------------------------------------------------------ configs
NODE=$(hostname -s 2>/dev/null || true)
[[ -n $NODE ]] || NODE=localhost
# What slurmd itself detects: a node configured with more CPUs or memory than that is drained.
detected=$(slurmd -C 2>/dev/null | head -1 || true)
CPUS=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$detected")
[[ -n $CPUS ]] || CPUS=$(nproc --all)
MEM_MB=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024))
MARGIN=${SLURM_MEM_MARGIN_MB:-$((MEM_MB / 20 > 512 ? MEM_MB / 20 : 512))}
REAL_MEM=$((MEM_MB - MARGIN))
((REAL_MEM > 256)) || die "only ${MEM_MB} MB of memory ($MARGIN MB margin): too little for a node"
DEF_MEM_PER_CPU=$((REAL_MEM / CPUS))

for f in "$CONF" "$DBD_CONF"; do
    if [[ -f $f ]] && ! grep -qF "$MARKER" "$f"; then
        die "$f exists and was not written by this script; move it away to let this script configure a test cluster"
    fi
done
mkdir -p "$CONF_DIR" "$CTLD_SPOOL" "$SLURMD_SPOOL" "$LOG_DIR"

# The database user's password: made once, kept in slurmdbd.conf (mode 600).
DB_PASS=$(sed -n 's/^StoragePass=//p' "$DBD_CONF" 2>/dev/null || true)
[[ -n $DB_PASS ]] || DB_PASS=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
mariadb -e "CREATE DATABASE IF NOT EXISTS $DB_NAME;
    CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
    ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
    GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'localhost';" ||
    die "could not create the accounting database (as MariaDB's root over its unix socket)"

changed=0
install_if_changed() { # tmp file, target, mode
    if ! cmp -s "$1" "$2"; then
        install -m "$3" "$1" "$2"
        changed=1
        say "wrote $2"
    fi
    rm -f "$1"
}

tmp=$(mktemp)
cat >"$tmp" <<EOF
$MARKER: the accounting daemon of a single-node test cluster. Rerun the script instead of editing.
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=$DB_NAME
StorageUser=$DB_USER
StoragePass=$DB_PASS
LogFile=$LOG_DIR/slurmdbd.log
PidFile=$DBD_PID
DebugLevel=info
EOF
install_if_changed "$tmp" "$DBD_CONF" 0600

tmp=$(mktemp)
cat >"$tmp" <<EOF
$MARKER: a single-node test cluster. Rerun the script instead of editing.
ClusterName=$CLUSTER
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
# Several small jobs at once: CPUs and memory are the consumable resources.
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerType=sched/backfill
# Quick to notice a dead slurmd, quick to return a node to service, KillWait from SIGTERM to SIGKILL.
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=$KILL_WAIT
MinJobAge=300
MessageTimeout=10
# Accounting: slurmdbd on this machine, so sacct works.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
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
install_if_changed "$tmp" "$CONF" 0644
if ((changed)); then
    say "node $NODE: $CPUS CPUs, RealMemory=$REAL_MEM MB, DefMemPerCPU=$DEF_MEM_PER_CPU MB, partition $PARTITION"
fi

# ------------------------------------------------------------------------------------------ SLURM daemons
if ((changed)); then
    stop_daemon "$SLURMD_PID" slurmd
    stop_daemon "$CTLD_PID" slurmctld
    stop_daemon "$DBD_PID" slurmdbd
fi

dbd_ok() { sacctmgr -n -P list cluster format=cluster; }
if ! alive "$DBD_PID" slurmdbd; then
    rm -f "$DBD_PID"
    say "starting slurmdbd"
    slurmdbd || {
        logtail "$LOG_DIR/slurmdbd.log"
        die "slurmdbd did not start"
    }
fi
wait_for "$UP_TIMEOUT" slurmdbd dbd_ok || {
    logtail "$LOG_DIR/slurmdbd.log"
    die "slurmdbd does not answer (sacctmgr list cluster)"
}
if ! dbd_ok 2>/dev/null | grep -qx "$CLUSTER"; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr add cluster $CLUSTER failed"
    say "registered cluster $CLUSTER with slurmdbd"
fi

if ! alive "$CTLD_PID" slurmctld; then
    rm -f "$CTLD_PID"
    # State saved under another ClusterName makes slurmctld refuse to start (CLUSTER NAME MISMATCH).
    if [[ -f $CTLD_SPOOL/clustername && $(cat "$CTLD_SPOOL/clustername") != "$CLUSTER" ]]; then
        say "$CTLD_SPOOL holds the state of cluster '$(cat "$CTLD_SPOOL/clustername")': moving it to $CTLD_SPOOL.old"
        rm -rf "$CTLD_SPOOL.old"
        mv "$CTLD_SPOOL" "$CTLD_SPOOL.old"
        mkdir -p "$CTLD_SPOOL"
    fi
    say "starting slurmctld${SLURM_UP_CLEAN:+ (clean state)}"
    slurmctld ${SLURM_UP_CLEAN:+-c} || {
        logtail "$LOG_DIR/slurmctld.log"
        die "slurmctld did not start"
    }
fi
ctld_ok() { scontrol ping | grep -q "is UP"; }
wait_for "$UP_TIMEOUT" slurmctld ctld_ok || {
    logtail "$LOG_DIR/slurmctld.log"
    die "slurmctld does not answer (scontrol ping)"
}

if ! alive "$SLURMD_PID" slurmd; then
    rm -f "$SLURMD_PID"
    say "starting slurmd -N $NODE"
    slurmd -N "$NODE" || {
        logtail "$LOG_DIR/slurmd.log"
        die "slurmd did not start"
    }
fi

# ------------------------------------------------------------------------------------------ the node
deadline=$((SECONDS + UP_TIMEOUT))
resumed=0
while :; do
    # %T: idle, mixed, allocated, drained, down, ...; a trailing * means "not responding" (yet).
    st=$(sinfo -h -n "$NODE" -o %T 2>/dev/null | head -1)
    case $st in
        idle | mixed | allocated | completing) break ;;
        *drain* | down* | *fail* | *inval*)
            # Left DOWN or DRAINED by an earlier run (killed slurmd, "unexpected reboot", ...).
            if ((resumed < 3)); then
                reason=$(sinfo -h -n "$NODE" -o %E 2>/dev/null | head -1)
                say "node $NODE is $st (${reason:-no reason}): resuming it"
                scontrol update nodename="$NODE" state=resume || true
                resumed=$((resumed + 1))
            fi
            ;;
    esac
    if ((SECONDS > deadline)); then
        sinfo -N -l >&2 || true
        logtail "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log"
        die "node $NODE is '${st:-unknown}' after ${UP_TIMEOUT}s, not idle"
    fi
    sleep 0.5
done

say "cluster $CLUSTER up ($((SECONDS - started)) s)"
sinfo
