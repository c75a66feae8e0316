"""The Iron-Law gate of teardown, re-checked with a fresh look at the host.

Liveness comes from the one observation path (`backends.observe`: one probe for every registered job of the
host, `verdict` per job: a job whose process group lives is running whatever its files say). Alongside, on the
same connection, the listing probe finds the newest checkpoint-like file under the paths each job's latest
manifest verified (`artifacts.listing.PROBE` in `newest` mode). The observation also reports the run dirs found
under the host's run roots (`HostObservation.discovered`), including those the registry does not know. The gate
passes only when no job is still running (unless `allow_running`) and every job has a verified manifest with
`all_ok` that no newer remote checkpoint has made stale. Otherwise `GateRefused` lists exactly what is missing
and the call that fixes each. The snapshot (jobs, their observed states, manifest ids, newest checkpoint mtimes)
is what a confirmation token is bound to: if any of it changes before the confirmation, the token is refused.
"""

from __future__ import annotations

import json
import posixpath
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

from mcp_gpu.app import App
from mcp_gpu.artifacts.listing import PROBE as LIST_PROBE
from mcp_gpu.artifacts.listing import Newest, check_roots, is_checkpoint_like, parse_listing
from mcp_gpu.artifacts.manifest import ManifestRecord, latest_manifest, stale_reason
from mcp_gpu.backends import observe as obs_path
from mcp_gpu.errors import GateRefused, GpuError
from mcp_gpu.models import JobRecord
from mcp_gpu.store import jobs

ProbeState = Literal["running", "exited", "dead", "missing", "unknown"]


class GateJob(BaseModel):
    """One job the gate looked at, as the fresh probe saw it."""

    job_id: str
    name: str
    backend: str
    state: ProbeState = Field(description="running / exited / dead (no exit code, no process) / missing / unknown")
    exit_code: int | None = None
    manifest_id: int | None = None
    manifest_all_ok: bool | None = None
    newest_checkpoint: str | None = None
    newest_checkpoint_mtime: float | None = None


class Missing(BaseModel):
    """What keeps the gate shut for one job, and the call that fixes it."""

    job_id: str
    problem: str
    fix: str


class Gate(BaseModel):
    host: str
    allow_running: bool
    jobs: list[GateJob]
    missing: list[Missing]
    running: list[str] = Field(default_factory=list, description="job ids still running (allowed or not)")
    discovered: list[str] = Field(default_factory=list, description="job ids of the run dirs found on the host "
                                                                    "(registered or not)")

    @property
    def passed(self) -> bool:
        return not self.missing

    def snapshot(self) -> str:
        """Canonical text the confirmation token is bound to. A running job allowed to keep running contributes
        no checkpoint mtime (it keeps writing; what it writes after its manifest is knowingly lost)."""
        rows = []
        for j in sorted(self.jobs, key=lambda x: x.job_id):
            row: dict[str, Any] = {"id": j.job_id, "state": j.state, "exit": j.exit_code, "manifest": j.manifest_id}
            if j.state != "running":
                row["ckpt_mtime"] = j.newest_checkpoint_mtime
            rows.append(row)
        return json.dumps({"host": self.host, "allow_running": self.allow_running, "jobs": rows},
                          sort_keys=True, separators=(",", ":"))


def host_jobs(app: App, names: list[str]) -> list[JobRecord]:
    seen: dict[str, JobRecord] = {}
    for n in dict.fromkeys(names):
        for rec in jobs.list_jobs(app.store, host=n):
            seen.setdefault(rec.id, rec)
    return sorted(seen.values(), key=lambda r: r.created_at)


def _roots(rec: JobRecord, manifest: ManifestRecord | None) -> list[str]:
    paths = list(manifest.manifest.paths) if manifest else [str(p) for p in rec.spec.get("outputs") or []]
    try:
        return check_roots(paths)
    except GpuError:
        return []


def _newest(files: list[Any], roots: list[str]) -> Newest | None:
    wanted = set(roots)
    ckpts = [f for f in files if f.root in wanted and is_checkpoint_like(f.rel)]
    if not ckpts:
        return None
    top = max(ckpts, key=lambda f: (f.mtime, f.rel))
    return Newest(name=posixpath.join(top.root, top.rel), mtime=top.mtime)


def state_of(v: obs_path.Verdict) -> tuple[ProbeState, int | None]:
    """The gate's words for a verdict of the observation path."""
    if v.kind == "running":
        return "running", None
    if v.kind in ("exited", "cancelled"):
        return "exited", v.exit_code
    if v.kind == "gone":
        return ("missing", None) if v.run_dir_missing else ("dead", None)
    return "unknown", None


def run_roots(recs: list[JobRecord]) -> list[str]:
    """Where run dirs live on the host: the default root and the parent of every known run dir."""
    roots = ["~/.mcp-gpu/runs"]
    roots += [posixpath.dirname(r.run_dir.rstrip("/")) for r in recs if r.run_dir.startswith("/")]
    return list(dict.fromkeys(roots))


async def probe_gate(app: App, host: str, names: list[str], *, allow_running: bool) -> Gate:
    """Run the fresh probe and judge the gate. Never raises GateRefused itself: see `require`."""
    recs = host_jobs(app, names)
    manifests = {r.id: latest_manifest(app.store, job_id=r.id) for r in recs}
    roots = {r.id: _roots(r, manifests[r.id]) for r in recs}
    states: dict[str, tuple[ProbeState, int | None]] = {}
    files: list[Any] = []
    if recs:
        t = await app.transport(host)
        all_roots = list(dict.fromkeys(x for r in recs for x in roots[r.id]))
        timeout = max(app.settings.command_timeout, 120)
        got: dict[str, Any] = {}

        async def _observe() -> None:
            got["obs"] = await obs_path.observe_host(t, [obs_path.target_of(r) for r in recs],
                                                     roots=run_roots(recs), timeout=timeout)

        async def _list() -> None:
            if all_roots:
                res = await t.run_script(LIST_PROBE, ["newest", "0", *all_roots], timeout=timeout)
                got["files"] = parse_listing(res.stdout, all_roots).files

        async with anyio.create_task_group() as tg:  # two channels of one connection
            tg.start_soon(_observe)
            tg.start_soon(_list)
        host_obs: obs_path.HostObservation = got["obs"]
        files = got.get("files", [])
        for r in recs:
            states[r.id] = state_of(obs_path.verdict(host_obs.jobs.get(r.id)))
        discovered = host_obs.discovered
    else:
        discovered = []
    gate = judge(host, recs, manifests, roots, states, files, allow_running=allow_running)
    gate.discovered = discovered
    return gate


def judge(host: str, recs: list[JobRecord], manifests: dict[str, ManifestRecord | None], roots: dict[str, list[str]],
          states: dict[str, tuple[ProbeState, int | None]], files: list[Any], *, allow_running: bool) -> Gate:
    gate_jobs: list[GateJob] = []
    missing: list[Missing] = []
    running: list[str] = []
    for r in recs:
        state, code = states[r.id]
        if state == "missing" and r.state.finished:
            state, code = "exited", r.exit_code
        m = manifests[r.id]
        newest = _newest(files, roots[r.id])
        gate_jobs.append(GateJob(job_id=r.id, name=r.name, backend=r.backend, state=state, exit_code=code,
                                 manifest_id=m.id if m else None, manifest_all_ok=m.all_ok if m else None,
                                 newest_checkpoint=newest.name if newest else None,
                                 newest_checkpoint_mtime=float(newest.mtime) if newest else None))
        verify = f'verify_artifacts(job_id="{r.id}")'
        if state == "running":
            running.append(r.id)
            if not allow_running:
                missing.append(Missing(job_id=r.id, problem=f"job {r.id} ({r.name}) is still running",
                                       fix=f'wait and patrol(job_ids=["{r.id}"]) until it ends, or job_cancel(job_id='
                                           f'"{r.id}"), or request_teardown(..., allow_running=True) to sacrifice it'))
        elif state in ("unknown", "missing"):
            why_unknown = "its run directory is gone" if state == "missing" else "the scheduler did not say"
            missing.append(Missing(job_id=r.id, problem=f"cannot tell whether job {r.id} ({r.name}) is still running "
                                                         f"({why_unknown})",
                                   fix=f'patrol(job_ids=["{r.id}"]) to settle its state, or job_cancel(job_id="{r.id}")'))
        if m is None:
            missing.append(Missing(job_id=r.id, problem=f"job {r.id} ({r.name}) has no verified pull (no manifest)",
                                   fix=verify))
            continue
        if not m.all_ok:
            missing.append(Missing(job_id=r.id, problem=f"the latest manifest #{m.id} of job {r.id} is not all_ok "
                                                         f"(counts {m.manifest.counts})", fix=verify))
        elif not m.manifest.checked:
            # a plain `pull` proves the bytes arrived, not that the checkpoints load: not Iron-Law evidence
            missing.append(Missing(job_id=r.id, problem=f"manifest #{m.id} of job {r.id} comes from a pull without "
                                                         "load checks", fix=verify))
        if state == "running" and allow_running:
            continue
        why = stale_reason(m, newest)
        if why:
            missing.append(Missing(job_id=r.id, problem=f"manifest #{m.id} of job {r.id} is stale: {why}", fix=verify))
    return Gate(host=host, allow_running=allow_running, jobs=gate_jobs, missing=missing, running=running)


def require(gate: Gate) -> Gate:
    if gate.missing:
        lines = [f"- {m.problem} → {m.fix}" for m in gate.missing]
        raise GateRefused(f"teardown of {gate.host} refused by the Iron-Law gate:\n" + "\n".join(lines),
                          hint="do the calls listed, then request_teardown again; nothing was stopped",
                          data={"missing": [m.model_dump() for m in gate.missing]})
    return gate
