"""`triage_log`: classify a pasted log (post-mortems, smoke output) into the fixed failure classes."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from mcp_gpu.tools._base import LOCAL_READ_ONLY, gpu_tool
from mcp_gpu.triage.engine import TriageReport, triage_text


def register(server: MCPServer) -> None:
    @server.tool(annotations=LOCAL_READ_ONLY)
    @gpu_tool
    async def triage_log(text: str, exit_code: int | None = None) -> TriageReport:
        """Classify a training log: the root-cause class (or 'healthy') and findings with gotcha id, evidence lines
        and the fixed next step; cascades of the root cause are marked info. Pass the log text (its last 20,000 lines
        are read) and the exit code if known (137 = SIGKILL, usually the OOM killer; 143 = SIGTERM)."""
        return triage_text(text, exit_code)
