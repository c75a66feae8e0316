"""The job wrapper and the static scripts that prepare, start, observe and cancel a job in its run directory.

Every script here is fixed text: job-specific values arrive as positional arguments (`bash -c SCRIPT mcp-gpu
ARGS...`) or through stdin, never spliced in. Run directory (ARCHITECTURE.md 'Contracts'):

    <run_dir>/run-<sha256[:12]>.sh   the user's command, CRLF→LF, mode 0400, never overwritten under a running job
    <run_dir>/wrapper.sh             this module's WRAPPER
    <run_dir>/meta.json              job id, name, command sha, env NAMES, created time
    <run_dir>/out.log                the job's stdout+stderr (appended)
    <run_dir>/pid, pgid              the job's pid, the wrapper's process group (the whole job tree)
    <run_dir>/heartbeat              touched every HEARTBEAT_S while the wrapper lives
    <run_dir>/exit_code              `0`, `1`, `137 KILL`, `143 TERM` … written atomically when the job ends
    <run_dir>/cancelled              written by cancel (when and how: `TERM` or `KILL`)

Environment (non-secret and secret alike) reaches the wrapper as `NAME=base64(value)` lines ended by a `.` line
through a FIFO in the run dir that the launcher feeds from its own stdin: values never touch the disk.
"""

from __future__ import annotations

import base64
import hashlib
import re

from mcp_gpu.probes import load

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

WRAPPER = r"""# mcp-gpu job wrapper (static). Args: RUN_DIR SCRIPT WORKDIR ENV_FIFO|- HEARTBEAT_S
set -u
rd=$1 script=$2 wd=$3 src=${4:--} hb=${5:-15}
cd -- "$rd" || exit 97
atomic() { printf '%s\n' "$2" > "$1.tmp.$$" && mv -f -- "$1.tmp.$$" "$1"; }
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
pg=
if [ -r "/proc/$$/stat" ]; then read -r st < "/proc/$$/stat"; st=${st##*) }; set -- $st; pg=$3; fi
[ -n "$pg" ] || pg=$(ps -o pgid= -p $$ 2>/dev/null | tr -d ' ')
atomic pgid "$pg"
me=$$
( trap 'kill $! 2>/dev/null; exit 0' TERM
  while kill -0 "$me" 2>/dev/null; do touch heartbeat; sleep "$hb" & wait $!; done ) </dev/null >/dev/null 2>&1 &
hbpid=$!
trap : TERM HUP INT
export PYTHONUNBUFFERED=1 MCP_GPU_RUN_DIR="$rd"
( atomic pid "$BASHPID"
  cd -- "$wd" || { echo "mcp-gpu: cannot enter workdir $wd"; exit 98; }
  exec "${BASH:-bash}" -- "$script" ) </dev/null >> out.log 2>&1
rc=$?
kill "$hbpid" 2>/dev/null
sig=
[ "$rc" -gt 128 ] && sig=$(kill -l "$((rc - 128))" 2>/dev/null)
atomic exit_code "$rc${sig:+ $sig}"
exit "$rc"
"""

# Prepares the run dir (args and exit codes: probes/prepare.sh).
PREPARE = load("prepare.sh")

# Shell helpers shared by the observe and cancel scripts: is any non-zombie process left in a group?
_GROUP = r"""group_alive() {
  local pg=$1 f st
  case $pg in ''|*[!0-9]*) return 1;; esac
  if [ -d /proc/self ]; then
    for f in /proc/[0-9]*/stat; do
      read -r st < "$f" 2>/dev/null || continue
      st=${st##*) }; set -- $st
      [ "$3" = "$pg" ] && [ "$1" != Z ] && [ "$1" != X ] && return 0
    done
    return 1
  fi
  kill -0 -- "-$pg" 2>/dev/null
}
pid_alive() {
  local st
  case $1 in ''|*[!0-9]*) return 1;; esac
  kill -0 "$1" 2>/dev/null || return 1
  if [ -r "/proc/$1/stat" ]; then read -r st < "/proc/$1/stat" || return 1; st=${st##*) }; set -- $st
    [ "$1" != Z ]; return; fi
  return 0
}
session_alive() { [ -n "${sock:-}" ] && tmux -L "$sock" has-session -t "=$sess" 2>/dev/null; }
"""

# Args: RUN_DIR GRACE_S PGID_HINT [TMUX_SOCKET TMUX_SESSION]. TERM to the whole process group, grace, then KILL.
CANCEL = "set -u\nrd=$1 grace=$2 hint=$3 sock=${4:-} sess=${5:-}\n" + _GROUP + r"""
pg=$(cat -- "$rd/pgid" 2>/dev/null)
[ -n "$pg" ] || pg=$hint
if [ -z "$pg" ] && session_alive; then pg=$(tmux -L "$sock" list-panes -t "=$sess" -F '#{pane_pid}' | head -n 1); fi
case $pg in ''|*[!0-9]*) pg=;; esac
own=; if [ -r /proc/$$/stat ]; then read -r st < /proc/$$/stat; st=${st##*) }; set -- $st; own=$3; fi
if [ -n "$pg" ] && { [ "$pg" -le 1 ] || [ "$pg" = "$own" ]; }; then echo "refusing to signal process group $pg" >&2; exit 3; fi
how=gone
if [ -n "$pg" ] && group_alive "$pg"; then
  how=TERM
  kill -TERM -- "-$pg" 2>/dev/null
  end=$(( $(date +%s) + ${grace%.*} ))
  while group_alive "$pg" && [ "$(date +%s)" -lt "$end" ]; do sleep 0.2; done
  if group_alive "$pg"; then how=KILL; kill -KILL -- "-$pg" 2>/dev/null; sleep 0.2; fi
fi
session_alive && { tmux -L "$sock" kill-session -t "=$sess" 2>/dev/null; [ "$how" = gone ] && how=session; }
printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$how" > "$rd/cancelled.tmp.$$" &&
  mv -f -- "$rd/cancelled.tmp.$$" "$rd/cancelled"
left=0; [ -n "$pg" ] && group_alive "$pg" && left=1
printf 'how=%s\npgid=%s\nleft=%s\n' "$how" "$pg" "$left"
"""

def normalise_command(command: str) -> str:
    """The run script's exact content: CRLF/CR → LF, one trailing newline."""
    text = command.replace("\r\n", "\n").replace("\r", "\n")
    return text if text.endswith("\n") else text + "\n"


def command_sha(script_text: str) -> str:
    return hashlib.sha256(script_text.encode("utf-8")).hexdigest()


def encode_env(env: dict[str, str], secrets: dict[str, str] | None = None) -> bytes:
    """`NAME=base64(value)` lines plus the `.` terminator: what the launcher feeds the wrapper."""
    lines = [f"{k}={base64.b64encode(v.encode('utf-8')).decode()}" for k, v in {**env, **(secrets or {})}.items()]
    return ("\n".join([*lines, "."]) + "\n").encode()


def parse_exit(text: str) -> tuple[int | None, str | None]:
    """`137 KILL` → (137, 'KILL'); `0` → (0, None); garbage → (None, None)."""
    parts = text.strip().split()
    if not parts or not parts[0].lstrip("-").isdigit():
        return None, None
    return int(parts[0]), (parts[1] if len(parts) > 1 else None)


def parse_kv(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k.strip()] = v
    return out
