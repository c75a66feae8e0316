#!/bin/bash
# Claim a job name on this box for one job: `mkdir` either creates the claim directory or fails because it
# exists, atomically, so of several launchers (other server processes, other machines) exactly one wins.
# Args: RUN_ROOT NAME JOB_ID PREVIOUS_ID. RUN_ROOT empty = ~/.mcp-gpu/runs.
# Exit 0 and prints `claimed` when JOB_ID now holds NAME; exit 13 and prints `held=<job id>` when a job that
# has not exited holds it; exit 12 when the run root cannot be written.
# A claim is stale (taken over) when its holder is PREVIOUS_ID (the registry saw that attempt finish) or the
# holder is not alive: its run dir is gone or holds the wrapper's exit_code, or neither its wrapper nor any
# process of its group lives (killed with its wrapper, a reboot) — unless it is still being launched (no
# process recorded yet and a run dir younger than two minutes).
set -u
root=$1 name=$2 job=$3 prev=${4:-}
[ -n "$root" ] || root="$HOME/.mcp-gpu/runs"
t='~'
case $root in "$t") root=$HOME ;; "$t"/*) root=$HOME/${root#"$t"/} ;; esac
names=$root/.names
mkdir -p -- "$names" || exit 12
c=$names/$name
holder_alive() {
  local rd=$root/$1 pg='' wp=''
  [ -e "$rd/exit_code" ] && return 1
  if [ -d "$rd" ]; then
    wp=$(head -c 32 -- "$rd/wrapper_pid" 2>/dev/null)
    case $wp in '' | *[!0-9]*) wp='' ;; *) kill -0 "$wp" 2>/dev/null && return 0 ;; esac
    pg=$(head -c 32 -- "$rd/pgid" 2>/dev/null)
    case $pg in '' | *[!0-9]* | 0 | 1) pg='' ;; *) kill -0 -- "-$pg" 2>/dev/null && return 0 ;; esac
  fi
  # nothing recorded yet (no run dir, or no process in it): a launch in progress holds the name for two minutes
  [ -z "$pg" ] && [ -z "$wp" ] && [ -n "$(find "$c" -maxdepth 0 -newermt '-120 seconds' 2>/dev/null)" ]
}
for _ in 1 2 3 4 5; do
  if mkdir -m 700 -- "$c" 2>/dev/null; then
    printf '%s\n' "$job" > "$c/job" || exit 12
    echo claimed
    exit 0
  fi
  holder=$(head -c 64 -- "$c/job" 2>/dev/null | head -n 1)
  if [ -z "$holder" ]; then
    # another launcher is between its mkdir and its write: give it a moment
    sleep 0.2
    holder=$(head -c 64 -- "$c/job" 2>/dev/null | head -n 1)
    [ -n "$holder" ] || { echo "held=unknown"; exit 13; }
  fi
  case $holder in *[!A-Za-z0-9_]*) echo "held=unknown"; exit 13 ;; esac
  if [ "$holder" = "$job" ]; then echo claimed; exit 0; fi
  if [ "$holder" != "$prev" ] && holder_alive "$holder"; then
    echo "held=$holder"
    exit 13
  fi
  # stale: rename it away (only one launcher's rename succeeds), then race for the mkdir again
  mv -- "$c" "$c.stale.$$" 2>/dev/null && rm -rf -- "$c.stale.$$"
done
echo "held=unknown"
exit 13
