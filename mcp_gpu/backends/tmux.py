"""tmux: the wrapper is the session command on a dedicated socket (`tmux -L mcp-gpu`), session = job id.

The wrapper leads the pane's session; the job it starts leads a session of its own (no controlling terminal),
so the pane closing can never hang the job up, and the wrapper lives until the job's whole group is gone.
"""

from __future__ import annotations

from typing import Any, ClassVar

from mcp_gpu.backends import LaunchSpec, RunLayout
from mcp_gpu.backends._detached import DEFAULT_HEARTBEAT_S, DetachedBackend
from mcp_gpu.models import JobHandle, check_name
from mcp_gpu.probes import load

DEFAULT_SOCKET = "mcp-gpu"

START = load("start_tmux.sh")  # args and exit codes: see the file


class TmuxBackend(DetachedBackend):
    name: ClassVar[str] = "tmux"
    start_script: ClassVar[str] = START
    needs: ClassVar[tuple[str, ...]] = ("tmux", "setsid", "timeout", "mkfifo")

    def start_args(self, spec: LaunchSpec, layout: RunLayout, script_path: str) -> tuple[list[str], dict[str, Any]]:
        sock = check_name(str(spec.options.get("tmux_socket") or DEFAULT_SOCKET), "tmux socket name")
        session = check_name(spec.job_id, "tmux session name")
        hb = str(int(spec.options.get("heartbeat_s", DEFAULT_HEARTBEAT_S)))
        return ([sock, session, layout.run_dir, script_path, spec.workdir, hb, *spec.sandbox],
                {"tmux_socket": sock, "tmux_session": session})

    def session_args(self, handle: dict[str, Any]) -> list[str]:
        h = JobHandle.of(handle)
        return [h.tmux_socket or DEFAULT_SOCKET, h.tmux_session or ""]
