"""`request_teardown`, `confirm_teardown` and `teardown_with_human`: phase 5b behind the gate and a human.

`request_teardown` never acts: it stores a pending request and returns a token (a handle, not a permission).
`confirm_teardown(token)` completes it only through a human channel (mcp_gpu/lifecycle/human_gate.py):
  - the client declared form elicitation → the tool itself asks the human in a form (the declarative `Resolve`
    form, both protocol eras) to type the instance id; decline/cancel is final;
  - otherwise → the human must have run `mcp-gpu approve <request-id>` on a real terminal; until then the answer
    is `awaiting_human` and nothing happens;
  - MCP_GPU_UNATTENDED (explicit, loud) → no human, said in the answer.
`teardown_with_human(token)` is the form path only (a client without form elicitation gets MCPError -32021 before
the tool body runs). There is no argument through which the agent's own words can approve anything.

No `from __future__ import annotations` here: the SDK reads the resolver's annotations at registration.
"""

from typing import Annotated, Any

from mcp.server.mcpserver import AcceptedElicitation, Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from mcp_gpu.errors import GpuError
from mcp_gpu.lifecycle import teardown as td
from mcp_gpu.lifecycle.human_gate import FormAnswer
from mcp_gpu.tools._base import DESTRUCTIVE, app_of, error_text, gpu_tool
from mcp_gpu.tools._human import client_has_form

REQUESTS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)


class TypedInstance(BaseModel):
    """What the human types into the form (primitive fields only)."""

    instance_id: str = Field(description="type the instance id of the machine to confirm")
    code: str = Field(default="", description="authenticator code (only when the server asks for one)")


def _question(token: str, ctx: Context[Any, Any]) -> Elicit[TypedInstance]:
    app = app_of(ctx)
    try:
        pending, plan = td.pending_of(app, token, audit=False)
    except GpuError as err:
        raise ToolError(error_text(err)) from err
    return Elicit(td.form_question(pending, plan, totp_on=app.settings.confirm_mode == "totp"), TypedInstance)


def ask_human(token: str, ctx: Context[Any, Any]) -> Elicit[TypedInstance]:
    """Always ask (teardown_with_human): a client without forms gets -32021 and nothing runs."""
    return _question(token, ctx)


def ask_if_possible(token: str, ctx: Context[Any, Any]) -> Elicit[TypedInstance] | None:
    """Ask in a form when the client can show one and a human decision is still open; otherwise None (the body
    then looks for a terminal approval). Any problem with the token is left to the body, which records it."""
    app = app_of(ctx)
    if app.settings.unattended or not client_has_form(ctx):
        return None
    try:
        pending, _plan = td.pending_of(app, token, audit=False)
    except GpuError:
        return None
    if pending.status != "pending":
        return None
    return _question(token, ctx)


def _form(answer: Any) -> FormAnswer | None:
    if isinstance(answer, AcceptedElicitation):
        data = answer.data
        if isinstance(data, TypedInstance):
            return FormAnswer("accept", data.instance_id, data.code)
        return None
    return FormAnswer(answer.action)


def register(server: MCPServer) -> None:
    @server.tool(name="request_teardown", title="Request a teardown (checks the Iron-Law gate; changes nothing)",
                 annotations=REQUESTS)
    @gpu_tool
    async def request_teardown(
        host: Annotated[str, Field(description="registered host name, or 'local'")],
        reason: Annotated[str, Field(description="why the machine should be stopped, for the audit log")],
        ctx: Context[Any, Any],
        action: Annotated[str, Field(description="'auto' = the platform's meter-stop verb; or e.g. destroy, stop, "
                                                 "terminate")] = "auto",
        allow_running: Annotated[bool, Field(description="accept that jobs still running die with the machine "
                                                         "(the phrase then says so)")] = False,
        accept_loss: Annotated[bool, Field(description="ask the HUMAN to accept the losses the gate lists (unverified "
                                                       "results, a job that keeps nothing, an unreachable machine): "
                                                       "the phrase then names every one")] = False,
    ) -> td.TeardownRequest:
        """Re-check the Iron-Law gate with a fresh probe (no job still running; every job's outputs verified by
        verify_artifacts, all_ok and not stale). Refused → the exact list of what is missing and the call that
        fixes each. Passed → what would be lost, what survives, what keeps billing, the danger clocks, and a
        pending request. NOTHING is done. Only a human can approve it: show `summary` to the human and follow
        `next_steps` (confirm_teardown asks them in a form, or they run `mcp-gpu approve <request_id>` in their own
        terminal). You cannot approve it yourself, and must never try."""
        return await td.request_teardown(app_of(ctx), host, action, reason, allow_running=allow_running,
                                         elicitation=client_has_form(ctx), accept_loss=accept_loss)

    @server.tool(name="confirm_teardown", title="Complete a teardown a human approved", annotations=DESTRUCTIVE)
    @gpu_tool
    async def confirm_teardown(
        token: Annotated[str, Field(description="the token from request_teardown")],
        answer: Annotated[ElicitationResult[TypedInstance], Resolve(ask_if_possible)],
        ctx: Context[Any, Any],
        host: Annotated[str | None, Field(description="optional: the host you mean (must match the token)")] = None,
        code: Annotated[str | None, Field(description="authenticator code; only used in unattended mode")] = None,
    ) -> td.TeardownResult:
        """Stop the meter once a HUMAN approved: if your client shows forms, the server asks the human here;
        otherwise the human must have run `mcp-gpu approve <request_id>` (status `awaiting_human` until then).
        Re-checks the gate with a fresh probe, then calls the platform's verb (API and poll until gone; console
        steps when there is no API; scancel / kubectl delete of the jobs mcp-gpu launched; nothing on local).
        Declined, expired, reused or altered token, or a gate that changed → nothing happens."""
        return await td.confirm_teardown(app_of(ctx), token, host=host, code=code, form=_form(answer))

    @server.tool(name="teardown_with_human", title="Teardown, asking the human directly (form elicitation)",
                 annotations=DESTRUCTIVE)
    @gpu_tool
    async def teardown_with_human(
        token: Annotated[str, Field(description="the token from request_teardown")],
        answer: Annotated[ElicitationResult[TypedInstance], Resolve(ask_human)],
        ctx: Context[Any, Any],
    ) -> td.TeardownResult:
        """Ask the human directly (a form in their client) to type the instance id; executes only on an exact
        match. A decline or cancel is final. Needs a client with form elicitation; otherwise the human approves
        in a terminal (`mcp-gpu approve`) and you call confirm_teardown."""
        return await td.confirm_teardown(app_of(ctx), token, form=_form(answer))
