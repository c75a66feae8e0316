"""Judge one job from what the observation probe saw: state, progress, stall, triage, and what to do next.

Whether the job runs, exited, was cancelled or is gone is `backends.observe.verdict`'s call, never this module's.
Here: new log lines (remote text, cleaned first), progress, the job's own cadence, triage, and the patrol
memory kept between patrols (`PatrolMemory`, stored in the job's `last_patrol` JSON column).
"""

from __future__ import annotations

import statistics
import time
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mcp_gpu import untrusted
from mcp_gpu.app import App
from mcp_gpu.backends.observe import HostObservation, JobObservation, verdict
from mcp_gpu.lifecycle import next_step
from mcp_gpu.models import Finding, JobRecord, JobState, finding, iso
from mcp_gpu.store import jobs as jobs_repo
from mcp_gpu.triage import progress as prog
from mcp_gpu.triage.engine import triage

# Stall thresholds live with the progress parser (triage/progress.py: `silence`, `stall_allowance`).
STALL_FLOOR_S = prog.STALL_FLOOR_S
CADENCE_SAMPLES = 16
SEEN_CAP = 400  # fingerprints kept per job so old lines never re-escalate
HISTORY_CAP = 8
FINAL = ("succeeded", "failed", "preempted", "cancelled", "lost")
_GENERIC = ("healthy", "traceback", "lost")  # classes that say "it ended" without saying why


class ProgressView(BaseModel):
    step: int | None = None
    total: int | None = None
    epoch: float | None = None
    loss: float | None = None
    lr: float | None = None
    rate: float | None = None
    eta_s: float | None = None


class CheckpointView(BaseModel):
    name: str
    bytes: int
    age_s: float


class Cause(BaseModel):
    """A failure class seen while the job ran, kept so that it stays the primary cause when the job ends."""

    cls: str
    title: str
    gotcha: str | None = None
    evidence: list[str] = Field(default_factory=list)
    remedy: str = ""
    at: str = ""


class PatrolMemory(BaseModel):
    """What patrol remembers about a job between patrols (the job's `last_patrol` column; old rows load)."""

    model_config = ConfigDict(extra="allow")

    state: str | None = None
    at: str | None = None
    history: list[dict[str, Any]] = Field(default_factory=list)
    progress: ProgressView | None = None
    step_at: float | None = None
    seen_at: float | None = None
    cadence_samples: list[float] = Field(default_factory=list)
    seen: list[str] = Field(default_factory=list)
    oom_kill: int | None = None
    cause: Cause | None = None
    reported_final: bool = False

    @classmethod
    def of(cls, raw: dict[str, Any] | None) -> PatrolMemory:
        data = dict(raw or {})
        for key in ("progress", "cause"):
            if data.get(key) is not None and not isinstance(data[key], dict):
                data[key] = None
        try:
            return cls.model_validate(data)
        except ValueError:
            return cls()

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class JobPatrol(BaseModel):
    job_id: str
    name: str
    host: str
    backend: str
    state: str = Field(description="running | stalled | unreachable | unknown | launching | succeeded | failed | "
                                   "preempted | cancelled | lost")
    previous_state: str | None
    changed: bool
    line: str = Field(description="the one-line report")
    primary: str = "healthy"
    findings: list[Finding] = Field(default_factory=list)
    next: str
    progress: ProgressView | None = None
    log_age_s: float | None = None
    heartbeat_age_s: float | None = None
    checkpoint: CheckpointView | None = None
    gpu_mem_mib: int | None = None
    gpu_util_pct: int | None = None
    disk_free_bytes: int | None = None
    inodes_free: int | None = None
    new_log_bytes: int = 0
    skipped_log_bytes: int = 0
    exit_code: int | None = None
    history: list[dict[str, Any]] = Field(default_factory=list)
    relaunched: str | None = Field(default=None, description="new job id when on_preempt=relaunch acted")
    silent_s: float | None = Field(default=None, description="seconds without output, once past twice its cadence")
    cadence_s: float | None = Field(default=None, description="its median seconds between log lines")
    evidence: list[str] = Field(default_factory=list, description="why the verdict (alive/exited/...) is what it is")


PROGRESS_TAIL = 200  # progress is read from the newest lines only (a 256 KiB chunk may hold thousands)


def _progress(lines: list[str]) -> ProgressView | None:
    p = prog.latest_progress(lines[-PROGRESS_TAIL:])
    if p is None:
        return None
    return ProgressView(step=p.step, total=p.total, epoch=p.epoch, loss=p.loss, lr=p.lr, rate=p.rate, eta_s=p.eta_s)


def _consume(o: JobObservation, finished: bool) -> tuple[list[str], int]:
    """Split new bytes into whole lines; a trailing partial line waits for the next patrol unless the job ended.
    Lines are remote text: control and escape sequences are stripped here, before anything reads them."""
    data = o.new_bytes
    if not finished and data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n")
        data = data[: cut + 1] if cut >= 0 else b""
    # tqdm redraws with \r: keep the last redraw of each line
    lines = [untrusted.clean_line(seg.split("\r")[-1], 2000)
             for seg in data.decode("utf-8", "replace").split("\n")]
    return [ln for ln in lines if ln.strip()], o.log_from + len(data)


def _epoch(iso_text: str) -> float | None:
    try:
        return datetime.fromisoformat(iso_text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _remembered(mem: PatrolMemory, tri_primary: str, findings: list[Finding], state: str) -> tuple[str, list[Finding]]:
    """A failure class seen while the job ran stays its primary cause when it ends (the tail at exit often shows
    only the traceback's last lines, or nothing)."""
    cause = mem.cause
    if cause is None or state not in FINAL or tri_primary not in _GENERIC:
        return tri_primary, findings
    kept = finding(cause.cls, "error", f"{cause.title} (seen while it ran, at {cause.at})", gotcha=cause.gotcha,
                   evidence=cause.evidence, remedy=cause.remedy)
    rest = [f for f in findings if f.cls != cause.cls]
    return cause.cls, [kept, *rest]


def evaluate(app: App, job: JobRecord, host: HostObservation | None, o: JobObservation | None, *,
                   unreachable: str | None = None, stall_floor_s: float | None = None) -> JobPatrol:
    mem = PatrolMemory.of(job.last_patrol)
    prev_obs = mem.state or job.state.value
    now = time.time()
    if unreachable is not None or o is None or host is None:
        why = untrusted.clean_line(unreachable or "the probe returned nothing for this job", 90)
        line = f"{job.name}@{job.host}: UNREACHABLE ({why}); last seen {prev_obs} — not a failure"
        rep = JobPatrol(job_id=job.id, name=job.name, host=job.host, backend=job.backend, state="unreachable",
                        previous_state=prev_obs, changed=prev_obs != "unreachable", line=line,
                        next="patrol again later; never cancel or tear down because a host is silent",
                        progress=mem.progress)
        _record(app, job, rep, mem, now, offset=None)
        return rep

    v = verdict(o)
    if v.kind == "unknown":
        line = (f"{job.name}@{job.host}: UNKNOWN ({untrusted.clean_line('; '.join(v.evidence), 160)}); "
                f"last seen {prev_obs} — not a verdict")
        rep = JobPatrol(job_id=job.id, name=job.name, host=job.host, backend=job.backend, state="unknown",
                        previous_state=prev_obs, changed=prev_obs != "unknown", line=line, evidence=list(v.evidence),
                        next="patrol again; if it stays unknown, read job_logs and the host before acting",
                        progress=mem.progress)
        _record(app, job, rep, mem, now, offset=None)
        return rep
    base = v.state.value if v.state is not None else "running"
    code, sig = v.exit_code, v.exit_signal
    lines, new_offset = _consume(o, finished=base not in ("running", "launching"))
    oom_delta = 0
    if host.oom_kill is not None and mem.oom_kill is not None:
        oom_delta = max(0, host.oom_kill - mem.oom_kill)
    disk_free, inodes_free = o.bytes_free, o.inodes_free
    exit_for_triage = code if base in FINAL else None
    sched_word = o.scheduler.scheduler_state if o.scheduler is not None else None
    tri = triage(lines, exit_code=exit_for_triage, exit_signal=sig, oom_kill_delta=oom_delta,
                 scheduler_state=sched_word, disk_free_bytes=disk_free, inodes_free=inodes_free,
                 seen=set(mem.seen))
    state = base
    findings = list(tri.findings)
    primary, findings = _remembered(mem, tri.primary, findings, state)
    if base in ("failed", "lost") and primary == "preempted":
        state = "preempted"
    if state == "lost":
        findings.insert(0, finding("lost", "error", "the job vanished without an exit status", gotcha="U3",
                                   evidence=[*v.evidence[:2],
                                             f"log last written {o.log_age:.0f}s ago" if o.log_age else "no log"],
                                   remedy="walk the four causes: reboot (uptime), OOM kill (dmesg, memory.events), "
                                          "SIGHUP, manual kill; then relaunch from the newest checkpoint"))
        primary = "lost" if primary in _GENERIC else primary
    bad_now = next((f for f in tri.findings if f.severity in ("error", "critical") and f.cls not in _GENERIC), None)
    if bad_now is not None and state in ("running", "launching"):
        mem.cause = Cause(cls=bad_now.cls, title=bad_now.title, gotcha=bad_now.gotcha, evidence=bad_now.evidence[:6],
                          remedy=bad_now.remedy, at=iso())

    prog_now = _progress(lines)
    progress = prog_now or mem.progress
    if prog_now is not None and prog_now.step is not None and (mem.progress is None or mem.progress.step != prog_now.step):
        mem.step_at = now
    elif mem.step_at is None:
        mem.step_at = _epoch(job.created_at) or now
    # the job's own cadence: seconds per log line, sampled patrol to patrol, median of the recent samples
    since = now - (mem.seen_at or _epoch(job.created_at) or now)
    if lines and since > 0:
        mem.cadence_samples = [*mem.cadence_samples, since / len(lines)][-CADENCE_SAMPLES:]
    mem.seen_at = now
    cadence = statistics.median(mem.cadence_samples) if mem.cadence_samples else None

    gpu_mem, gpu_util = host.gpu_use(o)
    silent_s: float | None = None
    if state == "running":
        floor = stall_floor_s if stall_floor_s is not None else (job.request.stall_floor or STALL_FLOOR_S)
        allowed = prog.stall_allowance(cadence, floor)
        quiet = o.log_age if o.log_age is not None else now - (mem.step_at or now)
        verdict_of_silence = prog.silence(quiet, cadence, floor)
        if verdict_of_silence != "ok":
            silent_s = quiet
        if verdict_of_silence == "stalled":
            if gpu_util is not None and gpu_util >= 30:
                findings.append(finding("network_stall", "warn", "log frozen but the GPU is busy", gotcha="U43",
                                        evidence=[f"no new log for {quiet:.0f}s", f"GPU util {gpu_util} %"],
                                        remedy="likely buffered output: run with python -u / PYTHONUNBUFFERED=1; "
                                               "check the checkpoint mtime moves"))
            else:
                state = "stalled"
                cad = f"{cadence:.3g}s" if cadence else "unknown"
                findings.insert(0, finding("stalled", "error", f"no output for {quiet:.0f}s (its cadence {cad}, "
                                                               f"allowed {allowed:.0f}s)",
                                           gotcha="train.D19", evidence=[
                                               f"last step {progress.step if progress else '?'}",
                                               f"log age {quiet:.0f}s, heartbeat age {o.hb_age}",
                                               f"GPU util {gpu_util if gpu_util is not None else 'n/a'}"],
                                           remedy="py-spy dump --pid <pid> tells hung from slow; a hung NCCL "
                                                  "collective needs the job restarted from its last checkpoint"))

    ck = o.checkpoint
    ckpt = None
    if ck is not None:
        ckpt = CheckpointView(name=untrusted.clean_line(ck.name.rsplit("/", 1)[-1], 120), bytes=ck.size,
                              age_s=max(0.0, round(host.now - ck.mtime, 1)))
    rep = JobPatrol(job_id=job.id, name=job.name, host=job.host, backend=job.backend, state=state,
                    previous_state=prev_obs, changed=prev_obs != state, line="", primary=primary,
                    findings=findings, next="", progress=progress, log_age_s=o.log_age, heartbeat_age_s=o.hb_age,
                    checkpoint=ckpt, gpu_mem_mib=gpu_mem, gpu_util_pct=gpu_util, disk_free_bytes=disk_free,
                    inodes_free=inodes_free, new_log_bytes=len(o.new_bytes),
                    skipped_log_bytes=max(0, o.log_from - job.log_offset), exit_code=code,
                    silent_s=round(silent_s, 1) if silent_s is not None else None,
                    cadence_s=round(cadence, 3) if cadence else None, evidence=list(v.evidence))
    rep.line = _line(rep)
    rep.next = next_step.patrol_job_next(app.store, job, rep)
    mem.seen = tri.fingerprints[-SEEN_CAP:]
    if host.oom_kill is not None:
        mem.oom_kill = host.oom_kill
    _record(app, job, rep, mem, now, offset=new_offset)
    return rep


def _record(app: App, job: JobRecord, rep: JobPatrol, mem: PatrolMemory, now: float, offset: int | None) -> None:
    history = list(mem.history)
    if rep.changed or not history:
        history.append({"at": iso(), "state": rep.state})
    rep.history = history[-HISTORY_CAP:]
    mem.history = rep.history
    mem.state, mem.at = rep.state, iso()
    if rep.progress is not None:
        mem.progress = rep.progress
    final = rep.state in FINAL
    with app.store.atomic():
        jobs_repo.update(app.store, job.id, log_offset=offset, last_patrol=mem.to_json())
        if final and job.state.value != rep.state:
            jobs_repo.set_state(app.store, job.id, JobState(rep.state), kind="patrol", exit_code=rep.exit_code,
                                detail={"primary": rep.primary, "line": rep.line})
        elif final and rep.changed:  # already moved (by a refresh): patrol's first word on it keeps the cause
            jobs_repo.append_event(app.store, job.id, "patrol", JobState(rep.state),
                                   {"primary": rep.primary, "line": rep.line})
        elif rep.state in ("running", "stalled") and job.state is JobState.launching:
            jobs_repo.set_state(app.store, job.id, JobState.running, kind="patrol")
        elif rep.changed:
            jobs_repo.append_event(app.store, job.id, "observation", None, {"observed": rep.state, "line": rep.line})


def _fmt_age(s: float | None) -> str:
    if s is None:
        return "?"
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h"


def _line(r: JobPatrol) -> str:
    parts = [f"{r.name}@{r.host}", r.state.upper() if r.state not in ("running", "succeeded") else r.state]
    p = r.progress
    if p is not None:
        if p.step is not None:
            parts.append(f"step {p.step}" + (f"/{p.total}" if p.total else ""))
        if p.epoch is not None:
            parts.append(f"epoch {p.epoch:g}")
        if p.loss is not None:
            parts.append(f"loss {p.loss:.4g}")
        if p.eta_s is not None and r.state == "running":
            parts.append(f"eta {_fmt_age(p.eta_s)}")
    if r.checkpoint:
        parts.append(f"ckpt {r.checkpoint.name} {_fmt_age(r.checkpoint.age_s)} ago")
    if r.gpu_util_pct is not None:
        parts.append(f"gpu {r.gpu_util_pct}%")
    if r.silent_s is not None and r.state == "running":  # never shown as plainly running while it is silent
        cad = f"{r.cadence_s:.3g}s" if r.cadence_s else "unknown"
        parts[1] = f"SILENT for {r.silent_s:.0f}s (cadence {cad})"
    if r.exit_code is not None and r.state != "succeeded":
        parts.append(f"exit {r.exit_code}")
    bad = [f for f in r.findings if f.severity in ("error", "critical")]
    if bad:
        parts.append(f"— {bad[0].cls}: {bad[0].title[:80]}")
    return " ".join(parts)

