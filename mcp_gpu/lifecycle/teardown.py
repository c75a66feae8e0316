"""Phase 5b: stop the meter, only behind the Iron-Law gate and a human confirmation bound to the exact action.

    request_teardown(app, host, action="auto", reason=..., allow_running=False) -> TeardownRequest
        fresh gate probe; refuses (GateRefused) listing what is missing and the call that fixes each; on a pass
        returns what would happen (from the platform profile), a token bound to action + target + gate snapshot,
        and the phrase the human must type. Changes nothing.
    confirm_teardown(app, token, confirmation, host=None, code=None) -> TeardownResult
        re-derives the gate with a fresh probe, redeems the token against that snapshot (a changed gate → refused),
        then executes: the provider API (RunPod, vast.ai, Lambda, Paperspace), `manual` console steps (AutoDL, the
        Chinese rentals, bare SSH), scancel / kubectl delete of the jobs mcp-gpu launched (Slurm, Kubernetes),
        or nothing (`local`). Remote files are never deleted.
    decline_teardown(app, token, reason) -> TeardownResult
        a human declined (elicitation): recorded, and the token is burned. A decline is final.

Every request, refusal, confirmation, decline and execution is in the append-only audit log.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcp_gpu import totp
from mcp_gpu.app import App
from mcp_gpu.backends import RunLayout
from mcp_gpu.confirm import load_secret
from mcp_gpu.errors import ConfigError, ConfirmationError, GateRefused, GpuError
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
from mcp_gpu.providers import Provider, ProviderResult, get_provider
from mcp_gpu.providers.manual import LocalProvider, ManualProvider
from mcp_gpu.store import audit_log
from mcp_gpu.store import jobs as jobstore

TeardownStatus = Literal["done", "manual", "nothing_to_do", "timed_out", "declined"]


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
    losses_accepted: list[Missing] = Field(default_factory=list, description="what the human accepts to lose "
                                                                             "(accept_loss); the phrase names each")
    aliases: list[str] = Field(default_factory=list, description="every host name registered with this instance")
    identity_check: str = Field(default="", description="proven / unproven / not_applicable: does the machine "
                                                        "report this instance id itself?")
    token: str
    phrase: str = Field(description="what the HUMAN must type, exactly")
    expires_at: str
    totp_required: bool = False
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
                           allow_running: bool = False, accept_loss: bool = False,
                           ttl_s: int | None = None) -> TeardownRequest:
    """Check the gate with a fresh probe and describe the teardown; returns a token + phrase. Changes nothing.
    `accept_loss`: the losses only a human may accept (unverified results, a job that keeps nothing, an unreachable
    machine) no longer shut the gate, and the phrase names every one of them."""
    rec = resolve_host(app.store, host)
    plan = make_plan(rec, action, allow_running=allow_running, accept_loss=accept_loss)
    ids: list[int] = []
    _audit(app, "teardown_requested", plan, ids, reason=reason, allow_running=allow_running)
    gate = await _gate(app, plan, ids, "request")
    snap = gate.snapshot()
    ch = app.confirmer.issue(plan.action_key, plan.target_key, plan.phrase + loss_phrase(gate), snapshot=snap,
                             ttl_s=ttl_s)
    ids += [int(r["id"]) for r in app.store.query(
        "SELECT max(id) AS id FROM audit_log WHERE event='confirmation_requested' AND target=?", (plan.target_key,))]
    lost, kept = survival(plan)
    month, age = facts_used(plan)
    missing_env = [v for v in credential_env(plan) if not os.environ.get(v)]
    totp_on = app.settings.confirm_mode == "totp"
    req = TeardownRequest(
        host=rec.name, action=plan.action, platform=plan.platform, instance_id=plan.instance_id, target=plan.label,
        platform_verb=plan.profile.head.meter_stop.verb, irreversible=_irreversible(plan), method=plan.method,
        reason=reason, lost=lost, survives=kept, keeps_billing=keeps_billing(plan), danger_clocks=danger_clocks(plan),
        facts_verified=month, facts_age_months=age, credentials_missing=missing_env, jobs=gate.jobs,
        running_jobs_sacrificed=gate.running if allow_running else [], snapshot=json.loads(snap), token=ch.token,
        phrase=ch.phrase, expires_at=ch.expires_at, totp_required=totp_on, summary=[], audit_ids=ids,
        losses_accepted=gate.accepted, aliases=gate.aliases, identity_check=gate.identity_check)
    req.summary = _summary(plan, req)
    if gate.identity_check == "unproven":
        req.summary.insert(1, f"INSTANCE IDENTITY UNPROVEN: {gate.identity_detail}.")
    if gate.accepted:  # the gate did NOT verify everything: say so first, then what is lost
        req.summary[0] = (f"Gate NOT passed on {req.host}: it opens only because the HUMAN accepts the losses "
                          f"below ({len(gate.accepted)}), which the phrase names.")
        req.summary.insert(1, "The HUMAN accepts losing: " + "; ".join(m.problem for m in gate.accepted) + ".")
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
    extra = " plus the current code from their authenticator app" if r.totp_required else ""
    lines.append(f"To proceed the HUMAN types: '{r.phrase}'{extra} (token expires {r.expires_at}). "
                 "Remote files are never deleted by mcp-gpu.")
    return lines


def token_claims(app: App, token: str, ids: list[int]) -> dict[str, Any]:
    """The signed body of a teardown token (signature checked), or ConfirmationError (audited)."""
    try:
        b64, mac = token.strip().split(".", 1)
        payload = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4))
        body = json.loads(payload)
        good = hmac.compare_digest(hmac.new(load_secret(app.settings.home), payload, hashlib.sha256).hexdigest(), mac)
    except (ValueError, json.JSONDecodeError):
        body, good = {}, False
    if not good or not isinstance(body, dict) or not str(body.get("a", "")).startswith("teardown:"):
        _audit(app, "confirmation_refused", None, ids, target=None, reason="malformed, altered or not a teardown token")
        raise ConfirmationError("this is not a valid teardown token (malformed, altered, or issued for something else)",
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


async def confirm_teardown(app: App, token: str, confirmation: str, *, host: str | None = None,
                           code: str | None = None, via: str = "phrase") -> TeardownResult:
    """Execute a teardown the human confirmed: fresh gate → token bound to it → the platform's verb."""
    ids: list[int] = []
    claims = token_claims(app, token, ids)
    plan = _plan_from(app, claims, host, ids)
    try:
        provider = _provider(plan)
    except GpuError as err:
        _audit(app, "teardown_refused", plan, ids, stage="credentials", code=err.code, why=err.message)
        raise
    gate = await _gate(app, plan, ids, "confirm")
    if app.settings.confirm_mode == "totp":
        try:
            totp.verify(app.settings.home, code)
        except ConfirmationError as err:
            _audit(app, "confirmation_refused", plan, ids, reason=f"totp: {err.message}")
            raise
    app.confirmer.redeem(token, confirmation, action=plan.action_key, target=plan.target_key, snapshot=gate.snapshot())
    _audit(app, "teardown_confirmed", plan, ids, via=via, jobs=[j.job_id for j in gate.jobs])
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
    return TeardownResult(status=res.status, provider=res, message=msg, steps=res.steps, **base)


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


def decline_teardown(app: App, token: str, *, outcome: str = "decline", via: str = "elicitation") -> TeardownResult:
    """The human said no: record it and burn the token so no later call can use it. Final."""
    ids: list[int] = []
    claims = token_claims(app, token, ids)
    plan = _plan_from(app, claims, None, ids)
    app.store.execute("UPDATE tokens SET used_at=? WHERE nonce=? AND used_at IS NULL", (iso(), str(claims.get("n"))))
    _audit(app, "teardown_declined", plan, ids, outcome=outcome, via=via)
    return TeardownResult(status="declined", host=plan.host.name, action=plan.action, target=plan.label, audit_ids=ids,
                          message=f"The human {outcome}d the teardown of {plan.label}: nothing was done and this token "
                                  "is now void. A new request_teardown is needed if the human changes their mind.")


def expected_instance(app: App, token: str) -> tuple[str, str, str]:
    """(instance id, target label, phrase) a token is for, signature checked; for the elicitation question."""
    ids: list[int] = []
    claims = token_claims(app, token, ids)
    plan = _plan_from(app, claims, None, ids)
    return plan.instance_id, plan.label, str(claims.get("p") or plan.phrase)  # the phrase the token carries


def refuse_typed(app: App, token: str, typed: str) -> GateRefused | ConfirmationError:
    ids: list[int] = []
    claims = token_claims(app, token, ids)
    plan = _plan_from(app, claims, None, ids)
    _audit(app, "confirmation_refused", plan, ids, reason="typed instance id does not match", via="elicitation")
    return ConfirmationError(f"the instance id the human typed does not match {plan.label}: nothing was done",
                             hint="the token stays valid until it expires; the human must type the exact instance id")
