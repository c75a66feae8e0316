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
from mcp_gpu.probes import load

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

# The job wrapper (mcp_gpu/probes/wrapper.sh): written into each run dir as wrapper.sh and run there.
WRAPPER = probes.load("wrapper.sh")

# Prepares the run dir (args and exit codes: probes/prepare.sh).
PREPARE = load("prepare.sh")

# Shell helpers shared by the remote scripts (pid_alive, pgid_of, group_alive, session_alive).
_GROUP = probes.load("lib/alive.sh")

# Args: RUN_DIR GRACE_S PGID_HINT [TMUX_SOCKET TMUX_SESSION]. TERM to the whole process group, grace, then KILL
# (mcp_gpu/probes/cancel.sh).
CANCEL = probes.load("cancel.sh")


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
