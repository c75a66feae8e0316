"""`wait`: block until a watched job changes or a bound passes; progress notifications while waiting."""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from mcp_gpu.lifecycle.wait import MAX_BOUND_S, WaitResult, wait
from mcp_gpu.tools._base import app_of, gpu_tool
from mcp_gpu.tools.patrol import render

# Not read-only: each tick is a patrol, which records job states and may relaunch a job that opted in.
WAITS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)


def register(server: MCPServer) -> None:
    @server.tool(name="wait", title="Wait until a job changes (finish, failure, stall, preemption)",
                 annotations=WAITS)
    @gpu_tool
    async def wait_tool(
        ctx: Context[Any, Any],
        job_ids: Annotated[list[str] | None, Field(description="jobs to watch; default: every job not yet reported "
                                                               "finished")] = None,
        timeout_s: Annotated[float, Field(description=f"return after this many seconds without a change "
                                                      f"(max {MAX_BOUND_S:.0f})")] = 300,
    ) -> Annotated[CallToolResult, WaitResult]:
        """Block until a watched job finishes, fails (with its class), stalls, is preempted or its host stops
        answering — or until timeout_s passes with no change. Returns the same compact delta as patrol. Loop
        "wait → act → wait" instead of sleeping between patrols; `changed: false` just means call wait again."""

        async def tell(done: float, total: float, message: str) -> None:
            await ctx.report_progress(done, total, message)

        res = await wait(app_of(ctx), job_ids, timeout_s=timeout_s, progress=tell)
        head = (f"wait: {'CHANGED' if res.changed else 'no change'} after {res.waited_s:.0f}s "
                f"({res.ticks} look(s) at {len(res.watched)} job(s))")
        body = [head, *res.changes, render(res.report).split("\n", 1)[-1] if res.report.jobs else "",
                "" if res.changed else "next: " + res.next]
        return CallToolResult(content=[TextContent(type="text", text="\n".join(x for x in body if x))],
                              structured_content=res.model_dump(mode="json", by_alias=True))
