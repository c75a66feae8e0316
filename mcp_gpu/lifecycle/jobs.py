"""Companions of launch: list jobs (refreshed live), tail a job's log, and cancel a job behind a confirmation.

`refresh_job` moves a registry state from what the host shows, through the one observation path
(`backends.observe`: one probe, one parser, one `verdict`): a job runs while its process group lives, whatever
files say; then the `cancelled` record, the wrapper's exit code or the scheduler decide. A host that cannot be
reached changes nothing (`unreachable` is an observation, never a verdict). Log text is remote data: it is
cleaned of control and escape sequences before it is returned.
"""

from __future__ import annotations

from typing import Any

import anyio
from pydantic import BaseModel, Field

from mcp_gpu import log, untrusted
from mcp_gpu.app import App
from mcp_gpu.backends import Observation, RunLayout
from mcp_gpu.backends import observe as obs_path
from mcp_gpu.backends.registry import get_backend, scheduler_verdict
from mcp_gpu.errors import ConfigError, GpuError, TransportError
from mcp_gpu.lifecycle import cancel_gate
from mcp_gpu.lifecycle.human_gate import FormAnswer
from mcp_gpu.models import JobRecord, JobState
from mcp_gpu.store import audit_log
from mcp_gpu.store import jobs as jobstore
from mcp_gpu.transport import Transport

MAX_LOG_LINES = 2000
MAX_LOG_BYTES = 512 * 1024


class JobView(BaseModel):
    """One job as job_list shows it."""

    job_id: str
    name: str
    host: str
    backend: str
    state: JobState
    attempt: int
    created_at: str
    finished_at: str | None = None
    exit_code: int | None = None
    exit_signal: str | None = None
    run_dir: str
    unreachable: bool = Field(default=False, description="the host did not answer: the state shown is the last known")


class JobList(BaseModel):
    jobs: list[JobView]
    count: int


class JobLogs(BaseModel):
    job_id: str
    name: str
    host: str
    state: JobState
    log: str
    lines: list[str]
    truncated: bool = Field(description="the log has more before these lines")


class CancelResult(BaseModel):
    job_id: str
    name: str
    host: str
    state: JobState
    cancelled: bool
    confirmation_required: bool = False
    token: str | None = Field(default=None, description="a handle for the second call; it proves nothing about a human")
    request_id: str | None = Field(default=None, description="the pending request a human approves")
    phrase: str | None = Field(default=None, description="what the HUMAN types in `mcp-gpu approve` (not the agent)")
    approve_command: str | None = None
    next_steps: list[str] = Field(default_factory=list)
    expires_at: str | None = None
    awaiting_human: bool = Field(default=False, description="no human has approved yet: nothing was done")
    declined: bool = Field(default=False, description="the human declined: final")
    confirmed_via: str | None = None
    unattended: bool = Field(default=False, description="MCP_GPU_UNATTENDED is on: no human is asked")
    how: str | None = Field(default=None, description="TERM (ended within the grace window) or KILL")
    message: str


def view(rec: JobRecord, *, unreachable: bool = False) -> JobView:
    return JobView(job_id=rec.id, name=rec.name, host=rec.host, backend=rec.backend, state=rec.state,
                   attempt=rec.attempt, created_at=rec.created_at, finished_at=rec.finished_at,
                   exit_code=rec.exit_code, exit_signal=rec.exit_signal, run_dir=rec.run_dir, unreachable=unreachable)


def state_from(obs: Observation, backend: str | None = None) -> JobState | None:
    """The state an observation proves, or None when it proves nothing new (alive, or cannot tell).
    An observation made by the observation path carries `observe.verdict`'s state, which decides; otherwise
    (a scheduler's bare answer) its state table decides (a preempted or failed node leaves no exit file)."""
    if obs.state is not None:
        return obs.state if obs.state.finished else None
    if obs.alive is None or obs.alive:
        return None
    if obs.cancelled:
        return JobState.cancelled
    if backend is not None:
        verdict = scheduler_verdict(backend, obs)
        if verdict is not None and verdict.finished:
            return verdict
    if obs.exit_code is None:
        return JobState.lost
    return JobState.succeeded if obs.exit_code == 0 else JobState.failed


async def observe(app: App, rec: JobRecord, t: Transport | None = None) -> Observation:
    """One job through the one observation path."""
    if not rec.run_dir and rec.backend != "kubernetes":
        return Observation(alive=False, detail="the job never got a run directory")
    t = t or await app.transport(rec.host)
    host = await obs_path.observe_host(t, [obs_path.target_of(rec)], timeout=app.settings.command_timeout)
    jo = host.jobs[rec.id]
    return obs_path.to_observation(jo, obs_path.verdict(jo))


async def refresh_job(app: App, rec: JobRecord, t: Transport | None = None) -> tuple[JobRecord, Observation | None]:
    """Bring a non-finished job's registry state up to what the host shows. Returns (record, observation);
    the observation is None when the host could not be reached."""
    if rec.state.finished:
        return rec, None
    try:
        obs = await observe(app, rec, t)
    except TransportError:
        return rec, None
    new = state_from(obs, rec.backend)
    if new is None:
        if obs.alive and rec.state is JobState.launching:
            rec = jobstore.set_state(app.store, rec.id, JobState.running, kind="observed", detail={"detail": obs.detail})
        return rec, obs
    rec = jobstore.set_state(app.store, rec.id, new, kind="observed", exit_code=obs.exit_code,
                             exit_signal=obs.exit_signal, detail={"detail": obs.detail, "cancelled": obs.cancelled})
    return rec, obs


async def job_list(app: App, host: str | None = None, state: str | None = None, *, refresh: bool = True,
                   limit: int = 200) -> JobList:
    """Jobs newest first; launching/running ones are re-observed on their hosts concurrently first."""
    if state is not None:
        try:
            JobState(state)
        except ValueError:
            raise ConfigError(f"unknown job state {state!r}",
                              hint=f"use one of: {', '.join(s.value for s in JobState)}") from None
    unreachable: set[str] = set()
    if refresh:
        active = jobstore.list_jobs(app.store, host=host, active=True, limit=limit)

        async def one(r: JobRecord) -> None:
            try:
                with anyio.fail_after(app.settings.command_timeout):
                    _, obs = await refresh_job(app, r)
            except (GpuError, TimeoutError):
                obs = None
            if obs is None:
                unreachable.add(r.id)

        async with anyio.create_task_group() as tg:
            for r in active:
                tg.start_soon(one, r)
    recs = jobstore.list_jobs(app.store, host=host, state=state, limit=limit)
    views = [view(r, unreachable=r.id in unreachable) for r in recs]
    return JobList(jobs=views, count=len(views))


def clean_lines(data: bytes) -> list[str]:
    """Remote log bytes → display lines: the last redraw of each `\r` line (tqdm), secrets scrubbed, escape
    and control sequences stripped (an OSC 52 in a log must never reach a terminal or the agent)."""
    text = data.decode("utf-8", "replace")
    return [untrusted.clean_line(log.scrub(line.rstrip("\r").rsplit("\r", 1)[-1]), None)
            for line in text.split("\n")]


async def job_logs(app: App, job_id: str, lines: int = 100) -> JobLogs:
    """The last `lines` lines of the job's out.log (at most 2000 lines / 512 KiB), secrets scrubbed."""
    rec = jobstore.resolve(app.store, job_id)
    n = max(1, min(int(lines), MAX_LOG_LINES))
    layout = RunLayout(rec.run_dir)
    if not rec.run_dir:
        return JobLogs(job_id=rec.id, name=rec.name, host=rec.host, state=rec.state, log="", lines=[], truncated=False)
    t = await app.transport(rec.host)
    budget = min(MAX_LOG_BYTES, max(4096, n * 400))
    data = await t.read_tail(layout.log, budget)
    out = clean_lines(data)
    if out and out[-1] == "":
        out.pop()
    truncated = len(data) >= budget
    if truncated and out:
        out = out[1:]  # the first line is probably cut
    if len(out) > n:
        out, truncated = out[-n:], True
    return JobLogs(job_id=rec.id, name=rec.name, host=rec.host, state=rec.state, log=layout.log, lines=out,
                   truncated=truncated)


def cancel_phrase(rec: JobRecord) -> str:
    return f"cancel {rec.name} on {rec.host}"


async def job_cancel(app: App, job_id: str, token: str | None = None, *, code: str | None = None,
                     form: FormAnswer | None = None, elicitation: bool | None = None,
                     ttl_s: int | None = None) -> CancelResult:
    """First call: changes nothing, stores a pending request and returns a token for it. Second call with the token:
    acts only when a human approved (human_gate: form answer, `mcp-gpu approve`, or unattended mode): TERM to the
    job's whole process group, a grace window, then KILL. `mcp-gpu cancel` records a terminal approval first."""
    rec = jobstore.resolve(app.store, job_id)
    base: dict[str, Any] = {"job_id": rec.id, "name": rec.name, "host": rec.host,
                            "unattended": app.settings.unattended}
    if token:  # the human gate decides first: a wrong, expired, replayed or foreign token fails loudly
        verdict = cancel_gate.approved(app, rec, base, token, code=code, form=form, elicitation=elicitation)
        if isinstance(verdict, CancelResult):
            return verdict  # awaiting the human, or declined: nothing was done
        base["confirmed_via"] = verdict
    rec, _ = await refresh_job(app, rec)
    if rec.state.finished:
        return CancelResult(**base, state=rec.state, cancelled=False,
                            message=f"nothing to cancel: the job is already {rec.state.value}")
    if not token:
        return cancel_gate.request(app, rec, base, elicitation=elicitation, ttl_s=ttl_s)
    t = await app.transport(rec.host)
    layout = RunLayout(rec.run_dir)
    await get_backend(rec.backend).cancel(t, rec.handle, layout)
    obs = await observe(app, rec, t)  # the one observation path: did the group really go?
    how = untrusted.clean_line((obs.cancelled or "").split(" ")[-1], 20) or None
    rec = jobstore.set_state(app.store, rec.id, JobState.cancelled, kind="cancelled", exit_code=obs.exit_code,
                             exit_signal=obs.exit_signal, detail={"how": how, "detail": obs.detail})
    audit_log.append(app.store, "job_cancelled", action="cancel", target=rec.id,
                     detail={"name": rec.name, "host": rec.host, "how": how, "via": base.get("confirmed_via")})
    return CancelResult(**base, state=rec.state, cancelled=True, how=how,
                        message=f"cancelled {rec.name} on {rec.host} ({how or 'stopped'}); its run dir is kept: "
                                f"{rec.run_dir}")
