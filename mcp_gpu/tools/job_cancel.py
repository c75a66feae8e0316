"""`job_cancel`: the first destructive tool; a two-step confirmation the human completes."""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from mcp_gpu.lifecycle.jobs import CancelResult, job_cancel
from mcp_gpu.tools._base import DESTRUCTIVE, app_of, gpu_tool


def register(server: MCPServer) -> None:
    @server.tool(name="job_cancel", title="Cancel a job (needs the human's confirmation)", annotations=DESTRUCTIVE)
    @gpu_tool
    async def job_cancel_tool(
        job_id: Annotated[str, Field(description="job id (or its name)")],
        ctx: Context[Any, Any],
        token: Annotated[str | None, Field(description="the token from the first call")] = None,
        confirmation: Annotated[str | None, Field(description="the phrase exactly as the HUMAN typed it")] = None,
    ) -> CancelResult:
        """Stop a running job and its whole process tree (SIGTERM, a grace window, then SIGKILL). The first call
        changes nothing: it returns a token and a phrase like `cancel NAME on HOST`. Show the phrase to the human
        and call again with the token and the words THEY typed; never type it for them. Wrong phrase, expired or
        reused token: nothing happens."""
        return await job_cancel(app_of(ctx), job_id, token=token, confirmation=confirmation)
