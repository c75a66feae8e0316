"""The Iron-Law gate of teardown, re-checked with ONE fresh probe of the host.

The probe (a static script, arguments as argv) reads each registered job's run directory as the wrapper writes
it (`exit_code`, `pid`, `pgid`, the tmux session) and, in the same round trip, lists the newest checkpoint-like
file under the paths each job's latest manifest verified (`artifacts.listing.PROBE` in `newest` mode). The gate
passes only when no job is still running (unless `allow_running`) and every job has a verified manifest with
`all_ok` that no newer remote checkpoint has made stale. Otherwise `GateRefused` lists exactly what is missing
and the call that fixes each. The snapshot (jobs, their observed states, manifest ids, newest checkpoint mtimes)
is what a confirmation token is bound to: if any of it changes before the confirmation, the token is refused.
"""

from __future__ import annotations

import json
import posixpath
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcp_gpu.app import App
from mcp_gpu.artifacts.listing import MAX_LISTING_BYTES, Newest, check_roots, is_checkpoint_like, parse_listing
from mcp_gpu.artifacts.listing import PROBE as LIST_PROBE
from mcp_gpu.artifacts.manifest import ManifestRecord, latest_manifest, stale_reason
from mcp_gpu.backends import RunLayout
from mcp_gpu.backends.wrapper import _GROUP, parse_exit
from mcp_gpu.errors import CommandFailed, GateRefused, GpuError, TransportError
from mcp_gpu.models import JobRecord
from mcp_gpu.store import jobs

ProbeState = Literal["running", "exited", "dead", "missing", "unknown"]
_FIELDS_PER_JOB = 7
_DETACHED = ("tmux", "nohup")

# Args: LIST_PROBE N  then N × (RUN_DIR TMUX_SOCKET TMUX_SESSION)  then the roots to list (newest mode).
GATE_PROBE = "set -u\nprobe=$1 n=$2; shift 2\n" + _GROUP + r"""
i=0
while [ "$i" -lt "$n" ]; do
  rd=$1 sock=$2 sess=$3; shift 3
  ec=; [ -f "$rd/exit_code" ] && ec=$(head -c 200 -- "$rd/exit_code" | head -n 1 | tr -cd 'A-Za-z0-9 -')
  pid=$(cat -- "$rd/pid" 2>/dev/null) pg=$(cat -- "$rd/pgid" 2>/dev/null)
  pa=0; pid_alive "$pid" && pa=1
  ga=0; group_alive "$pg" && ga=1
  sa=-; [ -n "$sock" ] && { sa=0; session_alive && sa=1; }
  rdok=0; [ -d "$rd" ] && rdok=1
  printf 'J\0%s\0%s\0%s\0%s\0%s\0%s\0' "$i" "$ec" "$pa" "$ga" "$sa" "$rdok"
  i=$((i + 1))
done
[ "$#" -gt 0 ] && bash -c "$probe" mcp-gpu-list newest 0 "$@"
exit 0
"""


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


def _state(fields: list[str]) -> tuple[ProbeState, int | None]:
    _tag, _i, ec, pa, ga, sa, rdok = fields
    if rdok != "1":
        return "missing", None
    if ec:
        code, _sig = parse_exit(ec)
        return "exited", code
    if "1" in (pa, ga, sa):
        return "running", None
    return "dead", None


async def _observe_scheduler(app: App, t: Any, rec: JobRecord) -> tuple[ProbeState, int | None]:
    """Slurm/Kubernetes: the scheduler knows more than the run dir (pending jobs, pods on other nodes)."""
    from mcp_gpu.backends.registry import get_backend

    try:
        obs = await get_backend(rec.backend).observe(t, rec.handle, RunLayout(rec.run_dir))
    except TransportError:
        raise
    except GpuError:
        return "unknown", None
    if obs.alive:
        return "running", None
    if obs.alive is None:
        return "unknown", None
    return ("exited", obs.exit_code) if obs.exit_code is not None else ("dead", None)


async def probe_gate(app: App, host: str, names: list[str], *, allow_running: bool) -> Gate:
    """Run the fresh probe and judge the gate. Never raises GateRefused itself: see `require`."""
    recs = host_jobs(app, names)
    manifests = {r.id: latest_manifest(app.store, job_id=r.id) for r in recs}
    roots = {r.id: _roots(r, manifests[r.id]) for r in recs}
    states: dict[str, tuple[ProbeState, int | None]] = {}
    files: list[Any] = []
    if recs:
        t = await app.transport(host)
        args = [LIST_PROBE, str(len(recs))]
        for r in recs:
            sock, sess = ((str(r.handle.get("socket") or "mcp-gpu"), str(r.handle.get("session") or ""))
                          if r.backend == "tmux" and r.handle.get("session") else ("", ""))
            args += [r.run_dir, sock, sess]
        all_roots = list(dict.fromkeys(x for r in recs for x in roots[r.id]))
        res = await t.run_script(GATE_PROBE, [*args, *all_roots], timeout=max(app.settings.command_timeout, 120),
                                 max_output=MAX_LISTING_BYTES)
        if res.truncated:  # a cut listing could hide the newest checkpoint: fail closed
            raise CommandFailed(f"{host}: the teardown gate probe printed more than {MAX_LISTING_BYTES >> 20} MiB",
                                hint="narrow the jobs' output paths, then run request_teardown again")
        parts = res.stdout.split("\0", _FIELDS_PER_JOB * len(recs))
        if len(parts) < _FIELDS_PER_JOB * len(recs):
            raise CommandFailed(f"{host}: the teardown gate probe's output was cut short",
                                hint="run request_teardown again", data={"stderr": res.tail(3)})
        for i, r in enumerate(recs):
            states[r.id] = _state(parts[i * _FIELDS_PER_JOB:(i + 1) * _FIELDS_PER_JOB])
        rest = parts[-1] if len(parts) > _FIELDS_PER_JOB * len(recs) else ""
        if all_roots:
            files = parse_listing(rest, all_roots).files
        for r in recs:
            if r.backend not in _DETACHED and states[r.id][0] != "exited":
                states[r.id] = await _observe_scheduler(app, t, r)
    return judge(host, recs, manifests, roots, states, files, allow_running=allow_running)


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
