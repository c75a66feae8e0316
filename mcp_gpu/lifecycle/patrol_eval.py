"""Judge one job from what the patrol probe saw: state, progress, stall, triage, and what to do next."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, Field

from mcp_gpu.app import App
from mcp_gpu.backends import Observation
from mcp_gpu.backends.registry import scheduler_verdict
from mcp_gpu.lifecycle import next_step
from mcp_gpu.lifecycle.patrol_probe import HostFacts, JobFacts, job_gpu
from mcp_gpu.models import Finding, JobRecord, JobState, finding, iso
from mcp_gpu.store import jobs as jobs_repo
from mcp_gpu.triage.engine import triage

STALL_FLOOR_S = 600.0  # never call a job stalled before 10 min of silence, however fast its cadence
STALL_FACTOR = 5.0  # ... or five of its own observed step intervals, whichever is longer
SEEN_CAP = 400  # fingerprints kept per job so old lines never re-escalate
HISTORY_CAP = 8


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


class JobPatrol(BaseModel):
    job_id: str
    name: str
    host: str
    backend: str
    state: str = Field(description="running | stalled | unreachable | launching | succeeded | failed | preempted | "
                                   "cancelled | lost")
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


def _progress(lines: list[str]) -> ProgressView | None:
    try:
        from mcp_gpu.triage import progress as prog
    except ImportError:
        return None
    p = prog.latest_progress(lines)
    if p is None:
        return None
    return ProgressView(step=p.step, total=p.total, epoch=p.epoch, loss=p.loss, lr=p.lr, rate=p.rate, eta_s=p.eta_s)


def _consume(facts: JobFacts, finished: bool) -> tuple[list[str], int]:
    """Split new bytes into whole lines; a trailing partial line waits for the next patrol unless the job ended."""
    data = facts.new_bytes
    if not finished and data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n")
        data = data[: cut + 1] if cut >= 0 else b""
    # tqdm redraws with \r: keep the last redraw of each line
    lines = [seg.split("\r")[-1] for seg in data.decode("utf-8", "replace").splitlines()]
    return [ln for ln in lines if ln.strip()], facts.log_from + len(data)


def scheduler_observation(job: JobRecord, f: JobFacts) -> Observation | None:
    """Slurm and Kubernetes jobs: what the scheduler said in this probe, parsed by the backend itself."""
    if job.backend == "slurm" and f.slurm_text:
        from mcp_gpu.backends import slurm

        return slurm.parse_observation(f.slurm_text)
    if job.backend == "kubernetes" and f.k8s_job is not None:
        from mcp_gpu.backends import kubernetes

        return kubernetes.parse_observation(f.k8s_job, f.k8s_pods)
    return None


def _base_state(job: JobRecord, f: JobFacts, sched: Observation | None) -> tuple[str, int | None, str | None]:
    if f.has_exit:
        if f.cancelled:
            return "cancelled", f.exit_code, f.exit_signal
        return ("succeeded" if f.exit_code == 0 else "failed"), f.exit_code, f.exit_signal
    if sched is not None:
        verdict = scheduler_verdict(job.backend, sched)
        if verdict is not None:
            return verdict.value, sched.exit_code, sched.exit_signal
    if f.alive:
        return "running", None, None
    if f.cancelled:
        return "cancelled", None, None
    return "lost", None, None


async def evaluate(app: App, job: JobRecord, host: HostFacts | None, f: JobFacts | None, *,
                   unreachable: str | None = None, stall_floor_s: float | None = None) -> JobPatrol:
    lp = dict(job.last_patrol)
    prev_obs = lp.get("state") or job.state.value
    now = time.time()
    history: list[dict[str, Any]] = list(lp.get("history", []))
    if unreachable is not None or f is None or host is None:
        why = unreachable or "the probe returned nothing for this job"
        line = (f"{job.name}@{job.host}: UNREACHABLE ({why.splitlines()[0][:90]}); last seen {prev_obs} — "
                f"not a failure")
        rep = JobPatrol(job_id=job.id, name=job.name, host=job.host, backend=job.backend, state="unreachable",
                        previous_state=prev_obs, changed=prev_obs != "unreachable", line=line,
                        next="patrol again later; never cancel or tear down because a host is silent",
                        progress=ProgressView(**lp["progress"]) if lp.get("progress") else None)
        _record(app, job, rep, lp, history, now, offset=None)
        return rep

    sched = scheduler_observation(job, f)
    base, code, sig = _base_state(job, f, sched)
    lines, new_offset = _consume(f, finished=base not in ("running", "launching"))
    oom_delta = 0
    if host.oom_kill is not None and lp.get("oom_kill") is not None:
        oom_delta = max(0, host.oom_kill - int(lp["oom_kill"]))
    disk_free = f.disk[2] if f.disk else None
    inodes_free = f.inodes[1] if f.inodes else None
    exit_for_triage = code if base in ("failed", "cancelled", "preempted", "lost", "succeeded") else None
    sched_word = sched.scheduler_state if sched is not None else None
    tri = triage(lines, exit_code=exit_for_triage, exit_signal=sig, oom_kill_delta=oom_delta,
                 scheduler_state=sched_word, disk_free_bytes=disk_free, inodes_free=inodes_free,
                 seen=set(lp.get("seen", [])))
    state = base
    if base in ("failed", "lost") and tri.primary == "preempted":
        state = "preempted"
    findings = list(tri.findings)
    if base == "lost" and state == "lost":
        findings.insert(0, finding("lost", "error", "the job vanished without an exit status", gotcha="U3",
                                   evidence=[f"no exit_code file in {job.run_dir}; process gone",
                                             f"log last written {f.log_age:.0f}s ago" if f.log_age else "no log"],
                                   remedy="walk the four causes: reboot (uptime), OOM kill (dmesg, memory.events), "
                                          "SIGHUP, manual kill; then relaunch from the newest checkpoint"))

    prog = _progress(lines)
    prev_prog = ProgressView(**lp["progress"]) if lp.get("progress") else None
    step_at = float(lp.get("step_at") or now)
    cadence = lp.get("cadence_s")
    if prog is not None and prog.step is not None:
        if prev_prog is None or prev_prog.step is None or prog.step != prev_prog.step:
            if prev_prog is not None and prev_prog.step is not None and prog.step > prev_prog.step:
                cadence = (now - step_at) / (prog.step - prev_prog.step)
            step_at = now
    elif lines and prev_prog is None:
        step_at = now
    progress = prog or prev_prog

    gpu_mem, gpu_util = job_gpu(host, f)
    if state == "running":
        floor = stall_floor_s if stall_floor_s is not None else float(job.spec.get("stall_floor_s") or STALL_FLOOR_S)
        allowed = max(floor, STALL_FACTOR * float(cadence)) if cadence else floor
        silent = f.log_age if f.log_age is not None else now - step_at
        quiet_steps = now - step_at
        if min(silent, quiet_steps) > allowed:
            if gpu_util is not None and gpu_util >= 30:
                findings.append(finding("network_stall", "warn", "log frozen but the GPU is busy", gotcha="U43",
                                        evidence=[f"no new log for {silent:.0f}s", f"GPU util {gpu_util} %"],
                                        remedy="likely buffered output: run with python -u / PYTHONUNBUFFERED=1; "
                                               "check the checkpoint mtime moves"))
            else:
                state = "stalled"
                findings.insert(0, finding("stalled", "error", f"no progress for {silent:.0f}s (allowed {allowed:.0f}s)",
                                           gotcha="train.D19", evidence=[
                                               f"last step {progress.step if progress else '?'}",
                                               f"log age {silent:.0f}s, heartbeat age {f.hb_age}",
                                               f"GPU util {gpu_util if gpu_util is not None else 'n/a'}"],
                                           remedy="py-spy dump --pid <pid> tells hung from slow; a hung NCCL "
                                                  "collective needs the job restarted from its last checkpoint"))

    ckpt = None
    if f.ckpt is not None:
        ckpt = CheckpointView(name=f.ckpt[2].rsplit("/", 1)[-1], bytes=f.ckpt[1], age_s=max(0.0, round(host.now - f.ckpt[0], 1)))
    rep = JobPatrol(job_id=job.id, name=job.name, host=job.host, backend=job.backend, state=state,
                    previous_state=prev_obs, changed=prev_obs != state, line="", primary=tri.primary,
                    findings=findings, next="", progress=progress, log_age_s=f.log_age, heartbeat_age_s=f.hb_age,
                    checkpoint=ckpt, gpu_mem_mib=gpu_mem, gpu_util_pct=gpu_util, disk_free_bytes=disk_free,
                    inodes_free=inodes_free, new_log_bytes=len(f.new_bytes),
                    skipped_log_bytes=max(0, f.log_from - job.log_offset), exit_code=code)
    rep.line = _line(rep)
    rep.next = next_step.patrol_job_next(app.store, job, rep)
    lp.update(step_at=step_at, cadence_s=cadence, seen=tri.fingerprints[-SEEN_CAP:],
              oom_kill=host.oom_kill if host.oom_kill is not None else lp.get("oom_kill"))
    _record(app, job, rep, lp, history, now, offset=new_offset)
    return rep


def _record(app: App, job: JobRecord, rep: JobPatrol, lp: dict[str, Any], history: list[dict[str, Any]],
            now: float, offset: int | None) -> None:
    if rep.changed or not history:
        history.append({"at": iso(), "state": rep.state})
    rep.history = history[-HISTORY_CAP:]
    lp.update(state=rep.state, at=iso(), history=rep.history,
              progress=rep.progress.model_dump() if rep.progress else lp.get("progress"))
    final = rep.state in ("succeeded", "failed", "preempted", "cancelled", "lost")
    with app.store.atomic():
        jobs_repo.update(app.store, job.id, log_offset=offset, last_patrol=lp)
        if final and job.state.value != rep.state:
            jobs_repo.set_state(app.store, job.id, JobState(rep.state), kind="patrol", exit_code=rep.exit_code,
                                detail={"primary": rep.primary, "line": rep.line})
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
    if r.exit_code is not None and r.state != "succeeded":
        parts.append(f"exit {r.exit_code}")
    bad = [f for f in r.findings if f.severity in ("error", "critical")]
    if bad:
        parts.append(f"— {bad[0].cls}: {bad[0].title[:80]}")
    return " ".join(parts)

