"""`job_cancel`: a destructive tool in two calls; only a human channel completes it (mcp_gpu/lifecycle/human_gate.py).

The first call never acts: it stores a pending request. The second call (with the token) asks the human in a form
when the client declared form elicitation (they type the job's name; decline is final); otherwise it acts only
after the human ran `mcp-gpu approve <request-id>` in a terminal, or in the explicit unattended mode.

No `from __future__ import annotations` here: the SDK reads the resolver's annotations at registration.
"""

from typing import Annotated, Any

from mcp.server.mcpserver import AcceptedElicitation, Context, Elicit, ElicitationResult, MCPServer, Resolve
from pydantic import BaseModel, Field

from mcp_gpu.errors import GpuError
from mcp_gpu.lifecycle.human_gate import FormAnswer
from mcp_gpu.lifecycle.jobs import CancelResult, job_cancel
from mcp_gpu.store import jobs as jobstore
from mcp_gpu.tools._base import DESTRUCTIVE, app_of, gpu_tool
from mcp_gpu.tools._human import client_has_form


class TypedJob(BaseModel):
    """What the human types into the form (primitive fields only)."""

    job_name: str = Field(description="type the job's name to confirm cancelling it")
    code: str = Field(default="", description="authenticator code (only when the server asks for one)")


def ask_if_possible(job_id: str, token: str | None, ctx: Context[Any, Any]) -> Elicit[TypedJob] | None:
    """A form only on the second call, for a request still open, when the client can show one."""
    app = app_of(ctx)
    if not token or app.settings.unattended or not client_has_form(ctx):
        return None
    try:
        rec = jobstore.resolve(app.store, job_id)
        pending = app.confirmer.check(token, action="cancel", target=rec.id, audit=False)
    except GpuError:
        return None  # the body checks again and records why
    if pending.status != "pending":
        return None
    code = " Then enter the current code from your authenticator app." if app.settings.confirm_mode == "totp" else ""
    return Elicit(f"An AI agent asks to: {pending.phrase}. " + " ".join(pending.summary) +
                  f" To approve, type the job's name ({pending.expect}).{code} Decline to refuse: a decline is final.",
                  TypedJob)


def register(server: MCPServer) -> None:
    @server.tool(name="job_cancel", title="Cancel a job (a human must approve)", annotations=DESTRUCTIVE)
    @gpu_tool
    async def job_cancel_tool(
        job_id: Annotated[str, Field(description="job id (or its name)")],
        answer: Annotated[ElicitationResult[TypedJob], Resolve(ask_if_possible)],
        ctx: Context[Any, Any],
        token: Annotated[str | None, Field(description="the token from the first call")] = None,
        code: Annotated[str | None, Field(description="authenticator code; only used in unattended mode")] = None,
    ) -> CancelResult:
        """Stop a running job and its whole process tree (SIGTERM, a grace window, then SIGKILL). The first call
        changes nothing: it returns a token and `next_steps`. Call again with the token: if your client shows
        forms the server asks the human there; otherwise the human must first run `mcp-gpu approve <request_id>`
        in their own terminal (until then: awaiting_human, nothing happens). You cannot approve it yourself."""
        form: FormAnswer | None = None
        if isinstance(answer, AcceptedElicitation):
            if isinstance(answer.data, TypedJob):
                form = FormAnswer("accept", answer.data.job_name, answer.data.code)
        else:
            form = FormAnswer(answer.action)
        return await job_cancel(app_of(ctx), job_id, token=token, code=code, form=form,
                                elicitation=client_has_form(ctx))
