# shellcheck shell=bash
# mcp-gpu job wrapper (static). Args: RUN_DIR SCRIPT WORKDIR ENV_FIFO|- HEARTBEAT_S
#
# Starts the run script in a session and process group of its own (pgid file = the job's group = its pid),
# touches the heartbeat, and outlives that whole group to record how the job really ended (exit_code).
# Signals (docs/architecture.md "Signals"):
# - the wrapper is not in the job's group, and catches TERM/HUP/INT: a group TERM (preemption, cancel) reaches
#   the job only, and the wrapper is still there to see its end; a hangup of the tmux pane cannot reach the job
#   (another session, no controlling terminal) and does not end the wrapper either;
# - the job's shell, on TERM, waits for the command it runs (a trainer writing its checkpoint) instead of dying
#   at once, then exits with that command's failure status, or 143 (jobrc.sh, read through BASH_ENV);
# - the exit is recorded only once no process of the job's group is left.
set -u
rd=$1 script=$2 wd=$3 src=${4:--} hb=${5:-15}
cd -- "$rd" || exit 97
# include: lib/alive.sh
atomic() { printf '%s\n' "$2" > "$1.tmp.$$" && mv -f -- "$1.tmp.$$" "$1"; }
# Observers: while this process lives and exit_code is absent, the job has not been fully recorded yet (the job's
# group may already be gone: the exit is written a moment later).
atomic wrapper_pid "$$"
if [ "$src" != "-" ]; then
  got=0
  if [ -p "$src" ] && exec 3<>"$src"; then
    while IFS= read -r -t 60 -u 3 line; do
      [ "$line" = "." ] && { got=1; break; }
      name=${line%%=*}
      case $name in ''|[0-9]*|*[!A-Za-z0-9_]*) continue;; esac
      val=$(printf '%s' "${line#*=}" | base64 -d 2>/dev/null; printf x)
      export "$name=${val%x}"
    done
    exec 3<&-
    rm -f -- "$src"
  fi
  if [ "$got" != 1 ]; then
    echo "mcp-gpu: the job environment was not received; not starting" >> out.log
    atomic exit_code "96"
    exit 96
  fi
fi

# Read by the job's shell before its script (BASH_ENV), then out of the way of the shells the job starts.
cat > jobrc.sh.tmp.$$ <<'JOBRC'
# mcp-gpu: read by the job's shell before the run script. On TERM, finish the command being run and the
# background commands (a checkpoint being written), then stop with their failure status, or 143 as for TERM.
trap '__mcp_gpu_rc=$?; wait; exit "$(( __mcp_gpu_rc ? __mcp_gpu_rc : 143 ))"' TERM
exec 9<&-
if [ -n "${MCP_GPU_USER_BASH_ENV+x}" ]; then
  BASH_ENV=$MCP_GPU_USER_BASH_ENV; unset MCP_GPU_USER_BASH_ENV
  # shellcheck disable=SC1090  # the job's own BASH_ENV, whatever it names
  [ -n "$BASH_ENV" ] && [ -r "$BASH_ENV" ] && . "$BASH_ENV"
else
  unset BASH_ENV
fi
:
JOBRC
mv -f -- "jobrc.sh.tmp.$$" jobrc.sh || exit 97

# From here on the wrapper must see the job's end: TERM (preemption of the whole box), HUP (the tmux pane
# closing) and INT only interrupt a wait. A handler, not SIG_IGN, so the job starts with default dispositions.
trap : TERM HUP INT
me=$$
# The heartbeat ignores those signals too; it stops with the wrapper (checked every beat) or on its KILL.
( trap '' TERM HUP INT
  while kill -0 "$me" 2>/dev/null; do touch heartbeat; sleep "$hb"; done ) </dev/null >/dev/null 2>&1 &
hbpid=$!
export PYTHONUNBUFFERED=1 MCP_GPU_RUN_DIR="$rd"
( atomic pid "$BASHPID"
  cd -- "$wd" || { echo "mcp-gpu: cannot enter workdir $wd"; exit 98; }
  [ -n "${BASH_ENV+x}" ] && export MCP_GPU_USER_BASH_ENV="$BASH_ENV"
  # bash expands BASH_ENV (command substitution included) before reading it: never put the run dir's path
  # there. The file is handed over on fd 9 instead, a fixed name; jobrc.sh closes it.
  exec 9< "$rd/jobrc.sh" && export BASH_ENV=/dev/fd/9
  # not a group leader here, so setsid(1) calls setsid(2) in place: the job keeps this pid and leads its group
  exec setsid "${BASH:-bash}" -- "$script" ) </dev/null >> out.log 2>&1 &
job=$!
i=0
while [ "$(pgid_of "$job")" != "$job" ] && pid_alive "$job" && [ "$i" -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
atomic pgid "$job"

# A caught signal makes `wait` return early with the job still there: wait again until it has really ended.
while :; do
  wait "$job"; rc=$?
  kill -0 "$job" 2>/dev/null || break
done
# What is left of the group: after an ending by TERM/INT/HUP, processes still handling that signal (saving a
# checkpoint): wait for them. After any other ending, strays the script left behind: hang them up, as closing
# its terminal used to, then wait. Either way the exit is recorded only once the group is gone.
if group_alive "$job"; then
  case $rc in 129|130|143) ;; *) kill -HUP -- "-$job" 2>/dev/null;; esac
  n=0
  while group_alive "$job"; do
    d=0.2; [ "$n" -ge 50 ] && d=1
    sleep "$d"; n=$((n + 1))
  done
fi
kill -KILL "$hbpid" 2>/dev/null
sig=
[ "$rc" -gt 128 ] && sig=$(kill -l "$((rc - 128))" 2>/dev/null)
atomic exit_code "$rc${sig:+ $sig}"
exit "$rc"
