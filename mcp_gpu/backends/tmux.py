"""tmux: the wrapper is the session command on a dedicated socket (`tmux -L mcp-gpu`), session = job id.

The wrapper leads the pane's session; the job it starts leads a session of its own (no controlling terminal),
so the pane closing can never hang the job up, and the wrapper lives until the job's whole group is gone.
"""

from __future__ import annotations

from typing import Any, ClassVar

from mcp_gpu.backends import LaunchSpec, RunLayout
from mcp_gpu.backends._detached import DEFAULT_HEARTBEAT_S, DetachedBackend
from mcp_gpu.backends.wrapper import FEED
from mcp_gpu.models import check_name

DEFAULT_SOCKET = "mcp-gpu"

# Args: SOCKET SESSION RUN_DIR SCRIPT WORKDIR HEARTBEAT_S [SANDBOX-PREFIX...]; stdin: the environment lines.
START = r"""set -u
sock=$1 sess=$2 rd=$3 script=$4 wd=$5 hb=$6
shift 6
command -v tmux >/dev/null 2>&1 || { echo "tmux not found on PATH" >&2; exit 20; }
command -v setsid >/dev/null 2>&1 || { echo "setsid not found on PATH" >&2; exit 20; }
fifo=$rd/.env.fifo
rm -f -- "$fifo"; mkfifo -m 600 -- "$fifo" || exit 21
if ! tmux -L "$sock" new-session -d -s "$sess" -x 200 -y 50 -c "$rd" -- \
     ${1+"$@"} "${BASH:-bash}" "$rd/wrapper.sh" "$rd" "$script" "$wd" "$fifo" "$hb" </dev/null; then
  rm -f -- "$fifo"; exit 22
fi
""" + FEED


class TmuxBackend(DetachedBackend):
    name: ClassVar[str] = "tmux"
    start_script: ClassVar[str] = START
    needs: ClassVar[tuple[str, ...]] = ("tmux", "setsid", "timeout", "mkfifo")

    def start_args(self, spec: LaunchSpec, layout: RunLayout, script_path: str) -> tuple[list[str], dict[str, Any]]:
        sock = check_name(str(spec.options.get("tmux_socket") or DEFAULT_SOCKET), "tmux socket name")
        session = check_name(spec.job_id, "tmux session name")
        hb = str(int(spec.options.get("heartbeat_s", DEFAULT_HEARTBEAT_S)))
        return ([sock, session, layout.run_dir, script_path, spec.workdir, hb, *spec.sandbox],
                {"socket": sock, "session": session})

    def session_args(self, handle: dict[str, Any]) -> list[str]:
        return [str(handle.get("socket") or DEFAULT_SOCKET), str(handle.get("session") or "")]
