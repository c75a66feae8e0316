# shellcheck shell=bash disable=SC2034  # PROC_* are read by the including probe
# One snapshot of the process table for every job of the host: which pids and process groups still have a live
# (not zombie, not dead) process, and the first pids of each group (for GPU attribution). Read from /proc with
# builtins only (no fork per process); `ps` where /proc is absent. PROC_OK=0 when neither could be read: then no
# job may be judged exited (liveness unknown).
declare -A PROC_PID=() PROC_PG=() PROC_PIDS=()
# shellcheck disable=SC2034  # read by the including probe
PROC_OK=0
proc_note() {  # pid pgid state
  case $3 in Z* | X*) return ;; esac
  PROC_PID[$1]=1
  if [ -z "${PROC_PG[$2]:-}" ]; then
    PROC_PG[$2]=1
    PROC_PIDS[$2]=$1
  elif [ "${#PROC_PIDS[$2]}" -lt 300 ]; then
    PROC_PIDS[$2]+=",$1"
  fi
}
proc_snapshot() {
  local f st pid rest state pg
  if [ -r /proc/self/stat ]; then
    for f in /proc/[0-9]*/stat; do
      { IFS= read -r st || :; } 2> /dev/null < "$f" || continue  # (2> first: a process may exit meanwhile)
      [ -n "$st" ] || continue
      pid=${f#/proc/}
      pid=${pid%/stat}
      rest=${st##*) }  # the command name may hold anything: fields are counted after its last ')'
      read -r state _ pg _ <<< "$rest"
      proc_note "$pid" "$pg" "$state"
    done
    PROC_OK=1
  elif command -v ps > /dev/null 2>&1; then
    while read -r pid pg state; do proc_note "$pid" "$pg" "$state"; done < <(ps -e -o pid=,pgid=,stat= 2> /dev/null)
    if [ "${#PROC_PID[@]}" -gt 0 ]; then PROC_OK=1; fi
  fi
}
