"""Red team: names checked with `^...$` and re.match accept a trailing newline ("script\\n"). Through the MCP
tools that slipped a wrapper variable past the reserved list (the wrapper splits the env stream on lines, so
`script\\n` set $script), and a host or job name with a line break into what the human reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_gpu.app import App
from tests.security.human_gate_helpers import agent, text

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("name", ["script\n", "BASH_ENV\n", "rd\n", "LD_PRELOAD\n", "MCP_GPU_X\n"])
async def test_a_reserved_env_name_with_a_trailing_newline_is_refused(app: App, tmp_path: Path, runs: Path,
                                                                     sock: str, name: str) -> None:
    async with agent(app) as c:
        r = await c.call_tool("launch_detached", {
            "host": "local", "command": "echo the recorded script", "workdir": str(tmp_path), "name": "wrapped",
            "probe_s": 2, "run_root": str(runs), "env": {name: "anything"},
            "options": {"tmux_socket": sock, "heartbeat_s": 1, "probe_interval_s": 0.3}})
    assert r.is_error and "environment variable" in text(r), text(r)
    assert not list(runs.glob("*/wrapper.sh"))


async def test_host_and_job_names_with_a_line_break_are_refused(app: App, tmp_path: Path, runs: Path,
                                                               sock: str) -> None:
    async with agent(app) as c:
        reg = await c.call_tool("register_host", {"name": "box\n", "target": "local", "platform": "vastai",
                                                  "instance_id": "123"})
        job = await c.call_tool("launch_detached", {
            "host": "local", "command": "true", "workdir": str(tmp_path), "name": "victim\n", "probe_s": 2,
            "run_root": str(runs), "options": {"tmux_socket": sock}})
    assert reg.is_error and job.is_error, (text(reg), text(job))
