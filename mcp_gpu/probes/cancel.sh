# shellcheck shell=bash
# mcp-gpu cancel (static). Args: RUN_DIR GRACE_S PGID_HINT [TMUX_SOCKET TMUX_SESSION]
# TERM to the job's whole process group, the grace window, then KILL. `cancelled` (when, and TERM or KILL) is
# written before each signal, so whoever sees the job's end sees the cancel first; the wrapper (outside the
# job's group) records the exit it saw, and the tmux session is closed only after that.
# Prints how=TERM|KILL|session|gone, pgid= and left=1 when a process of the group survived SIGKILL.
set -u
rd=$1 grace=$2 hint=$3 sock=${4:-} sess=${5:-}
# include: lib/alive.sh
mark() {
  printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$1" > "$rd/cancelled.tmp.$$" &&
    mv -f -- "$rd/cancelled.tmp.$$" "$rd/cancelled"
}
case $grace in ''|*[!0-9]*) grace=10;; esac
pg=$(cat -- "$rd/pgid" 2>/dev/null)
[ -n "$pg" ] || pg=$hint
if [ -z "$pg" ]; then  # the wrapper started the job but has not written pgid yet: the job leads its own group
  p=$(cat -- "$rd/pid" 2>/dev/null)
  [ -n "$p" ] && [ "$(pgid_of "$p")" = "$p" ] && pg=$p
fi
if [ -z "$pg" ] && session_alive; then pg=$(tmux -L "$sock" list-panes -t "=$sess" -F '#{pane_pid}' | head -n 1); fi
case $pg in ''|*[!0-9]*) pg=;; esac
own=$(pgid_of $$)
if [ -n "$pg" ] && { [ "$pg" -le 1 ] || [ "$pg" = "$own" ]; }; then echo "refusing to signal process group $pg" >&2; exit 3; fi
how=gone
if [ -n "$pg" ] && group_alive "$pg"; then
  how=TERM
  mark TERM
  kill -TERM -- "-$pg" 2>/dev/null
  t0=$(date +%s)
  while group_alive "$pg" && [ "$(( $(date +%s) - t0 ))" -le "$grace" ]; do sleep 0.2; done
  if group_alive "$pg"; then
    how=KILL
    mark KILL
    kill -KILL -- "-$pg" 2>/dev/null
    i=0; while group_alive "$pg" && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  fi
  # the wrapper records the exit once the group is gone; wait for it briefly (a wrapper may be gone too)
  i=0; while [ ! -e "$rd/exit_code" ] && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
fi
if session_alive; then
  tmux -L "$sock" kill-session -t "=$sess" 2>/dev/null
  [ "$how" = gone ] && how=session
fi
case $how in gone|session) mark "$how";; esac
left=0; [ -n "$pg" ] && group_alive "$pg" && left=1
printf 'how=%s\npgid=%s\nleft=%s\n' "$how" "$pg" "$left"
