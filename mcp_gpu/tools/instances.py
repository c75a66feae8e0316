"""`instances`: what every provider bills, reconciled with the registry (read-only)."""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from mcp_gpu.lifecycle.instances import InstancesReport, reconcile
from mcp_gpu.tools._base import READ_ONLY, app_of, gpu_tool


def render(report: InstancesReport) -> str:
    return "\n".join([*report.summary, "next: " + report.next])


def register(server: MCPServer) -> None:
    @server.tool(name="instances", title="List what bills: every provider's instances vs the registry",
                 annotations=READ_ONLY)
    @gpu_tool
    async def instances_tool(
        ctx: Context[Any, Any],
        providers: Annotated[list[str] | None, Field(description="runpod, vastai, lambda, paperspace; default: every "
                                                                 "provider whose API key is set")] = None,
    ) -> Annotated[CallToolResult, InstancesReport]:
        """List every instance each provider reports for the account (status, $/h, time up, cost so far) and mark
        it: KNOWN_BUSY, KNOWN_IDLE (registered, no job: still billing?), UNKNOWN (not registered) or
        TORN_DOWN_STILL_PRESENT (a teardown was recorded but the platform still lists it). Stops nothing."""
        report = await reconcile(app_of(ctx), providers)
        return CallToolResult(content=[TextContent(type="text", text=render(report))],
                              structured_content=report.model_dump(mode="json"))
