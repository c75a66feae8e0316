"""The job wrapper and the static scripts that prepare, start, observe and cancel a job in its run directory.

Every script here is fixed text (the wrapper and cancel scripts are files under mcp_gpu/probes/): job-specific
values arrive as positional arguments (`bash -c SCRIPT mcp-gpu ARGS...`) or through stdin, never spliced in.
Run directory (ARCHITECTURE.md 'Contracts'):

    <run_dir>/run-<sha256[:12]>.sh   the user's command, CRLF→LF, mode 0400, never overwritten under a running job
    <run_dir>/wrapper.sh             this module's WRAPPER (mcp_gpu/probes/wrapper.sh)
    <run_dir>/jobrc.sh               written by the wrapper; the job's shell reads it first (BASH_ENV=/dev/fd/9):
                                     on TERM it finishes the running command (a checkpoint save) before it exits
    <run_dir>/meta.json              job id, name, command sha, env NAMES, created time
    <run_dir>/out.log                the job's stdout+stderr (appended)
    <run_dir>/pid, pgid              the job's pid and its process group (the whole job tree): the job leads a
                                     session and group of its own (pgid = pid); the wrapper is outside it
    <run_dir>/wrapper_pid            the wrapper's pid: alive with no exit_code = the end is not recorded yet
    <run_dir>/heartbeat              touched every HEARTBEAT_S while the wrapper lives
    <run_dir>/exit_code              `0`, `1`, `137 KILL`, `143 TERM` … written atomically once the job's
                                     script has ended AND no process of its group is left
    <run_dir>/cancelled              written by cancel (when and how: `TERM` or `KILL`)

Environment (non-secret and secret alike) reaches the wrapper as `NAME=base64(value)` lines ended by a `.` line
through a FIFO in the run dir that the launcher feeds from its own stdin: values never touch the disk.
"""

from __future__ import annotations

import base64
import hashlib
import re

from mcp_gpu import probes

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

# The job wrapper (mcp_gpu/probes/wrapper.sh): written into each run dir as wrapper.sh and run there.
WRAPPER = probes.load("wrapper.sh")

# Args: RUN_ROOT|'' JOB_ID SHA12 SCRIPT_TEXT WRAPPER_TEXT META_JSON WORKDIR
# Prints run_dir=... and workdir=... (absolute). Exit 10: workdir missing; 11: script differs under a running job.
PREPARE = r"""set -u
root=$1 job=$2 sha=$3 script=$4 wrapper=$5 meta=$6 wd=$7
expand() { case $1 in "~") printf '%s' "$HOME";; "~/"*) printf '%s/%s' "$HOME" "${1#"~/"}";; *) printf '%s' "$1";; esac; }
[ -n "$root" ] || root="$HOME/.mcp-gpu/runs"
root=$(expand "$root"); wd=$(expand "$wd")
[ -d "$wd" ] || { echo "workdir does not exist: $wd" >&2; exit 10; }
wd=$(cd -- "$wd" && pwd -P) || exit 10
mkdir -p -- "$root" || exit 12
rd=$(cd -- "$root" && pwd -P)/$job || exit 12
mkdir -p -m 700 -- "$rd" || exit 12
put() { printf '%s' "$2" > "$1.tmp.$$" && chmod "$3" -- "$1.tmp.$$" && mv -f -- "$1.tmp.$$" "$1"; }
f=$rd/run-$sha.sh
if [ -e "$f" ] && ! cmp -s -- "$f" <(printf '%s' "$script"); then
  p=$(cat -- "$rd/pid" 2>/dev/null)
  if [ ! -e "$rd/exit_code" ] && [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
    echo "$f exists with different content and its job is running: refusing to overwrite it" >&2; exit 11
  fi
fi
[ -e "$f" ] && cmp -s -- "$f" <(printf '%s' "$script") || put "$f" "$script" 0400 || exit 12
put "$rd/wrapper.sh" "$wrapper" 0500 || exit 12
put "$rd/meta.json" "$meta" 0600 || exit 12
printf 'run_dir=%s\nworkdir=%s\n' "$rd" "$wd"
"""

# Shell helpers shared by the remote scripts (pid_alive, pgid_of, group_alive, session_alive).
_GROUP = probes.load("lib/alive.sh")

# Args: RUN_DIR [TMUX_SOCKET TMUX_SESSION]. Prints key=value lines.
OBSERVE = "set -u\nrd=$1 sock=${2:-} sess=${3:-}\n" + _GROUP + r"""
pid=$(cat -- "$rd/pid" 2>/dev/null) pg=$(cat -- "$rd/pgid" 2>/dev/null)
pa=0; pid_alive "$pid" && pa=1
ga=$pa; [ "$pa" = 1 ] || { group_alive "$pg" && ga=1; }
wa=0; pid_alive "$(cat -- "$rd/wrapper_pid" 2>/dev/null)" && wa=1
sa=-; [ -n "$sock" ] && { sa=0; session_alive && sa=1; }
# read after the liveness facts: the wrapper writes exit_code before it (and its session) goes away
ec=; [ -f "$rd/exit_code" ] && ec=$(head -c 200 -- "$rd/exit_code" | head -n 1)
hb=-; [ -f "$rd/heartbeat" ] && hb=$(( $(date +%s) - $(stat -c %Y -- "$rd/heartbeat" 2>/dev/null || date +%s) ))
cx=; [ -f "$rd/cancelled" ] && cx=$(head -c 100 -- "$rd/cancelled")
rdok=0; [ -d "$rd" ] && rdok=1
printf 'exit=%s\npid_alive=%s\ngroup_alive=%s\nwrapper_alive=%s\nsession=%s\nheartbeat_age=%s\ncancelled=%s\nrun_dir=%s\n' \
  "$ec" "$pa" "$ga" "$wa" "$sa" "$hb" "$cx" "$rdok"
"""

# Args: RUN_DIR GRACE_S PGID_HINT [TMUX_SOCKET TMUX_SESSION]. TERM to the whole process group, grace, then KILL
# (mcp_gpu/probes/cancel.sh).
CANCEL = probes.load("cancel.sh")

# Shared tail of the start scripts: feed the FIFO from our stdin, then wait for the wrapper's pgid file.
FEED = r"""
if ! timeout 30 sh -c '[ -p "$1" ] && cat > "$1"' mcp-gpu-feed "$fifo"; then
  rm -f -- "$fifo"; echo "the wrapper did not start (it never read its environment)" >&2; exit 23
fi
rm -f -- "$fifo"
i=0; while [ ! -s "$rd/pgid" ] && [ ! -e "$rd/exit_code" ] && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
printf 'pgid=%s\n' "$(cat -- "$rd/pgid" 2>/dev/null)"
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
