"""`guard_status`, `guard_arm`, `guard_disarm`: the on-box guard that stops the meter when the agent is gone.

Arming and disarming change what will happen to a paid machine while nobody watches, so the HUMAN approves them
through form elicitation (they type the host name); the agent's words never do. A client without form
elicitation gets MCPError -32021 before the tool body runs: the human runs `mcp-gpu guard arm HOST ...` instead.

No `from __future__ import annotations` here: the SDK reads the resolvers' annotations at registration.
"""

from typing import Annotated, Any

from mcp.server.mcpserver import AcceptedElicitation, Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from mcp_gpu.errors import ConfirmationError, GpuError
from mcp_gpu.lifecycle import guard as g
from mcp_gpu.store import audit_log
from mcp_gpu.tools._base import app_of, error_text, gpu_tool

ARMS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)
READS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True)


class TypedHost(BaseModel):
    host: str = Field(description="type the host name to approve")


class GuardList(BaseModel):
    guards: list[g.GuardStatus]
    summary: list[str]


def _rules(max_hours: float | None, idle_minutes: float | None, grace_s: float) -> g.GuardRules:
    return g.GuardRules(max_hours=max_hours, idle_minutes=idle_minutes, grace_s=grace_s)


def ask_arm(host: str, max_hours: float | None, idle_minutes: float | None, grace_s: float,
            ctx: Context[Any, Any]) -> Elicit[TypedHost]:
    try:
        plan = g.plan_guard(app_of(ctx), host, _rules(max_hours, idle_minutes, grace_s))
    except GpuError as err:
        raise ToolError(error_text(err)) from err
    return Elicit(f"An AI agent asks to arm a guard. {plan.summary} To approve, type the host name ({host}). "
                  "Decline to refuse.", TypedHost)


def ask_disarm(host: str, ctx: Context[Any, Any]) -> Elicit[TypedHost]:
    return Elicit(f"An AI agent asks to DISARM the guard on {host}: nothing will stop the meter if the agent goes "
                  f"away. To approve, type the host name ({host}). Decline to refuse.", TypedHost)


def _approved(app: Any, answer: Any, host: str, what: str) -> None:
    if not isinstance(answer, AcceptedElicitation):
        audit_log.append(app.store, f"guard_{what}_declined", action="guard", target=host,
                         detail={"outcome": getattr(answer, "action", "?")})
        raise ConfirmationError(f"the human did not approve: the guard was not {what}ed",
                                hint="a decline is final; ask the human before trying again")
    if answer.data.host.strip() != host:
        audit_log.append(app.store, f"guard_{what}_refused", action="guard", target=host,
                         detail={"typed": answer.data.host[:80]})
        raise ConfirmationError(f"the typed host name does not match {host!r}: nothing was {what}ed",
                                hint="ask again; the human must type the host name exactly")


def register(server: MCPServer) -> None:
    @server.tool(name="guard_status", title="Show on-box guards (deadline, time left, firings)", annotations=READS)
    @gpu_tool
    async def guard_status_tool(
        ctx: Context[Any, Any],
        host: Annotated[str | None, Field(description="one host; default every host with a guard")] = None,
    ) -> GuardList:
        """Each guard's state on its box (armed, fired, stopped, notice), deadline and time left, and the events
        since the last look (also written to the audit log). A guard that wrote a NOTICE did not stop the meter."""
        app = app_of(ctx)
        from mcp_gpu.store import guards as repo

        hosts = [host] if host else [r["host"] for r in repo.all_guards(app.store)]
        st = await g.all_guard_status(app, hosts)
        return GuardList(guards=st, summary=[s.line for s in st] or ["no guard armed"])

    @server.tool(name="guard_arm", title="Arm an on-box guard (the human approves)", annotations=ARMS)
    @gpu_tool
    async def guard_arm_tool(
        host: Annotated[str, Field(description="registered host (its platform and instance id name the stop)")],
        answer: Annotated[ElicitationResult[TypedHost], Resolve(ask_arm)],
        ctx: Context[Any, Any],
        max_hours: Annotated[float | None, Field(description="hard deadline, hours from now")] = None,
        idle_minutes: Annotated[float | None, Field(description="stop after no job ran and GPUs idled this long")] = None,
        grace_s: Annotated[float, Field(description="seconds from SIGTERM to SIGKILL, for checkpoints")] = 120,
    ) -> g.GuardStatus:
        """Arm a guard ON the box that outlives this session: at the deadline or after idling it SIGTERMs the jobs,
        waits for their checkpoints, then uses only the platform's non-destructive STOP (never destroy), and only
        where the outputs survive a stop; otherwise it writes a loud notice. The human approves in a form. Without
        form support, ask the human to run `mcp-gpu guard arm HOST --max-hours H --idle-min M`."""
        app = app_of(ctx)
        _approved(app, answer, host, "arm")
        plan = g.plan_guard(app, host, _rules(max_hours, idle_minutes, grace_s))
        return await g.arm_guard(app, plan, approved_by="elicitation")

    @server.tool(name="guard_disarm", title="Disarm an on-box guard (the human approves)", annotations=ARMS)
    @gpu_tool
    async def guard_disarm_tool(
        host: Annotated[str, Field(description="host whose guard to stop")],
        answer: Annotated[ElicitationResult[TypedHost], Resolve(ask_disarm)],
        ctx: Context[Any, Any],
    ) -> g.GuardStatus:
        """Stop the guard on a host (the human approves in a form; otherwise `mcp-gpu guard disarm HOST`)."""
        app = app_of(ctx)
        _approved(app, answer, host, "disarm")
        return await g.guard_status(app, host, disarm=True)
