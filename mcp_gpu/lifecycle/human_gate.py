"""Who may complete a destructive act: a human, through a channel the agent cannot write to.

Every destructive tool (confirm_teardown / teardown_with_human, job_cancel) works in two calls. The first acts on
nothing and stores a pending request (mcp_gpu/confirm.py). The second call completes it only when `decide()` finds
one of these:

  elicitation  the client declared form elicitation: the tool itself asked the human in a form (the plan, then
               "type the instance id / job name"); the answer comes from the client application, not the model.
  terminal     the human ran `mcp-gpu approve <request-id>` and typed the phrase on a real terminal (/dev/tty);
               the approval is a row in the registry, which the agent's tools cannot write.
  unattended   MCP_GPU_UNATTENDED=i-accept-that-an-agent-can-destroy-machines (CI): no human; said in every answer.

An echoed phrase, a token, or any argument the agent passes is never one of them. With MCP_GPU_CONFIRM=totp an
authenticator code is needed on top, whatever the channel (form field, terminal prompt, or the `code` argument in
unattended mode). A broken audit chain refuses everything (fail closed).

The approval in the terminal is recorded, and the AGENT'S NEXT CALL executes it (in the server, with the server's
credentials and a fresh gate probe): the approve command itself never stops a machine or signals a job.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mcp_gpu import totp
from mcp_gpu.app import App
from mcp_gpu.confirm import Pending, normalise
from mcp_gpu.errors import ConfirmationError, GateRefused
from mcp_gpu.models import iso
from mcp_gpu.store import audit_log

UNATTENDED_BANNER = ("UNATTENDED MODE IS ON (MCP_GPU_UNATTENDED): the agent can complete this destructive act on "
                     "its own, without any human. Unset MCP_GPU_UNATTENDED to require a human again.")


@dataclass(frozen=True)
class FormAnswer:
    """What the human did with the form: accept (with what they typed), decline or cancel."""

    action: Literal["accept", "decline", "cancel"]
    typed: str = ""
    code: str = ""


@dataclass(frozen=True)
class Decision:
    status: Literal["approved", "declined", "awaiting"]
    via: str = ""
    message: str = ""
    outcome: str = ""


def approve_command(request_id: str) -> str:
    return f"mcp-gpu approve {request_id}"


def banner(app: App) -> list[str]:
    return [UNATTENDED_BANNER] if app.settings.unattended else []


def require_intact_audit(app: App) -> None:
    """Fail closed: no destructive act while the audit log's hash chain is broken."""
    rep = audit_log.verify(app.store)
    if not rep.ok:
        raise GateRefused(rep.text() + ". Destructive acts are refused until a human looks at it.",
                          hint="the human runs `mcp-gpu audit-log` to see the damage, then "
                               "`mcp-gpu audit-log --accept-break` in a terminal to record it and restart the chain",
                          data={"audit_chain": rep.problems})


def next_steps(app: App, request_id: str, *, tool_call: str, elicitation: bool | None,
               phrase: str | None = None) -> list[str]:
    """What the agent tells the human, and what it calls next, for the channel this session has."""
    if app.settings.unattended:
        return [UNATTENDED_BANNER, f"Call {tool_call} to complete it."]
    form = (f"Call {tool_call}: the server asks the human directly in a form (they type the name shown there); "
            "a decline there is final.")
    said = f"`{phrase}`" if phrase else "the phrase it shows"
    term = (f"Ask the human to run `{approve_command(request_id)}` in THEIR OWN terminal (it reads only from a real "
            f"terminal) and type {said}; then call {tool_call} to complete it. Never run it yourself.")
    if elicitation is True:
        return [form, "If the form does not appear: " + term]
    if elicitation is False:
        return [term]
    return [form, "Without form elicitation: " + term]


def _check_totp(app: App, pending: Pending, code: str | None, via: str) -> None:
    if app.settings.confirm_mode != "totp":
        return
    try:
        totp.verify(app.settings.home, code, store=app.store)
    except ConfirmationError as err:
        app.confirmer.refuse(pending.action, pending.target, f"totp: {err.message}", via=via,
                             request_id=pending.id)
        raise


def decide(app: App, pending: Pending, *, form: FormAnswer | None, code: str | None) -> Decision:
    """Has a human approved `pending`? Raises on a wrong answer (nothing is burned, a typo can be retyped)."""
    require_intact_audit(app)
    if pending.status == "declined":
        return Decision("declined", pending.decided_via or "", "the human declined this request earlier: final",
                        "decline")
    if form is not None and form.action != "accept":
        app.confirmer.decline(pending, via="elicitation", outcome=form.action)
        return Decision("declined", "elicitation", f"the human chose {form.action} in the form: final", form.action)
    if form is not None:
        if form.typed.strip() != pending.expect:
            app.confirmer.refuse(pending.action, pending.target, "typed name does not match", via="elicitation",
                                 request_id=pending.id)
            raise ConfirmationError(f"what the human typed does not match {pending.expect!r}: nothing was done",
                                    hint="the request stays valid until it expires; the human must type the exact "
                                         "name shown in the form")
        _check_totp(app, pending, form.code or None, "elicitation")
        return Decision("approved", "elicitation")
    if pending.status == "approved":
        if app.settings.confirm_mode == "totp" and not pending.totp_ok:
            raise ConfirmationError("MCP_GPU_CONFIRM=totp but this approval carried no authenticator code",
                                    hint=f"the human runs `{approve_command(pending.id)}` again with the code")
        return Decision("approved", pending.decided_via or "terminal")
    if app.settings.unattended:
        _check_totp(app, pending, code, "unattended")
        return Decision("approved", "unattended")
    return Decision("awaiting", "", f"No human has approved request {pending.id} yet: nothing was done. "
                                    f"The human runs `{approve_command(pending.id)}` in their own terminal, or "
                                    "answers the form if the client shows one; then call again with the same token.")


# --- the terminal side (`mcp-gpu approve`) ------------------------------------------------------------------------


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return None


def ancestors(pid: int | None = None) -> list[int]:
    out: list[int] = []
    cur: int | None = pid if pid is not None else os.getpid()
    while cur and cur > 1 and len(out) < 256:
        cur = _parent_of(cur)
        if cur:
            out.append(cur)
    return out


def client_chain(parent: int) -> list[int]:
    """The MCP client that started this stdio server, and its ancestors inside the same terminal session up to
    (not including) the session leader: e.g. [npx wrapper, claude] but not the human's login shell, the tmux
    server or the desktop session, which a human's other terminal shares."""
    chain = [parent]
    try:
        sid = os.getsid(parent)
    except OSError:
        return chain
    cur = _parent_of(parent)
    while cur and cur > 1 and len(chain) < 16:
        try:
            if os.getsid(cur) != sid or cur == sid:
                break
        except OSError:
            break
        chain.append(cur)
        cur = _parent_of(cur)
    return chain


def started_by_requester(pending: Pending) -> str | None:
    """Is this process inside the agent's own process tree (a descendant of the MCP client that started the server
    over stdio, or of the server)? An agent's shell tool runs there; a human's separate terminal does not."""
    mine = set(ancestors())
    pids = [pending.requester.get("server_pid"), *pending.requester.get("client_chain", [])]
    for pid in pids:
        if isinstance(pid, int) and pid > 1 and pid in mine:
            return f"pid {pid}"
    return None


def record_terminal_approval(app: App, pending: Pending, typed: str, code: str | None) -> None:
    """The human typed the phrase on a terminal: record the approval (the agent's next call executes it)."""
    require_intact_audit(app)
    if pending.status != "pending" or pending.expired:
        raise ConfirmationError(f"request {pending.id} is {'expired' if pending.expired else pending.status}: "
                                "it cannot be approved", hint="the agent must make a new request")
    if normalise(typed) != normalise(pending.phrase):
        app.confirmer.refuse(pending.action, pending.target, "phrase mismatch", via="terminal", request_id=pending.id)
        raise ConfirmationError("the phrase does not match: nothing was approved",
                                hint=f"run `{approve_command(pending.id)}` again and type it exactly")
    totp_ok = False
    if app.settings.confirm_mode == "totp":
        _check_totp(app, pending, code, "terminal")
        totp_ok = True
    with app.store.atomic() as conn:
        cur = conn.execute("UPDATE approvals SET status='approved', decided_at=?, decided_via='terminal', totp_ok=? "
                           "WHERE id=? AND status='pending'", (iso(), int(totp_ok), pending.id))
        if cur.rowcount != 1:
            raise ConfirmationError(f"request {pending.id} changed while you typed", hint="look at it again")
        audit_log.append(app.store, "confirmation_approved", action=pending.action, target=pending.target,
                         detail={"request_id": pending.id, "via": "terminal", "totp": totp_ok})


def record_terminal_decline(app: App, pending: Pending) -> bool:
    return app.confirmer.decline(pending, via="terminal", outcome="decline")
