"""`wait`: block until a watched job changes (finished, failed with a class, stalled, preempted, its host
unreachable) or a bound passes — so an agent loop is "wait, act, wait" instead of "sleep 30 min, patrol".

Each tick is an ordinary patrol (one probe per host), so a change is judged exactly as patrol judges it and the
answer is the same compact delta. Several waits running at once in one server share their ticks: a tick younger
than the interval is reused, so N concurrent waits cost the hosts one probe per interval, not N.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
from pydantic import BaseModel, Field

from mcp_gpu.app import App
from mcp_gpu.errors import ConfigError
from mcp_gpu.lifecycle.patrol import PatrolReport, patrol, select_jobs
from mcp_gpu.lifecycle.patrol_eval import JobPatrol
from mcp_gpu.store import jobs as jobs_repo

DEFAULT_BOUND_S = 300.0
MAX_BOUND_S = 1800.0
PROBLEM_STATES = ("failed", "lost", "preempted", "stalled")
FINAL_STATES = ("succeeded", "failed", "lost", "preempted", "cancelled")
Progress = Callable[[float, float, str], Awaitable[None]]


class WaitResult(BaseModel):
    changed: bool = Field(description="true when a watched job changed; false when the bound passed first")
    reason: str
    waited_s: float
    ticks: int = Field(description="patrol rounds this wait looked at (shared with concurrent waits)")
    watched: list[str]
    changes: list[str] = Field(description="what changed, one line per job")
    report: PatrolReport = Field(description="the last patrol, restricted to the watched jobs")
    next: str


@dataclass
class _Shared:
    """One server's ticks, shared by every wait in flight."""

    lock: anyio.Lock = field(default_factory=anyio.Lock)
    at: float = -1e18
    ids: frozenset[str] = frozenset()
    report: PatrolReport | None = None
    probes: int = 0


# keyed by the App's id (an App is an unhashable dataclass); the entry goes when the App does
_shared: dict[int, _Shared] = {}


def _state(app: App) -> _Shared:
    sh = _shared.get(id(app))
    if sh is None:
        sh = _shared[id(app)] = _Shared()
        weakref.finalize(app, _shared.pop, id(app), None)
    return sh


def interval_default() -> float:
    raw = os.environ.get("MCP_GPU_WAIT_INTERVAL_S", "5")
    try:
        v = float(raw)
    except ValueError:
        raise ConfigError(f"MCP_GPU_WAIT_INTERVAL_S={raw!r} is not a number of seconds",
                          hint="set it to e.g. 5, or unset it") from None
    return max(0.2, v)


async def _tick(app: App, ids: frozenset[str], interval: float) -> tuple[PatrolReport, bool]:
    """The newest patrol covering `ids`: reused if younger than `interval`, else run now. (report, fresh?)"""
    sh = _state(app)
    async with sh.lock:
        if sh.report is not None and ids <= sh.ids and time.monotonic() - sh.at < interval:
            return sh.report, False
        report = await patrol(app, sorted(ids))
        sh.report, sh.ids, sh.at = report, ids, time.monotonic()
        sh.probes += 1
        return report, True


def probes_run(app: App) -> int:
    """How many patrol rounds waits have run in this server (for tests and benchmarks)."""
    sh = _shared.get(id(app))
    return sh.probes if sh else 0


def _only(report: PatrolReport, ids: frozenset[str]) -> PatrolReport:
    jobs = [j for j in report.jobs if j.job_id in ids]
    lines = [j.line for j in jobs]
    return report.model_copy(update={"jobs": jobs, "summary": lines or report.summary,
                                     "changed": [c for c in report.changed if any(c.startswith(f"{j.name}@")
                                                                                  for j in jobs)]})


def _key(j: JobPatrol) -> tuple[str, str]:
    return j.state, j.primary


async def wait(app: App, job_ids: list[str] | None = None, *, timeout_s: float | None = None,
               interval_s: float | None = None, progress: Progress | None = None) -> WaitResult:
    """Watch `job_ids` (default: every job not yet reported finished) until one changes or `timeout_s` passes."""
    bound = DEFAULT_BOUND_S if timeout_s is None else timeout_s
    if not 0 < bound <= MAX_BOUND_S:
        raise ConfigError(f"timeout_s must be between 0 and {MAX_BOUND_S:.0f} s, not {bound:g}",
                          hint=f"wait up to {MAX_BOUND_S:.0f} s per call and call again: a long wait is a loop of "
                               "short ones")
    interval = interval_default() if interval_s is None else max(0.2, interval_s)
    named = [jobs_repo.resolve(app.store, ref).id for ref in job_ids] if job_ids else None  # ids or names
    ids = frozenset(j.id for j in select_jobs(app, named))
    t0 = time.monotonic()
    if not ids:
        empty = PatrolReport(at="", duration_s=0.0, summary=["no jobs to watch"], changed=[],
                             next="nothing running: launch_detached starts a job", jobs=[], hosts=[])
        return WaitResult(changed=False, reason="nothing to watch", waited_s=0.0, ticks=0, watched=[], changes=[],
                          report=empty, next=empty.next)
    baseline: dict[str, tuple[str, str]] | None = None
    ticks = 0
    while True:
        report, _fresh = await _tick(app, ids, interval)
        ticks += 1
        mine = _only(report, ids)
        if baseline is None:
            # the first look reports what changed since the last patrol anyone ran: that is news too
            moved = [j for j in mine.jobs if j.changed]
            baseline = {j.job_id: _key(j) for j in mine.jobs}
        else:
            moved = [j for j in mine.jobs if j.job_id in baseline and _key(j) != baseline[j.job_id]]
        elapsed = time.monotonic() - t0
        if moved:
            return _result(mine, moved, True, "a watched job changed", elapsed, ticks, ids)
        if mine.jobs and all(j.state in FINAL_STATES for j in mine.jobs):
            return _result(mine, [], False, "every watched job had already finished", elapsed, ticks, ids)
        if elapsed + interval > bound:
            return _result(mine, [], False, f"no change within {bound:g} s", elapsed, ticks, ids)
        if progress is not None:
            running = sum(1 for j in mine.jobs if j.state == "running")
            await progress(elapsed, bound, f"waiting {elapsed:.0f}/{bound:.0f} s: {len(mine.jobs)} job(s) watched, "
                                           f"{running} running, no change yet")
        await anyio.sleep(max(0.0, min(interval - (time.monotonic() - t0 - elapsed), bound - elapsed)))


def _result(report: PatrolReport, moved: list[JobPatrol], changed: bool, reason: str, elapsed: float, ticks: int,
            ids: frozenset[str]) -> WaitResult:
    changes = [f"{j.name}@{j.host}: {j.previous_state or '?'} → {j.state}"
               + (f" ({j.primary})" if j.primary not in ("healthy", j.state) else "") for j in moved]
    if not changed and report.jobs and all(j.state in FINAL_STATES for j in report.jobs):
        nxt = report.next
    elif not changed:
        nxt = "no change: call wait again (or do other work and wait later)"
    else:
        bad = [j for j in moved if j.state in PROBLEM_STATES]
        nxt = f"{bad[0].name}: {bad[0].next}" if bad else report.next
    return WaitResult(changed=changed, reason=reason, waited_s=round(elapsed, 2), ticks=ticks, watched=sorted(ids),
                      changes=changes, report=report, next=nxt)
