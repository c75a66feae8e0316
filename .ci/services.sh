#!/bin/bash
# Real services the test suite talks to: munge, MariaDB (127.0.0.1:3307, private socket), slurmdbd, slurmctld,
# slurmd — a single-node Slurm cluster with two fake GPUs and real accounting (`sacct`).
#
#   bash .ci/services.sh up      # installs missing apt packages, starts what is not running; prints SLURM_CONF=...
#   bash .ci/services.sh down    # stops what `up` started, by pidfile
#   bash .ci/services.sh status  # one line per daemon
#
# Idempotent. All state lives under $BASE (default /tmp/mcp-gpu-ci); nothing is written to /etc except the munge
# key a fresh package install may lack. Needs root (Slurm daemons, mknod, apt). Exports nothing: tests find the
# cluster through MCP_GPU_TEST_SLURM_CONF, which .ci/run sets from the printed line.
# Env: BASE, WITH_SLURMDBD=1 (0: no MariaDB/slurmdbd; sacct then fails and code falls back to scontrol).
set -euo pipefail

BASE=${BASE:-/tmp/mcp-gpu-ci}
WITH_SLURMDBD=${WITH_SLURMDBD:-1}
S=$BASE/slurm
M=$BASE/mysql
PACKAGES=(openssh-server rsync tmux munge slurmctld slurmd slurm-client slurmdbd mariadb-server nftables iproute2 procps shellcheck)

log() { echo "services: $*" >&2; }
pidalive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
waitfor() {  # waitfor SECONDS CMD...: poll CMD every 0.1 s until it succeeds
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then log "timed out waiting for: $*"; return 1; fi
    sleep 0.1
  done
}

packages() {
  local need=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
  done
  [ ${#need[@]} -eq 0 ] && return 0
  log "installing ${need[*]}"
  # No init system here: keep postinst scripts from starting the system's own daemons.
  local own_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d; own_policy=1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  [ $own_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
  return 0
}

write_conf() {  # writes slurm.conf/gres.conf; returns 1 when slurm.conf changed (daemons must restart)
  local host ncpu mem acct
  host=$(hostname -s); ncpu=$(nproc)
  mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
  [ "$mem" -gt 4000 ] && mem=4000
  mkdir -p "$S/state" "$S/spool" "$S/fakegpu"
  local i; for i in 0 1; do [ -c "$S/fakegpu/nvidia$i" ] || mknod "$S/fakegpu/nvidia$i" c 1 3; done
  acct="AccountingStorageType=accounting_storage/none"
  if [ "$WITH_SLURMDBD" = 1 ]; then
    acct=$'AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1\nAccountingStoragePort=6819'
  fi
  cat >"$S/slurm.conf.new" <<CFG
ClusterName=ci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
$acct
JobCompType=jobcomp/filetxt
JobCompLoc=$S/jobcomp.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=5
MinJobAge=300
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$ncpu RealMemory=$mem Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CFG
  echo "NodeName=$host Name=gpu File=$S/fakegpu/nvidia[0-1]" >"$S/gres.conf"
  if [ -f "$S/slurm.conf" ] && cmp -s "$S/slurm.conf" "$S/slurm.conf.new"; then
    rm -f "$S/slurm.conf.new"; return 0
  fi
  mv "$S/slurm.conf.new" "$S/slurm.conf"
  return 1
}

up_munge() {
  install -d -o munge -g munge -m 0755 /run/munge
  [ -s /etc/munge/munge.key ] || runuser -u munge -- mungekey --create
  if ! pidalive /run/munge/munged.pid; then
    runuser -u munge -- /usr/sbin/munged
    touch "$BASE/munge.ours"
  fi
  waitfor 10 bash -c 'munge -n | unmunge'
}

up_mariadb() {
  mkdir -p "$M"
  [ -d "$M/data/mysql" ] || mariadb-install-db --no-defaults --user=root --datadir="$M/data" >"$M/install.log" 2>&1
  if ! pidalive "$M/mysqld.pid"; then
    mariadbd --no-defaults --user=root --datadir="$M/data" --socket="$M/mysqld.sock" --pid-file="$M/mysqld.pid" \
      --bind-address=127.0.0.1 --port=3307 --innodb-buffer-pool-size=64M --log-error="$M/mysqld.err" \
      </dev/null >/dev/null 2>&1 &
    waitfor 20 mariadb --no-defaults -S "$M/mysqld.sock" -e 'select 1'
  fi
  mariadb --no-defaults -S "$M/mysqld.sock" -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpw';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
}

up_slurmdbd() {
  cat >"$S/slurmdbd.conf" <<CFG
AuthType=auth/munge
DbdAddr=127.0.0.1
DbdHost=localhost
DbdPort=6819
SlurmUser=root
LogFile=$S/slurmdbd.log
PidFile=$S/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3307
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
CFG
  chmod 600 "$S/slurmdbd.conf"
  # slurmdbd has no -f: it reads slurmdbd.conf from the directory of $SLURM_CONF.
  pidalive "$S/slurmdbd.pid" || SLURM_CONF=$S/slurm.conf /usr/sbin/slurmdbd
  waitfor 20 env SLURM_CONF="$S/slurm.conf" sacctmgr -n list cluster
  SLURM_CONF=$S/slurm.conf sacctmgr -n -P list cluster format=cluster | grep -qx ci \
    || SLURM_CONF=$S/slurm.conf sacctmgr -i add cluster ci >/dev/null
}

node_ready() { sinfo -h -o %T | grep -Eqx '(idle|mixed|allocated|completing)'; }

up_slurm() {
  local changed=0
  write_conf || changed=1
  if [ $changed = 1 ]; then stop_pid "$S/slurmd.pid"; stop_pid "$S/slurmctld.pid"; fi
  up_munge
  if [ "$WITH_SLURMDBD" = 1 ]; then up_mariadb; up_slurmdbd; fi
  export SLURM_CONF=$S/slurm.conf
  pidalive "$S/slurmctld.pid" || /usr/sbin/slurmctld -f "$SLURM_CONF"
  pidalive "$S/slurmd.pid" || /usr/sbin/slurmd -f "$SLURM_CONF"
  if ! waitfor 30 node_ready; then
    scontrol update nodename="$(hostname -s)" state=resume >/dev/null 2>&1 || true
    waitfor 15 node_ready || { sinfo >&2 || true; tail -n 20 "$S/slurmctld.log" "$S/slurmd.log" >&2; return 1; }
  fi
}

stop_pid() {  # stop_pid PIDFILE: TERM, wait up to 10 s, then KILL
  pidalive "$1" || return 0
  local pid; pid=$(cat "$1")
  kill "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 10))
  while kill -0 "$pid" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then kill -9 "$pid" 2>/dev/null || true; break; fi
    sleep 0.1
  done
}

down() {
  stop_pid "$S/slurmd.pid"; stop_pid "$S/slurmctld.pid"; stop_pid "$S/slurmdbd.pid"; stop_pid "$M/mysqld.pid"
  if [ -f "$BASE/munge.ours" ]; then stop_pid /run/munge/munged.pid; rm -f "$BASE/munge.ours"; fi
}

status() {
  local f
  for f in "$S/slurmd.pid" "$S/slurmctld.pid" "$S/slurmdbd.pid" "$M/mysqld.pid" /run/munge/munged.pid; do
    if pidalive "$f"; then echo "up   $f"; else echo "down $f"; fi
  done
}

case "${1:-up}" in
  up)
    [ "$(id -u)" = 0 ] || { log "needs root (apt, mknod, Slurm daemons)"; exit 1; }
    mkdir -p "$BASE"
    packages
    up_slurm
    echo "SLURM_CONF=$S/slurm.conf"
    ;;
  down) down; log "down" ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
