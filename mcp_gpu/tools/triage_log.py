"""`triage_log`: classify a pasted log (post-mortems, smoke output) into the fixed failure classes."""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer

from mcp_gpu.tools._base import LOCAL_READ_ONLY, gpu_tool
from mcp_gpu.triage.engine import TriageReport, triage_text


def register(server: MCPServer) -> None:
    @server.tool(annotations=LOCAL_READ_ONLY)
    @gpu_tool
    async def triage_log(text: str, exit_code: int | None = None) -> TriageReport:
        """Classify a training log: the root-cause class (or 'healthy') with its confidence, and findings with gotcha
        id, evidence lines and the fixed next step; cascades of the root cause and errors that training survived
        are marked info. Pass the whole log text and the exit code if known (137 = SIGKILL, usually the OOM killer;
        143 = SIGTERM)."""
        # CPU-bound on big logs: a worker thread keeps the event loop (and every other call) responsive
        return await anyio.to_thread.run_sync(triage_text, text, exit_code)
