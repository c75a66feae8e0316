#!/usr/bin/env bash
# Start (or restart) the mcp-gpu guard on this box, detached from this session so it outlives SSH and the server.
# Args: GD|'' RUN_ROOT|'' GUARD_TEXT then the guard's own args from DEADLINE on. Stdin: one line, the stop
# credential (may be empty); it reaches the guard only through a pipe, never the disk or an environment.
set -u
gd=$1 root=$2 text=$3
shift 3
[ -n "$gd" ] || gd=$HOME/.mcp-gpu/guard
[ -n "$root" ] || root=$HOME/.mcp-gpu/runs
# a leading "~/" is the remote home (the literal tilde is what we were sent, expanded here on purpose)
# shellcheck disable=SC2088
case $gd in "~/"*) gd=$HOME/${gd#"~/"};; esac
# shellcheck disable=SC2088
case $root in "~/"*) root=$HOME/${root#"~/"};; esac
mkdir -p -- "$gd" && chmod 700 -- "$gd" || exit 12
if [ -f "$gd/pid" ]; then
  old=$(head -c 32 -- "$gd/pid")
  case $old in ''|*[!0-9]*) ;; *) kill -TERM -- "-$old" 2>/dev/null;; esac
fi
printf '%s' "$text" > "$gd/guard.sh.tmp.$$" && chmod 500 -- "$gd/guard.sh.tmp.$$" &&
  mv -f -- "$gd/guard.sh.tmp.$$" "$gd/guard.sh" || exit 12
rm -f -- "$gd/NOTICE" "$gd/state"
IFS= read -r k || true
# The platform's own key inside the instance (scoped to it) wins: then the account-wide key we were sent is
# dropped here and never reaches the long-lived guard, whose memory root on this box could read.
key_env=${!#}
case $key_env in [A-Za-z_]*) inbox=${!key_env:-} ;; *) inbox= ;; esac
[ -n "$inbox" ] || [ -z "$key_env" ] ||
  inbox=$(tr '\0' '\n' < /proc/1/environ 2>/dev/null | sed -n "s/^${key_env}=//p" | head -n 1)
[ -n "$inbox" ] && k=
inbox=
# The key travels on a pipe (fd 3), read once by the guard: never its environment, which stays readable in
# /proc/PID/environ for the guard's whole life (a job on this box read it there and destroyed a pod with it).
setsid nohup bash "$gd/guard.sh" "$gd" "$root" "$@" </dev/null >>"$gd/guard.out" 2>&1 3< <(printf '%s\n' "$k") &
pid=$!
printf '%s\n' "$pid" > "$gd/pid"
printf 'pid=%s\nguard_dir=%s\nrun_root=%s\ncurl=%s\n' "$pid" "$(cd -- "$gd" && pwd -P)" "$root" \
  "$(command -v curl >/dev/null 2>&1 && echo 1 || echo 0)"
