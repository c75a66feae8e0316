"""nohup/setsid: the fallback where tmux is absent. The wrapper leads its own session (no terminal, so nothing
can hang it up: `nohup` itself is not needed, and would leave SIGHUP ignored in the job); the job leads another."""

from __future__ import annotations

from typing import Any, ClassVar

from mcp_gpu.backends import LaunchSpec, RunLayout
from mcp_gpu.backends._detached import DEFAULT_HEARTBEAT_S, DetachedBackend
from mcp_gpu.probes import load

START = load("start_nohup.sh")  # args and exit codes: see the file


class NohupBackend(DetachedBackend):
    name: ClassVar[str] = "nohup"
    start_script: ClassVar[str] = START
    needs: ClassVar[tuple[str, ...]] = ("setsid", "timeout", "mkfifo")

    def start_args(self, spec: LaunchSpec, layout: RunLayout, script_path: str) -> tuple[list[str], dict[str, Any]]:
        hb = str(int(spec.options.get("heartbeat_s", DEFAULT_HEARTBEAT_S)))
        return [layout.run_dir, script_path, spec.workdir, hb, *spec.sandbox], {}
