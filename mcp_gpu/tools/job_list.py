"""`job_list`: every job in the registry, active ones re-observed live."""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from mcp_gpu.lifecycle.jobs import JobList, job_list
from mcp_gpu.tools._base import READ_ONLY, app_of, gpu_tool


def register(server: MCPServer) -> None:
    @server.tool(name="job_list", title="List jobs", annotations=READ_ONLY)
    @gpu_tool
    async def job_list_tool(
        ctx: Context[Any, Any],
        host: Annotated[str | None, Field(description="only jobs on this host")] = None,
        state: Annotated[str | None, Field(description="launching, running, succeeded, failed, preempted, "
                                                       "cancelled or lost")] = None,
    ) -> JobList:
        """Jobs newest first with state, attempt, exit code and run dir. Launching/running jobs are checked on their
        hosts first; `unreachable: true` means the host did not answer (that is not a failure)."""
        return await job_list(app_of(ctx), host=host, state=state)
