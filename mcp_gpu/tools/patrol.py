"""`patrol`: phase 4, every job on every host in one call; always a report."""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from mcp_gpu.lifecycle.patrol import PatrolReport, patrol
from mcp_gpu.tools._base import READ_ONLY, app_of, gpu_tool


def register(server: MCPServer) -> None:
    @server.tool(name="patrol", title="Patrol running jobs (phase 4)", annotations=READ_ONLY)
    @gpu_tool
    async def patrol_tool(
        ctx: Context[Any, Any],
        job_ids: Annotated[list[str] | None, Field(description="jobs to look at; default: every job not yet "
                                                               "reported finished")] = None,
    ) -> PatrolReport:
        """Look at every job on every host (one probe per host, all hosts at once): alive, progress, stall, GPU,
        disk, newest checkpoint, and the log lines new since the last patrol, triaged into fixed classes with
        their remedy. `unreachable` means the host did not answer — it is NOT a failure: never cancel or tear down
        because of it. Read `summary` and `next`; details sit only on jobs with findings."""
        return await patrol(app_of(ctx), job_ids)
