# shellcheck shell=bash
# mcp-gpu liveness helpers, included by the scripts that poll them (functions only, no top-level code): pid_alive,
# pgid_of, group_alive, session_alive; each asks the process table afresh.
# A zombie counts as gone: its process has ended, only its parent has not read the status yet.

# Is process PID alive (and not a zombie)?
# shellcheck disable=SC2317  # a library: not every script that includes it calls every helper
pid_alive() {
  local st
  case ${1:-} in ''|*[!0-9]*) return 1;; esac
  kill -0 "$1" 2>/dev/null || return 1
  if [ -r "/proc/$1/stat" ]; then
    # the fields after "pid (comm) ": comm may hold spaces or ")", so cut at the last ") "
    read -r st < "/proc/$1/stat" 2>/dev/null || return 1
    st=${st##*) }
    case $st in Z*|X*) return 1;; esac
  fi
  return 0
}

# The process group of PID (empty when it is gone).
# shellcheck disable=SC2317  # a library: not every script that includes it calls every helper
pgid_of() {
  local st
  case ${1:-} in ''|*[!0-9]*) return 1;; esac
  if [ -r "/proc/$1/stat" ]; then
    read -r st < "/proc/$1/stat" 2>/dev/null || return 1
    st=${st##*) }
    # shellcheck disable=SC2086  # split the stat fields on purpose
    set -- $st
    printf '%s\n' "$3"
  else
    ps -o pgid= -p "$1" 2>/dev/null | tr -d ' '
  fi
}

# Is any non-zombie process left in process group PGID?
# shellcheck disable=SC2317  # a library: not every script that includes it calls every helper
group_alive() {
  local pg=${1:-} f st
  case $pg in ''|*[!0-9]*) return 1;; esac
  if [ -d /proc/self ]; then
    for f in /proc/[0-9]*/stat; do
      read -r st < "$f" 2>/dev/null || continue
      st=${st##*) }
      # shellcheck disable=SC2086  # split the stat fields on purpose
      set -- $st
      [ "$3" = "$pg" ] && [ "$1" != Z ] && [ "$1" != X ] && return 0
    done
    return 1
  fi
  kill -0 -- "-$pg" 2>/dev/null
}

# Does the tmux session $sess on socket $sock (globals of the including script) still exist?
# shellcheck disable=SC2317  # a library: not every script that includes it calls every helper
session_alive() { [ -n "${sock:-}" ] && tmux -L "$sock" has-session -t "=${sess:-}" 2>/dev/null; }
