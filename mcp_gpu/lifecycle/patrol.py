"""Phase 4: patrol every job on every host: one probe per host, all hosts at once, always a report.

Each host gets ONE run of the observation probe (`backends.observe`) for all its jobs; `verdict` decides each
job's liveness, `patrol_eval` the rest.

A host we cannot reach makes its jobs `unreachable` — an observation, never a verdict: nothing is marked
failed and nothing destructive is suggested. Only log bytes new since the last patrol are read and triaged,
so an error already reported never re-escalates.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
from pydantic import BaseModel, Field

from mcp_gpu import log
from mcp_gpu.app import App
from mcp_gpu.backends import observe as obs_path
from mcp_gpu.errors import GpuError, NotFoundError
from mcp_gpu.lifecycle import next_step
from mcp_gpu.lifecycle.patrol_eval import JobPatrol, evaluate
from mcp_gpu.models import JobRecord, iso
from mcp_gpu.store import jobs as jobs_repo
from mcp_gpu.untrusted import clean_line

_log = log.get("mcp_gpu.patrol")


class HostPatrol(BaseModel):
    host: str
    reachable: bool
    jobs: int
    round_trips: int
    duration_s: float
    error: str | None = None
    oom_kills: int | None = None
    billing: str | None = Field(default=None, description="what the provider bills for this host: $/h, time up, "
                                                          "cost so far (hosts whose provider key is set)")
    guard: str | None = Field(default=None, description="the on-box guard: state, deadline, time left, notices")
    answer_bytes: int | None = None
    probe_cpu_s: float | None = Field(default=None, description="CPU time the probe used on the host")


RECORD_BATCH = 250
SUMMARY_CAP = 40  # job lines in the summary (problems first); the rest are counted
CHANGED_CAP = 20
JOBS_CAP = 50  # job records in the bounded report a tool answers with
PROBLEM_STATES = ("failed", "lost", "preempted", "stalled", "unknown", "unreachable")


class PatrolReport(BaseModel):
    at: str
    duration_s: float
    counts: dict[str, int] = Field(default_factory=dict, description="jobs per state")
    summary: list[str] = Field(description="one line per job, problems first, at most 40; the rest counted")
    changed: list[str] = Field(description="what changed since the last patrol (at most 20 listed)")
    next: str = Field(description="the next step for the agent")
    jobs: list[JobPatrol] = Field(description="problems first; capped in a tool's answer (see jobs_omitted)")
    jobs_total: int = 0
    jobs_omitted: int = Field(default=0, description="job records left out of this answer (patrol them by id)")
    hosts: list[HostPatrol]

    def bounded(self, cap: int = JOBS_CAP) -> PatrolReport:
        """The same report with at most `cap` job records (problems first): what a tool answers with."""
        if len(self.jobs) <= cap:
            return self
        return self.model_copy(update={"jobs": self.jobs[:cap], "jobs_omitted": len(self.jobs) - cap})


def _problem_rank(r: JobPatrol) -> int:
    if r.state in PROBLEM_STATES:
        return 0
    if any(f.severity in ("error", "critical") for f in r.findings) or r.silent_s is not None:
        return 1
    if r.changed:
        return 2
    return 3


def _summary(ordered: list[JobPatrol], counts: dict[str, int]) -> list[str]:
    lines = [r.line for r in ordered[:SUMMARY_CAP]]
    if len(ordered) > SUMMARY_CAP:
        rest: dict[str, int] = {}
        for r in ordered[SUMMARY_CAP:]:
            rest[r.state] = rest.get(r.state, 0) + 1
        lines.append(f"… {len(ordered) - SUMMARY_CAP} more job(s) not listed: "
                     + ", ".join(f"{n} {st}" for st, n in sorted(rest.items())))
    return lines or ["no jobs to patrol"]


def select_jobs(app: App, job_ids: list[str] | None) -> list[JobRecord]:
    if job_ids:
        out = []
        for jid in job_ids:
            rec = jobs_repo.find(app.store, jid)
            if rec is None:
                raise NotFoundError(f"no job {jid!r}", hint="job_list shows the known jobs")
            out.append(rec)
        return out
    return [j for j in jobs_repo.list_jobs(app.store) if not j.last_patrol.get("reported_final")
            and not (j.state.finished and j.last_patrol.get("state") == j.state.value)]


async def _patrol_host(app: App, host: str, jobs: list[JobRecord], out: dict[str, Any]) -> None:
    t0 = time.monotonic()
    try:
        t = await app.transport(host)
        facts = await obs_path.observe_host(t, [obs_path.target_of(j) for j in jobs],
                                            timeout=max(app.settings.command_timeout, 120))
        out[host] = ("ok", facts, time.monotonic() - t0)
    except GpuError as err:
        _log.info("patrol_host_unreachable", host=host, code=err.code, message=err.message)
        out[host] = ("unreachable", err, time.monotonic() - t0)


async def patrol(app: App, job_ids: list[str] | None = None, *, stall_floor_s: float | None = None) -> PatrolReport:
    """Observe the selected jobs (default: every job not yet reported finished) and record what changed."""
    t0 = time.monotonic()
    selected = select_jobs(app, job_ids)
    by_host: dict[str, list[JobRecord]] = {}
    for j in selected:
        by_host.setdefault(j.host, []).append(j)
    results: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:
        for host, jobs in by_host.items():
            tg.start_soon(_patrol_host, app, host, jobs, results)

    job_reports: list[JobPatrol] = []
    host_reports: list[HostPatrol] = []
    for host, jobs in by_host.items():
        status, payload, dt = results[host]
        if status == "unreachable":
            host_reports.append(HostPatrol(host=host, reachable=False, jobs=len(jobs), round_trips=1,
                                           duration_s=round(dt, 3), error=clean_line(str(payload.message), 300)))
            with app.store.atomic():
                for j in jobs:
                    job_reports.append(evaluate(app, j, None, None, unreachable=str(payload.message),
                                                stall_floor_s=stall_floor_s))
            continue
        hf: obs_path.HostObservation = payload
        host_reports.append(HostPatrol(host=host, reachable=True, jobs=len(jobs), round_trips=1,
                                       duration_s=round(dt, 3), oom_kills=hf.oom_kill, answer_bytes=hf.answer_bytes,
                                       probe_cpu_s=hf.cpu_s, error="; ".join(hf.errors)[:300] or None))
        for k in range(0, len(jobs), RECORD_BATCH):  # one registry transaction per batch, not per job
            with app.store.atomic():
                for j in jobs[k:k + RECORD_BATCH]:
                    job_reports.append(evaluate(app, j, hf, hf.jobs.get(j.id), stall_floor_s=stall_floor_s))

    await _decorate(app, host_reports)
    by_id = {j.id: j for j in selected}
    for r in job_reports:
        if r.state == "preempted" and r.changed:
            await _maybe_relaunch(app, by_id[r.job_id], r)
    ordered = sorted(job_reports, key=_problem_rank)  # stable: hosts' order kept within a rank
    counts: dict[str, int] = {}
    for r in ordered:
        counts[r.state] = counts.get(r.state, 0) + 1
    changed = [f"{r.name}@{r.host}: {r.previous_state} → {r.state}" for r in ordered if r.changed]
    if len(changed) > CHANGED_CAP:
        changed = [*changed[:CHANGED_CAP], f"… and {len(changed) - CHANGED_CAP} more"]
    report = PatrolReport(at=iso(), duration_s=round(time.monotonic() - t0, 3), counts=counts,
                          summary=_summary(ordered, counts), changed=changed,
                          next=next_step.patrol_next(app.store, ordered),
                          jobs=ordered, jobs_total=len(ordered), hosts=host_reports)
    return report


async def _decorate(app: App, hosts: list[HostPatrol]) -> None:
    """Billing from the providers' listings (cached) and the state of each host's guard (its events go to the
    audit log on this contact). Neither can fail a patrol."""
    from mcp_gpu.lifecycle.guard import all_guard_status
    from mcp_gpu.lifecycle.instances import billing_line, host_billing

    names = [h.host for h in hosts]
    bills = await host_billing(app, names)
    guards = {g.host: g for g in await all_guard_status(app, [h.host for h in hosts if h.reachable])}
    for h in hosts:
        if h.host in bills:
            h.billing = billing_line(bills[h.host])
        if h.host in guards:
            h.guard = guards[h.host].line


async def _maybe_relaunch(app: App, job: JobRecord, r: JobPatrol) -> None:
    """The only automatic action patrol may take, and only when the job opted in: `on_preempt: relaunch`,
    within its restart budget, on a preemption with corroborating evidence. Off by default."""
    req = job.request
    opts = dict(req.options)
    if opts.get("on_preempt") != "relaunch":
        return
    budget = int(opts.get("max_restarts", 2))
    evidence = [f for f in r.findings if f.cls == "preempted" and f.evidence]
    if r.primary != "preempted" or not evidence:
        r.next = "preemption not corroborated by the log or scheduler: not relaunching; " + r.next
        return
    if job.attempt - 1 >= budget:
        r.next = f"restart budget ({budget}) used up: not relaunching; decide with the user"
        return
    from mcp_gpu.lifecycle.launch import launch_detached

    try:
        res = await launch_detached(app, job.host, job.command, job.workdir, job.name, backend=job.backend,
                                    secret_env=list(req.secret_env), probe_s=float(req.probe_s or 30),
                                    run_root=req.run_root, outputs=list(req.outputs), relaunch=True, options=opts,
                                    stall_floor_s=req.stall_floor_s)
    except GpuError as err:
        r.next = f"automatic relaunch failed ({err.message}); relaunch by hand after checking the host"
        return
    r.relaunched = res.job_id
    r.next = f"relaunched as {res.job_id} (attempt {res.attempt} of {budget + 1}) per on_preempt=relaunch"
    r.line += f" → relaunched {res.job_id}"

