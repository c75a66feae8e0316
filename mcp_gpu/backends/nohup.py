"""nohup/setsid: the fallback where tmux is absent. The wrapper leads its own session (no terminal, so nothing
can hang it up: `nohup` itself is not needed, and would leave SIGHUP ignored in the job); the job leads another."""

from __future__ import annotations

from typing import Any, ClassVar

from mcp_gpu.backends import LaunchSpec, RunLayout
from mcp_gpu.backends._detached import DEFAULT_HEARTBEAT_S, DetachedBackend
from mcp_gpu.backends.wrapper import FEED

# Args: RUN_DIR SCRIPT WORKDIR HEARTBEAT_S [SANDBOX-PREFIX...]; stdin: the environment lines.
START = r"""set -u
rd=$1 script=$2 wd=$3 hb=$4
shift 4
command -v setsid >/dev/null 2>&1 || { echo "setsid not found on PATH" >&2; exit 20; }
fifo=$rd/.env.fifo
rm -f -- "$fifo"; mkfifo -m 600 -- "$fifo" || exit 21
setsid ${1+"$@"} "${BASH:-bash}" "$rd/wrapper.sh" "$rd" "$script" "$wd" "$fifo" "$hb" </dev/null >/dev/null 2>&1 &
""" + FEED


class NohupBackend(DetachedBackend):
    name: ClassVar[str] = "nohup"
    start_script: ClassVar[str] = START
    needs: ClassVar[tuple[str, ...]] = ("setsid", "timeout", "mkfifo")

    def start_args(self, spec: LaunchSpec, layout: RunLayout, script_path: str) -> tuple[list[str], dict[str, Any]]:
        hb = str(int(spec.options.get("heartbeat_s", DEFAULT_HEARTBEAT_S)))
        return [layout.run_dir, script_path, spec.workdir, hb, *spec.sandbox], {}
