"""Phase 5b: stop the meter, only behind the Iron-Law gate and a human confirmation bound to the exact action.

    request_teardown(app, host, action="auto", reason=..., allow_running=False) -> TeardownRequest
        fresh gate probe; refuses (GateRefused) listing what is missing and the call that fixes each; on a pass
        returns what would happen (from the platform profile), a token bound to action + target + gate snapshot,
        and the phrase the human must type. Changes nothing.
    confirm_teardown(app, token, host=None, code=None, form=None) -> TeardownResult
        completes only when a human approved through a channel the agent cannot write to (human_gate: the form
        answer in `form`, a `mcp-gpu approve` row, or unattended mode); otherwise `awaiting_human` and nothing
        happens. Then re-derives the gate with a fresh probe, checks the token against that snapshot (a changed
        gate → refused), burns the request once, and executes: the provider API (RunPod, vast.ai, Lambda,
        Paperspace), `manual` console steps (AutoDL, the Chinese rentals, bare SSH), scancel / kubectl delete of
        the jobs mcp-gpu launched (Slurm, Kubernetes), or nothing (`local`). Remote files are never deleted.
    decline_teardown(app, token, outcome) -> TeardownResult
        a human declined (elicitation): recorded, and the request is void. A decline is final.

Every request, refusal, confirmation, decline and execution is in the append-only audit log.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcp_gpu.app import App
from mcp_gpu.backends import RunLayout
from mcp_gpu.confirm import Pending
from mcp_gpu.errors import ConfigError, ConfirmationError, GpuError
from mcp_gpu.lifecycle import human_gate
from mcp_gpu.lifecycle.human_gate import FormAnswer
from mcp_gpu.lifecycle.instances import prove_teardown
from mcp_gpu.lifecycle.teardown_gate import (
    Gate,
    GateJob,
    Missing,
    check_identity,
    host_jobs,
    identity_names,
    loss_phrase,
    probe_identity,
    require,
)
from mcp_gpu.lifecycle.teardown_plan import (
    LOSS_SUFFIX,
    Plan,
    credential_env,
    danger_clocks,
    facts_used,
    keeps_billing,
    make_plan,
    resolve_host,
    survival,
)
from mcp_gpu.models import JobState, iso
from mcp_gpu.providers import Lister, Provider, ProviderResult, get_provider
from mcp_gpu.providers.manual import LocalProvider, ManualProvider
from mcp_gpu.store import audit_log
from mcp_gpu.store import jobs as jobstore

TeardownStatus = Literal["done", "manual", "nothing_to_do", "timed_out", "declined", "awaiting_human"]


class TeardownRequest(BaseModel):
    """The gate passed: what a confirmation would do, and the token + phrase that would authorise it."""

    host: str
    action: str = Field(description="the action word (auto resolved to the profile's meter-stop verb)")
    platform: str
    instance_id: str
    target: str = Field(description="platform + instance id, e.g. 'vastai 1234567'")
    platform_verb: str = Field(description="the platform's own word for it (e.g. 关机, terminate)")
    irreversible: bool
    method: str = Field(description="api / cli / console / none: how it is executed")
    reason: str
    lost: list[str]
    survives: list[str]
    keeps_billing: list[str] = Field(description="what keeps billing after this action")
    danger_clocks: list[str]
    facts_verified: str = Field(description="oldest verification month of the profile facts used")
    facts_age_months: int
    credentials_missing: list[str] = Field(default_factory=list, description="env var NAMES confirm will need")
    jobs: list[GateJob]
    running_jobs_sacrificed: list[str] = Field(default_factory=list)
    snapshot: dict[str, Any] = Field(description="the gate snapshot the token is bound to")
    token: str = Field(description="a handle for the second call; it proves nothing about a human")
    request_id: str = Field(description="the pending request a human approves")
    phrase: str = Field(description="what the HUMAN types in `mcp-gpu approve` (never typed by the agent)")
    approve_command: str = Field(description="what the human runs in their own terminal without form elicitation")
    next_steps: list[str] = Field(description="exactly how this request can be completed, for this client")
    losses_accepted: list[Missing] = Field(default_factory=list, description="what the human accepts to lose "
                                                                             "(accept_loss); the phrase names each")
    aliases: list[str] = Field(default_factory=list, description="every host name registered with this instance")
    identity_check: str = Field(default="", description="proven / unproven / not_applicable: does the machine "
                                                        "report this instance id itself?")
    expires_at: str
    totp_required: bool = False
    unattended: bool = Field(default=False, description="MCP_GPU_UNATTENDED is on: no human is asked")
    summary: list[str]
    audit_ids: list[int]


class TeardownResult(BaseModel):
    status: TeardownStatus
    host: str
    action: str
    target: str
    message: str
    provider: ProviderResult | None = None
    steps: list[str] = Field(default_factory=list, description="what a human must still do (status manual)")
    cancelled_jobs: list[str] = Field(default_factory=list)
    confirmed_via: str | None = Field(default=None, description="elicitation / terminal / unattended / cli")
    request_id: str | None = None
    warnings: list[str] = Field(default_factory=list)
    proof: str | None = Field(default=None, description="what the provider's own instance listing says afterwards")
    audit_ids: list[int] = Field(default_factory=list)


def _audit(app: App, event: str, plan: Plan | None, ids: list[int], **detail: Any) -> int:
    aid = audit_log.append(app.store, event, action=plan.action_key if plan else "teardown",
                           target=plan.target_key if plan else detail.pop("target", None), detail=detail)
    ids.append(aid)
    return aid


async def _gate(app: App, plan: Plan, ids: list[int], stage: str) -> Gate:
    try:
        gate = await probe_identity(app, plan.host, allow_running=plan.allow_running, accept_loss=plan.accept_loss,
                                    identity=plan.label, discover_jobs=plan.method != "none")
        check_identity(gate, plan.platform, plan.instance_id, plan.method)
        return require(gate)
    except GpuError as err:
        _audit(app, "teardown_refused", plan, ids, stage=stage, code=err.code, why=err.message,
               missing=err.data.get("missing", []))
        raise


async def request_teardown(app: App, host: str, action: str = "auto", reason: str = "", *,
                           allow_running: bool = False, accept_loss: bool = False, ttl_s: int | None = None,
                           elicitation: bool | None = None) -> TeardownRequest:
    """Check the gate with a fresh probe and describe the teardown; stores a pending request. Changes nothing.
    `elicitation`: whether the client declared form elicitation (None = unknown), to say which channel to use.
    `accept_loss`: the losses only a human may accept (unverified results, a job that keeps nothing, an unreachable
    machine) no longer shut the gate, and the phrase the human approves names every one of them."""
    rec = resolve_host(app.store, host)
    plan = make_plan(rec, action, allow_running=allow_running, accept_loss=accept_loss)
    ids: list[int] = []
    _audit(app, "teardown_requested", plan, ids, reason=reason, allow_running=allow_running)
    gate = await _gate(app, plan, ids, "request")
    snap = gate.snapshot()
    phrase = plan.phrase + loss_phrase(gate)
    lost, kept = survival(plan)
    month, age = facts_used(plan)
    missing_env = [v for v in credential_env(plan) if not os.environ.get(v)]
    totp_on = app.settings.confirm_mode == "totp"
    req = TeardownRequest(
        host=rec.name, action=plan.action, platform=plan.platform, instance_id=plan.instance_id, target=plan.label,
        platform_verb=plan.profile.head.meter_stop.verb, irreversible=_irreversible(plan), method=plan.method,
        reason=reason, lost=lost, survives=kept, keeps_billing=keeps_billing(plan), danger_clocks=danger_clocks(plan),
        facts_verified=month, facts_age_months=age, credentials_missing=missing_env, jobs=gate.jobs,
        running_jobs_sacrificed=gate.running if allow_running else [], snapshot=json.loads(snap), token="",
        request_id="", phrase=phrase, approve_command="", next_steps=[], expires_at="", totp_required=totp_on,
        unattended=app.settings.unattended, summary=[], audit_ids=ids, losses_accepted=gate.accepted,
        aliases=gate.aliases, identity_check=gate.identity_check)
    plan_lines = _summary(plan, req)
    if gate.identity_check == "unproven":
        plan_lines.insert(1, f"INSTANCE IDENTITY UNPROVEN: {gate.identity_detail}.")
    if gate.accepted:  # the gate did NOT verify everything: say so first, then what is lost
        plan_lines[0] = (f"Gate NOT passed on {req.host}: it opens only because the HUMAN accepts the losses "
                         f"below ({len(gate.accepted)}), which the phrase names.")
        plan_lines.insert(1, "The HUMAN accepts losing: " + "; ".join(m.problem for m in gate.accepted) + ".")
    ch = app.confirmer.issue(plan.action_key, plan.target_key, phrase, kind="teardown", expect=plan.instance_id,
                             summary=plan_lines, snapshot=snap, ttl_s=ttl_s)
    ids += [int(r["id"]) for r in app.store.query(
        "SELECT max(id) AS id FROM audit_log WHERE event='confirmation_requested' AND target=?", (plan.target_key,))]
    req.token, req.request_id, req.expires_at = ch.token, ch.request_id, ch.expires_at
    req.approve_command = human_gate.approve_command(ch.request_id)
    req.next_steps = human_gate.next_steps(app, ch.request_id, tool_call=f"confirm_teardown(token=<token of "
                                           f"{ch.request_id}>)", elicitation=elicitation, phrase=phrase)
    extra = " plus a code from their authenticator app" if totp_on else ""
    req.summary = [*human_gate.banner(app), *plan_lines,
                   f"Nothing was done. Request {ch.request_id} (expires {ch.expires_at}) needs a HUMAN{extra}: "
                   + " ".join(req.next_steps if not app.settings.unattended else req.next_steps[1:]),
                   "Remote files are never deleted by mcp-gpu."]
    return req


def _irreversible(plan: Plan) -> bool:
    if plan.method == "none" or plan.is_stop:
        return False
    return plan.action != "stop"


def _summary(plan: Plan, r: TeardownRequest) -> list[str]:
    n = len(r.jobs)
    lines = [f"Gate passed on {r.host}: " + (f"{n} job(s) checked, every one verified (all_ok, not stale)"
                                              if n else "no jobs registered on this host")
             + (f"; RUNNING and sacrificed: {', '.join(r.running_jobs_sacrificed)}" if r.running_jobs_sacrificed
                else "") + "."]
    if plan.method == "none":
        lines.append("Action: none needed — local has no meter; nothing will be stopped or deleted.")
    else:
        how = {"api": "the platform API", "cli": "the scheduler", "console": "a human in the console (manual)"}
        lines.append(f"Action: {r.action} {r.target} ({r.platform_verb}; "
                     f"{'IRREVERSIBLE' if r.irreversible else 'reversible'}) via {how.get(plan.method, plan.method)}.")
        lines.append("Lost: " + ("; ".join(r.lost) or "nothing on the listed storage") + ".")
        lines.append("Survives: " + ("; ".join(r.survives) or "nothing") + ".")
        if r.keeps_billing:
            lines.append("Keeps billing afterwards: " + "; ".join(r.keeps_billing) + ".")
        for c in r.danger_clocks:
            lines.append(f"Danger clock: {c}.")
    lines.append(f"Platform facts verified {r.facts_verified} ({r.facts_age_months} months old).")
    if r.credentials_missing:
        lines.append(f"Confirm will fail: {', '.join(r.credentials_missing)} is not set for the server.")
    return lines


def token_claims(app: App, token: str, ids: list[int], *, audit: bool = True) -> dict[str, Any]:
    """The signed body of a teardown token issued by this process, or ConfirmationError (audited)."""
    try:
        body = app.confirmer.claims(token, audit=audit)
    except ConfirmationError:
        raise ConfirmationError("this is not a valid teardown token (malformed, altered, issued by another server "
                                "process, or for something else)",
                                hint="call request_teardown again for a fresh token; nothing was done") from None
    if not str(body.get("a", "")).startswith("teardown:"):
        if audit:
            _audit(app, "confirmation_refused", None, ids, target=None, reason="not a teardown token")
        raise ConfirmationError("this is not a valid teardown token (malformed, altered, issued by another server "
                                "process, or for something else)",
                                hint="call request_teardown again for a fresh token; nothing was done")
    return body


def _plan_from(app: App, claims: dict[str, Any], host: str | None, ids: list[int]) -> Plan:
    t_host, _, _rest = str(claims.get("t", "")).partition("|")
    if host is not None and host != t_host:
        _audit(app, "confirmation_refused", None, ids, target=str(claims.get("t")), reason=f"token for another host ({host})")
        raise ConfirmationError(f"this token was issued for host {t_host!r}, not {host!r}",
                                hint=f"request a token for {host} with request_teardown(host={host!r}); nothing was done")
    action = str(claims["a"]).removeprefix("teardown:")
    accept_loss = action.endswith(LOSS_SUFFIX)
    action = action.removesuffix(LOSS_SUFFIX)
    allow_running = action.endswith("+running")
    return make_plan(resolve_host(app.store, t_host), action.removesuffix("+running"), allow_running=allow_running,
                     accept_loss=accept_loss)


def _poll_setting(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    try:
        return float(raw) if raw else default
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number", hint=f"unset {name} or give seconds") from None


def _provider(plan: Plan) -> Provider | None:
    """Build the executor BEFORE the token is spent, so a missing API key costs nothing."""
    td = plan.profile.head.teardown
    if plan.method == "api":
        return get_provider(td.provider or plan.platform,
                            poll_interval=_poll_setting("MCP_GPU_TEARDOWN_POLL_S", 5.0),
                            poll_timeout=_poll_setting("MCP_GPU_TEARDOWN_TIMEOUT_S", 600.0))
    if plan.method == "console":
        return ManualProvider(plan.platform, steps=td.console_steps)
    if plan.method == "none":
        return LocalProvider()
    return None


async def confirm_teardown(app: App, token: str, *, host: str | None = None, code: str | None = None,
                           form: FormAnswer | None = None) -> TeardownResult:
    """Execute a teardown a HUMAN approved: human channel → fresh gate → token bound to it → the platform's verb."""
    ids: list[int] = []
    claims = token_claims(app, token, ids)
    plan = _plan_from(app, claims, host, ids)
    pending = app.confirmer.check(token, action=plan.action_key, target=plan.target_key)
    base: dict[str, Any] = {"host": plan.host.name, "action": plan.action, "target": plan.label,
                            "request_id": pending.id, "warnings": human_gate.banner(app)}
    decision = human_gate.decide(app, pending, form=form, code=code)
    if decision.status == "declined":
        _audit(app, "teardown_declined", plan, ids, outcome=decision.outcome, via=decision.via, request_id=pending.id)
        return TeardownResult(status="declined", audit_ids=ids, **base,
                              message=f"The human declined the teardown of {plan.label} ({decision.message}): nothing "
                                      "was done and this request is void. A new request_teardown is needed if the "
                                      "human changes their mind.")
    if decision.status == "awaiting":
        return TeardownResult(status="awaiting_human", audit_ids=ids, message=decision.message,
                              steps=human_gate.next_steps(app, pending.id, tool_call="confirm_teardown(token)",
                                                          elicitation=None), **base)
    try:
        provider = _provider(plan)
    except GpuError as err:
        _audit(app, "teardown_refused", plan, ids, stage="credentials", code=err.code, why=err.message)
        raise
    gate = await _gate(app, plan, ids, "confirm")
    pending = app.confirmer.check(token, action=plan.action_key, target=plan.target_key, snapshot=gate.snapshot())
    app.confirmer.burn(pending, via=decision.via)
    _audit(app, "teardown_confirmed", plan, ids, via=decision.via, request_id=pending.id,
           jobs=[j.job_id for j in gate.jobs])
    try:
        result = await _execute(app, plan, provider, gate)
    except GpuError as err:
        _audit(app, "teardown_failed", plan, ids, code=err.code, why=err.message)
        raise
    pr = result.provider
    _audit(app, "teardown_executed", plan, ids, status=result.status, cancelled_jobs=result.cancelled_jobs,
           final_state=pr.final_state if pr else None, polls=pr.polls if pr else 0,
           http=[c.model_dump() for c in pr.http_calls] if pr else [])
    result.audit_ids = ids
    result.confirmed_via, result.request_id, result.warnings = decision.via, pending.id, human_gate.banner(app)
    return result


async def _execute(app: App, plan: Plan, provider: Provider | None, gate: Gate) -> TeardownResult:
    base: dict[str, Any] = {"host": plan.host.name, "action": plan.action, "target": plan.label}
    if provider is None:
        return await _cancel_scheduler_jobs(app, plan, gate)
    res = await provider.act(plan.action, plan.instance_id)
    if res.status == "done" and plan.allow_running and not plan.is_stop:
        for jid in gate.running:
            jobstore.set_state(app.store, jid, JobState.cancelled, kind="teardown",
                               detail={"why": f"{plan.action} {plan.label} while running"})
    msg = res.message
    if res.status == "manual":
        msg += " Steps: " + " / ".join(res.steps)
    proof = None
    if res.status in ("done", "nothing_to_do") and isinstance(provider, Lister):
        # the listing is the account-wide view: a pod the status call says is gone must also be gone from it
        proof = await prove_teardown(plan.platform, plan.instance_id, plan.action)
        msg += f" Listing check: {proof}."
    return TeardownResult(status=res.status, provider=res, message=msg, steps=res.steps, proof=proof, **base)


async def _cancel_scheduler_jobs(app: App, plan: Plan, gate: Gate) -> TeardownResult:
    """Slurm: scancel the jobs mcp-gpu launched that are still queued/running. Kubernetes: delete the Jobs it
    created. Nothing else on the cluster is touched, and no file is deleted."""
    from mcp_gpu.backends.registry import get_backend

    kind = "slurm" if plan.action == "scancel" else "kubernetes"
    live = set(gate.running)
    recs = [r for r in host_jobs(app, identity_names(app, plan.host))
            if r.backend == kind and (kind == "kubernetes" or r.id in live or not r.state.finished)]
    base: dict[str, Any] = {"host": plan.host.name, "action": plan.action, "target": plan.label}
    steps = [plan.profile.head.teardown.confirm_gone] if plan.profile.head.teardown.confirm_gone else []
    if not recs:
        return TeardownResult(status="nothing_to_do", steps=steps, **base,
                              message=f"no {kind} job launched by mcp-gpu is left on {plan.host.name}: nothing to "
                                      f"{plan.action}. The cluster itself is not ours to stop.")
    t = await app.transport(plan.host.name)
    backend = get_backend(kind)
    done: list[str] = []
    for r in recs:
        await backend.cancel(t, r.handle, RunLayout(r.run_dir))
        jobstore.append_event(app.store, r.id, "teardown", detail={"action": plan.action, "at": iso()})
        if not r.state.finished:
            jobstore.set_state(app.store, r.id, JobState.cancelled, kind="teardown", detail={"action": plan.action})
        done.append(r.id)
    verb = "scancel" if kind == "slurm" else "kubectl delete job"
    return TeardownResult(status="done", cancelled_jobs=done, steps=steps, **base,
                          message=f"{verb} sent for {len(done)} job(s) mcp-gpu launched on {plan.host.name}: "
                                  f"{', '.join(done)}. Run directories and outputs are kept.")


def pending_of(app: App, token: str, *, audit: bool = True) -> tuple[Pending, Plan]:
    """The stored request a teardown token stands for (signature, binding and expiry checked)."""
    ids: list[int] = []
    claims = token_claims(app, token, ids, audit=audit)
    plan = _plan_from(app, claims, None, ids)
    return app.confirmer.check(token, action=plan.action_key, target=plan.target_key, audit=audit), plan


def form_question(pending: Pending, plan: Plan, *, totp_on: bool) -> str:
    """The form the client shows the human: built from the stored request, never from the agent's words."""
    code = " Then enter the current code from your authenticator app." if totp_on else ""
    return (f"An AI agent asks to: {pending.phrase}. " + " ".join(pending.summary) +
            f" This stops the meter and may delete the machine and its local disks. To approve, type the instance "
            f"id of {plan.label} ({pending.expect}).{code} Decline to refuse: a decline is final.")
