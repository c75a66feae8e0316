"""`request_teardown`, `confirm_teardown` and `teardown_with_human`: phase 5b behind the gate and a human.

`confirm_teardown(token, confirmation)` works with every client: the human types the phrase, the agent echoes it.
`teardown_with_human(token)` asks the human DIRECTLY through form elicitation (the declarative `Resolve` form,
which works in both protocol eras): they type the instance id; a decline or cancel is final and burns the token.
A client without form elicitation gets MCPError -32021 before the tool body runs (nothing happens): use
`confirm_teardown` there.

No `from __future__ import annotations` here: the SDK reads the resolver's annotations at registration.
"""

from typing import Annotated, Any

from mcp.server.mcpserver import AcceptedElicitation, Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from mcp_gpu.errors import GpuError
from mcp_gpu.lifecycle import teardown as td
from mcp_gpu.tools._base import DESTRUCTIVE, app_of, error_text, gpu_tool

REQUESTS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)


class TypedInstance(BaseModel):
    """What the human types into the form (primitive fields only)."""

    instance_id: str = Field(description="type the instance id of the machine to confirm")
    code: str = Field(default="", description="authenticator code (only when the server asks for one)")


def ask_human(token: str, ctx: Context[Any, Any]) -> Elicit[TypedInstance]:
    """The question the client shows the human; built from the signed token, never from the agent's words."""
    try:
        iid, label, phrase = td.expected_instance(app_of(ctx), token)
    except GpuError as err:
        raise ToolError(error_text(err)) from err
    return Elicit(f"An AI agent asks to: {phrase}. This stops the meter and may delete the machine and its local "
                  f"disks. To approve, type the instance id of {label} ({iid}). Decline to refuse: a decline is final.",
                  TypedInstance)


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
        token + phrase. Show `summary` and the phrase to the HUMAN; then either teardown_with_human(token) or
        confirm_teardown(token, confirmation=<what THEY typed>). Never type the phrase yourself."""
        return await td.request_teardown(app_of(ctx), host, action, reason, allow_running=allow_running,
                                         accept_loss=accept_loss)

    @server.tool(name="confirm_teardown", title="Confirm a teardown with the human's phrase", annotations=DESTRUCTIVE)
    @gpu_tool
    async def confirm_teardown(
        token: Annotated[str, Field(description="the token from request_teardown")],
        confirmation: Annotated[str, Field(description="the phrase exactly as the HUMAN typed it")],
        ctx: Context[Any, Any],
        host: Annotated[str | None, Field(description="optional: the host you mean (must match the token)")] = None,
        code: Annotated[str | None, Field(description="authenticator code, only when the server requires one")] = None,
    ) -> td.TeardownResult:
        """Stop the meter: re-checks the gate with a fresh probe, then calls the platform's verb (API and poll until
        gone; console steps when there is no API; scancel / kubectl delete of the jobs mcp-gpu launched; nothing on
        local). Wrong phrase, expired, reused or altered token, or a gate that changed → nothing happens."""
        return await td.confirm_teardown(app_of(ctx), token, confirmation, host=host, code=code)

    @server.tool(name="teardown_with_human", title="Teardown, asking the human directly (form elicitation)",
                 annotations=DESTRUCTIVE)
    @gpu_tool
    async def teardown_with_human(
        token: Annotated[str, Field(description="the token from request_teardown")],
        answer: Annotated[ElicitationResult[TypedInstance], Resolve(ask_human)],
        ctx: Context[Any, Any],
    ) -> td.TeardownResult:
        """Ask the human directly (a form in their client) to type the instance id; executes only on an exact
        match. A decline or cancel is final: the token is burned. Needs a client with form elicitation; otherwise
        use confirm_teardown."""
        app = app_of(ctx)
        if not isinstance(answer, AcceptedElicitation):
            return td.decline_teardown(app, token, outcome=answer.action)
        iid, _label, phrase = td.expected_instance(app, token)
        if answer.data.instance_id.strip() != iid:
            raise td.refuse_typed(app, token, answer.data.instance_id)
        return await td.confirm_teardown(app, token, phrase, code=answer.data.code or None, via="elicitation")
