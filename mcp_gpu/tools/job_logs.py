"""`job_logs`: the tail of a job's out.log."""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from mcp_gpu.lifecycle.jobs import JobLogs, job_logs
from mcp_gpu.tools._base import READ_ONLY, app_of, gpu_tool


def register(server: MCPServer) -> None:
    @server.tool(name="job_logs", title="Tail a job's log", annotations=READ_ONLY)
    @gpu_tool
    async def job_logs_tool(
        job_id: Annotated[str, Field(description="job id (or its name)")],
        ctx: Context[Any, Any],
        lines: Annotated[int, Field(description="how many lines from the end", ge=1, le=2000)] = 100,
    ) -> JobLogs:
        """The last `lines` lines of the job's output (stdout+stderr), read from the end; secrets are redacted."""
        return await job_logs(app_of(ctx), job_id, lines)
