"""The Iron-Law gate of teardown, keyed on what bills (platform + instance id), re-checked with fresh probes.

Which jobs count: every job registered under ANY alias of the billing identity (or its targets), plus every job
mcp-gpu started on the machine itself, found by a separate discovery step (`DISCOVER`: run dirs under the run
roots, sessions on mcp-gpu's tmux sockets), registered under any name or not at all. A run dir or session whose
job this registry does not know keeps the gate shut. Every distinct machine the aliases reach is probed; one that
cannot be reached is refused. Each remaining problem that only loses results (unreachable machine, unverified
results, a job that keeps nothing, an unregistered run) is a `Loss` a HUMAN may accept: `accept_loss` makes the
phrase name every one of them, and nothing else can open the gate.

Whether each job is still running is decided by the one observation path (`backends.observe`: one probe per
machine, NUL-framed, a job exited only when its process group is gone); the newest checkpoint under each job's
verified paths comes from the listing probe in `newest` mode.

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
import os
import posixpath
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcp_gpu.app import App
from mcp_gpu.artifacts.listing import MAX_LISTING_BYTES, Newest, check_roots, is_checkpoint_like, parse_listing
from mcp_gpu.artifacts.listing import PROBE as LIST_PROBE
from mcp_gpu.artifacts.manifest import ManifestRecord, latest_manifest, stale_reason
from mcp_gpu.backends import observe as obs_path
from mcp_gpu.errors import CommandFailed, GateRefused, GpuError, TransportError
from mcp_gpu.lifecycle.teardown_plan import identity_verdict
from mcp_gpu.lifecycle.verify import required_outputs
from mcp_gpu.models import HostRecord, JobRecord
from mcp_gpu.store import hosts, jobs
from mcp_gpu.untrusted import clean_line

ProbeState = Literal["running", "exited", "dead", "missing", "unknown"]


LossKind = Literal["unreachable", "unverified", "keeps_nothing", "unregistered"]
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
DEFAULT_RUN_ROOTS = "~/.mcp-gpu/runs"
DEFAULT_TMUX_SOCKETS = "mcp-gpu"


class GateJob(BaseModel):
    """One job the gate looked at, as the fresh probe saw it."""

    job_id: str
    name: str
    host: str = Field(default="", description="the alias the job is registered under")
    backend: str
    state: ProbeState = Field(description="running / exited / dead (no exit code, no process) / missing / unknown")
    exit_code: int | None = None
    manifest_id: int | None = None
    manifest_all_ok: bool | None = None
    required_outputs: list[str] = Field(default_factory=list, description="fixed at launch")
    newest_checkpoint: str | None = None
    newest_checkpoint_mtime: float | None = None


class Missing(BaseModel):
    """What keeps the gate shut for one job, and the call that fixes it. `loss` is set when the problem only
    loses results: a human may then accept it (request_teardown(..., accept_loss=True) names it in the phrase)."""

    job_id: str
    problem: str
    fix: str
    loss: str | None = Field(default=None, description="the words the phrase uses when a human accepts this loss")
    loss_kind: LossKind | None = None


class UnknownRun(BaseModel):
    """A run dir or tmux session on the machine whose job this registry does not know."""

    host: str
    job_id: str
    where: str = Field(description="the run dir, or tmux socket/session")


class Endpoint(BaseModel):
    """One machine the identity's aliases reach, and whether the gate reached it."""

    host: str
    target: str
    reachable: bool
    error: str = ""


class Discovery(BaseModel):
    """What the discovery step found on one machine."""

    run_dirs: dict[str, str] = Field(default_factory=dict, description="job id -> run dir")
    sessions: dict[str, str] = Field(default_factory=dict, description="job id (session name) -> socket")
    env: dict[str, str] = Field(default_factory=dict, description="self-identity variables the machine reports")


class Gate(BaseModel):
    host: str
    allow_running: bool
    jobs: list[GateJob]
    missing: list[Missing]
    running: list[str] = Field(default_factory=list, description="job ids still running (allowed or not)")
    identity: str = Field(default="", description="platform + instance id the gate is keyed on")
    aliases: list[str] = Field(default_factory=list, description="every host name registered with that identity")
    endpoints: list[Endpoint] = Field(default_factory=list)
    unknown: list[UnknownRun] = Field(default_factory=list)
    accept_loss: bool = False
    accepted: list[Missing] = Field(default_factory=list, description="losses the human is asked to accept")
    reported_env: dict[str, str] = Field(default_factory=dict, description="self-identity the machine reported")
    alias_reports: dict[str, dict[str, str]] = Field(default_factory=dict,
                                                     description="self-identity other aliases' machines reported")
    identity_check: str = Field(default="", description="proven / unproven / contradicted / not_applicable")
    identity_detail: str = ""
    discovered: list[str] = Field(default_factory=list, description="job ids of the run dirs found on the host "
                                                                    "(registered or not)")

    @property
    def passed(self) -> bool:
        return not self.missing

    @property
    def losses(self) -> list[str]:
        """The acceptable losses as the phrase names them (deduplicated, in order)."""
        return list(dict.fromkeys(m.loss for m in self.missing + self.accepted if m.loss))

    def snapshot(self) -> str:
        """Canonical text the confirmation token is bound to. A running job allowed to keep running contributes
        no checkpoint mtime (it keeps writing; what it writes after its manifest is knowingly lost)."""
        rows = []
        for j in sorted(self.jobs, key=lambda x: x.job_id):
            row: dict[str, Any] = {"id": j.job_id, "state": j.state, "exit": j.exit_code, "manifest": j.manifest_id}
            if j.state != "running":
                row["ckpt_mtime"] = j.newest_checkpoint_mtime
            rows.append(row)
        snap: dict[str, Any] = {"host": self.host, "allow_running": self.allow_running, "jobs": rows}
        if self.identity:
            snap["identity"] = self.identity
        if self.identity_check:
            snap["identity_check"] = self.identity_check
        if self.accepted or self.unknown or any(not e.reachable for e in self.endpoints):
            snap["losses"] = sorted(self.losses)
            snap["unknown"] = sorted(u.job_id for u in self.unknown)
            snap["unreachable"] = sorted(e.target for e in self.endpoints if not e.reachable)
        return json.dumps(snap, sort_keys=True, separators=(",", ":"))


def host_jobs(app: App, names: list[str]) -> list[JobRecord]:
    seen: dict[str, JobRecord] = {}
    for n in dict.fromkeys(names):
        for rec in jobs.list_jobs(app.store, host=n):
            seen.setdefault(rec.id, rec)
    return sorted(seen.values(), key=lambda r: r.created_at)


# ---------------------------------------------------------------- which machines and jobs: the billing identity


def aliases_of(app: App, rec: HostRecord) -> list[HostRecord]:
    """Every registered host with the same billing identity (platform + instance id), `rec` first. A host with
    no instance id (local, a cluster login node) is its own identity."""
    out = [rec]
    if rec.platform and rec.instance_id:
        out += [h for h in hosts.same_identity(app.store, rec.platform, rec.instance_id) if h.name != rec.name]
    return out


def identity_names(app: App, rec: HostRecord) -> list[str]:
    """Host names and targets jobs of this identity may be registered under."""
    names: list[str] = []
    for h in aliases_of(app, rec):
        names += [h.name, h.target]
    return list(dict.fromkeys(n for n in names if n))


def _env_list(name: str, default: str, sep: str) -> list[str]:
    return [x.strip() for x in os.environ.get(name, default).split(sep) if x.strip()]


def scan_roots(app: App) -> list[str]:
    """Run roots the discovery lists: the default (MCP_GPU_GATE_RUN_ROOTS, ':'-separated, default
    ~/.mcp-gpu/runs) plus every run root a registered job of this registry used."""
    roots = _env_list("MCP_GPU_GATE_RUN_ROOTS", DEFAULT_RUN_ROOTS, ":")
    for r in app.store.query("SELECT DISTINCT run_dir FROM jobs WHERE run_dir != ''"):
        roots.append(posixpath.dirname(str(r["run_dir"]).rstrip("/")))
    return list(dict.fromkeys(r for r in roots if r and r != "/"))


def scan_sockets(app: App) -> list[str]:
    socks = _env_list("MCP_GPU_GATE_TMUX_SOCKETS", DEFAULT_TMUX_SOCKETS, ",")
    for r in app.store.query("SELECT handle_json FROM jobs WHERE backend='tmux'"):
        try:
            sock = json.loads(r["handle_json"] or "{}").get("socket")
        except ValueError:
            sock = None
        if isinstance(sock, str) and sock:
            socks.append(sock)
    return list(dict.fromkeys(s for s in socks if _JOB_ID.fullmatch(s)))


# Discovery, a step separate from the liveness probe (so it can ride on any observation probe).
# Args: N_ROOTS ROOT... SOCKET...   Prints NUL-framed records:
#   D <run dir>          a directory under a root holding what PREPARE or the wrapper writes (meta.json, wrapper.sh,
#                        out.log, exit_code, pid): a run dir stripped of its meta.json still counts
#   S <socket> <session> a session on one of mcp-gpu's tmux sockets
#   E <name> <value>     a self-identity variable, from this session or from PID 1 (RP12: lost over SSH)
DISCOVER = r"""set -u
n=$1; shift
expand() { case $1 in "~") printf '%s' "$HOME";; "~/"*) printf '%s/%s' "$HOME" "${1#"~/"}";; *) printf '%s' "$1";; esac; }
i=0
while [ "$i" -lt "$n" ]; do
  r=$(expand "$1"); shift; i=$((i + 1))
  [ -d "$r" ] || continue
  c=0
  for d in "$r"/*/; do
    d=${d%/}
    { [ -e "$d/meta.json" ] || [ -e "$d/wrapper.sh" ] || [ -e "$d/out.log" ] || [ -e "$d/exit_code" ] ||
      [ -e "$d/pid" ]; } || continue
    printf 'D\0%s\0' "$d"; c=$((c + 1)); [ "$c" -ge 5000 ] && break
  done
done
if command -v tmux >/dev/null 2>&1; then
  for s in "$@"; do
    tmux -L "$s" list-sessions -F '#{session_name}' 2>/dev/null | head -n 2000 |
      while IFS= read -r x; do printf 'S\0%s\0%s\0' "$s" "$x"; done
  done
fi
for v in RUNPOD_POD_ID CONTAINER_ID VAST_CONTAINERLABEL; do
  val=$(printenv "$v" 2>/dev/null | head -c 200)
  [ -n "$val" ] && printf 'E\0%s\0%s\0' "$v" "$val"
done
if [ -r /proc/1/environ ]; then
  tr '\0' '
' < /proc/1/environ 2>/dev/null | grep -E '^(RUNPOD_POD_ID|CONTAINER_ID|VAST_CONTAINERLABEL)=' |
    head -n 5 | while IFS= read -r kv; do printf 'E\0%s\0%s\0' "${kv%%=*}" "$(printf '%s' "${kv#*=}" | head -c 200)"; done
fi
exit 0
"""


def parse_discovery(text: str) -> Discovery:
    d = Discovery()
    parts = text.split("\0")
    i = 0
    while i < len(parts):
        tag = parts[i]
        if tag == "D" and i + 1 < len(parts):
            rd = parts[i + 1]
            jid = posixpath.basename(rd)
            d.run_dirs.setdefault(jid, rd)
            i += 2
        elif tag == "S" and i + 2 < len(parts):
            d.sessions.setdefault(parts[i + 2], parts[i + 1])
            i += 3
        elif tag == "E" and i + 2 < len(parts):
            d.env.setdefault(parts[i + 1], clean_line(parts[i + 2])[:200])
            i += 3
        else:
            i += 1
    return d


async def discover(app: App, t: Any) -> Discovery:
    """List what mcp-gpu started on this machine, whatever the registry says (one round trip)."""
    roots = scan_roots(app)
    res = await t.run_script(DISCOVER, [str(len(roots)), *roots, *scan_sockets(app)],
                             timeout=max(app.settings.command_timeout, 60))
    return parse_discovery(res.stdout)


def _roots(rec: JobRecord, manifest: ManifestRecord | None) -> list[str]:
    paths = list(manifest.manifest.paths) if manifest else required_outputs(rec)
    try:
        return check_roots(paths)
    except GpuError:
        return []


def _norm(paths: list[str]) -> list[str]:
    try:
        return check_roots(paths)
    except GpuError:
        return []


def uncovered(required: list[str], manifest: ManifestRecord) -> list[str]:
    """Required outputs the manifest's paths do not cover (each must be one of them, or lie under one)."""
    have = [q.rstrip("/") for q in _norm(list(manifest.manifest.paths))]
    return [p for p in _norm(required) if not any(p == q or p.startswith(q + "/") for q in have)]


def absent(required: list[str], manifest: ManifestRecord) -> list[str]:
    """Required outputs the manifest found missing on the machine."""
    gone = set(_norm(list(manifest.manifest.missing)))
    return [p for p in _norm(required) if p in gone]


def _kept_elsewhere(rec: JobRecord, manifest: ManifestRecord) -> bool:
    """The manifest verified files outside the job's run dir (paths the caller added because the job wrote there)."""
    rd = rec.run_dir.rstrip("/") + "/"
    return any(e.verified and not e.remote.startswith(rd) for e in manifest.manifest.files)


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


async def _probe_jobs(app: App, t: Any, host: str, recs: list[JobRecord],
                      roots: dict[str, list[str]]
                      ) -> tuple[dict[str, tuple[ProbeState, int | None]], list[Any], list[str]]:
    """The liveness probe of one machine: each job's run dir (and tmux session), plus the newest checkpoint under
    the roots. (The observation mechanics; the selection of jobs and the verdict live elsewhere.)"""
    states: dict[str, tuple[ProbeState, int | None]] = {}
    files: list[Any] = []
    if not recs:
        return states, files, []
    all_roots = list(dict.fromkeys(x for r in recs for x in roots[r.id]))
    timeout = max(app.settings.command_timeout, 120)
    host_obs = await obs_path.observe_host(t, [obs_path.target_of(r) for r in recs], roots=run_roots(recs),
                                           timeout=timeout)
    for r in recs:
        states[r.id] = state_of(obs_path.verdict(host_obs.jobs.get(r.id)))
    if all_roots:
        res = await t.run_script(LIST_PROBE, ["newest", "0", *all_roots], timeout=timeout, max_output=MAX_LISTING_BYTES)
        if res.truncated:  # a cut listing could hide the newest checkpoint: fail closed
            raise CommandFailed(f"{host}: the teardown gate's listing printed more than {MAX_LISTING_BYTES >> 20} MiB",
                                hint="narrow the jobs' output paths, then run request_teardown again")
        files = parse_listing(res.stdout, all_roots).files
    return states, files, host_obs.discovered

async def probe_identity(app: App, rec: HostRecord, *, allow_running: bool, accept_loss: bool = False,
                         identity: str = "", discover_jobs: bool = True) -> Gate:
    """Probe every machine the identity's aliases reach, for every job mcp-gpu started there, and judge.
    `discover_jobs=False` (a teardown that stops and deletes nothing, e.g. `local`) checks registered jobs only.
    Never raises GateRefused itself: see `require`."""
    aliases = aliases_of(app, rec)
    names = identity_names(app, rec)
    recs = host_jobs(app, names)
    # one endpoint per distinct target; a job belongs to the endpoint of the alias (or target) it is registered under
    endpoint_of: dict[str, str] = {}
    endpoints: dict[str, Endpoint] = {}
    for h in aliases:
        endpoints.setdefault(h.target, Endpoint(host=h.name, target=h.target, reachable=True))
        endpoint_of[h.name] = endpoint_of[h.target] = h.target
    by_ep: dict[str, list[JobRecord]] = {ep: [] for ep in endpoints}
    for r in recs:
        by_ep[endpoint_of.get(r.host, rec.target)].append(r)
    known = {r.id for r in recs}
    unknown: list[UnknownRun] = []
    reported: dict[str, str] = {}
    others: dict[str, dict[str, str]] = {}
    states: dict[str, tuple[ProbeState, int | None]] = {}
    unreachable_jobs: set[str] = set()
    files: list[Any] = []
    discovered: list[str] = []
    all_recs = list(recs)
    for target, ep in endpoints.items():
        try:
            t = await app.transport(ep.host)
            found = await discover(app, t) if discover_jobs else Discovery()
        except TransportError as err:
            ep.reachable, ep.error = False, err.message[:300]
            unreachable_jobs.update(r.id for r in by_ep[target])
            continue
        if target == rec.target:
            reported = found.env
        elif found.env:
            others[ep.host] = found.env
        for jid, where in [*found.run_dirs.items(), *((j, f"tmux -L {s} session {j}") for j, s in found.sessions.items())]:
            if jid in known:
                continue
            other = jobs.find(app.store, jid) if _JOB_ID.fullmatch(jid) else None
            if other is not None:  # mcp-gpu started it here, registered under another name: it counts
                known.add(jid)
                by_ep[target].append(other)
                all_recs.append(other)
            elif not any(u.job_id == jid for u in unknown):
                unknown.append(UnknownRun(host=ep.host, job_id=clean_line(jid, 128), where=clean_line(where, 300)))
        ep_recs = by_ep[target]
        manifests_ep = {r.id: latest_manifest(app.store, job_id=r.id) for r in ep_recs}
        roots_ep = {r.id: _roots(r, manifests_ep[r.id]) for r in ep_recs}
        try:
            st, fl, disc = await _probe_jobs(app, t, ep.host, ep_recs, roots_ep)
        except TransportError as err:
            ep.reachable, ep.error = False, err.message[:300]
            unreachable_jobs.update(r.id for r in ep_recs)
            continue
        states.update(st)
        files += fl
        discovered += disc
    all_recs.sort(key=lambda r: r.created_at)
    manifests = {r.id: latest_manifest(app.store, job_id=r.id) for r in all_recs}
    roots = {r.id: _roots(r, manifests[r.id]) for r in all_recs}
    for jid in unreachable_jobs:
        states[jid] = ("unknown", None)
    gate = judge(rec.name, all_recs, manifests, roots, states, files, allow_running=allow_running,
                 unknown=unknown, endpoints=list(endpoints.values()), unreachable_jobs=unreachable_jobs)
    gate.identity = identity
    gate.aliases = [h.name for h in aliases]
    gate.reported_env = reported
    gate.alias_reports = others
    gate.discovered = list(dict.fromkeys(discovered))
    return settle(gate, accept_loss=accept_loss)


async def probe_gate(app: App, host: str, names: list[str], *, allow_running: bool) -> Gate:
    """The gate of one registered host (kept for callers that name a host): see `probe_identity`."""
    rec = hosts.find(app.store, host) or HostRecord(name=host, target=names[1] if len(names) > 1 else host)
    return await probe_identity(app, rec, allow_running=allow_running)



def judge(host: str, recs: list[JobRecord], manifests: dict[str, ManifestRecord | None], roots: dict[str, list[str]],
          states: dict[str, tuple[ProbeState, int | None]], files: list[Any], *, allow_running: bool,
          unknown: list[UnknownRun] | None = None, endpoints: list[Endpoint] | None = None,
          unreachable_jobs: set[str] | None = None) -> Gate:
    gate_jobs: list[GateJob] = []
    missing: list[Missing] = []
    running: list[str] = []
    cut_off = unreachable_jobs or set()
    for ep in endpoints or []:
        if not ep.reachable:
            missing.append(Missing(
                job_id="", problem=f"cannot reach {ep.host} ({ep.target}) to check what runs there: {ep.error}",
                fix=f"make {ep.host} reachable and request_teardown again; only a human may accept that results on it "
                    "are unverified (request_teardown(..., accept_loss=True) puts it in the phrase)",
                loss=f"unverified results on {ep.host}", loss_kind="unreachable"))
    for u in unknown or []:
        missing.append(Missing(
            job_id=u.job_id, problem=f"{u.where} on {u.host} belongs to job {u.job_id}, which this registry does not "
                                     "know (started by another mcp-gpu state dir, or planted by hand)",
            fix=f"find out what {u.job_id} is and pull its results yourself (verify_artifacts(host=\"{u.host}\", paths="
                "[...])); only a human may accept losing it (request_teardown(..., accept_loss=True))",
            loss=f"unverified results of unregistered job {u.job_id}", loss_kind="unregistered"))
    for r in recs:
        state, code = states.get(r.id, ("unknown", None))
        if state == "missing" and r.state.finished:
            state, code = "exited", r.exit_code
        m = manifests[r.id]
        newest = _newest(files, roots[r.id])
        req = required_outputs(r)
        gate_jobs.append(GateJob(job_id=r.id, name=r.name, host=r.host, backend=r.backend, state=state,
                                 exit_code=code, manifest_id=m.id if m else None,
                                 manifest_all_ok=m.all_ok if m else None, required_outputs=req,
                                 newest_checkpoint=newest.name if newest else None,
                                 newest_checkpoint_mtime=float(newest.mtime) if newest else None))
        verify = f'verify_artifacts(job_id="{r.id}")'
        lose = f"unverified results of job {r.id}"
        if r.id in cut_off:
            pass  # the machine's own Missing says it; the job's results are part of that loss
        elif state == "running":
            running.append(r.id)
            if not allow_running:
                missing.append(Missing(job_id=r.id, problem=f"job {r.id} ({r.name}) is still running",
                                       fix=f'wait and patrol(job_ids=["{r.id}"]) until it ends, or job_cancel(job_id='
                                           f'"{r.id}"), or request_teardown(..., allow_running=True) to sacrifice it'))
        elif state in ("unknown", "missing"):
            why_unknown = "its run directory is gone" if state == "missing" else "the scheduler did not say"
            missing.append(Missing(job_id=r.id, problem=f"cannot tell whether job {r.id} ({r.name}) is still running "
                                                         f"({why_unknown})",
                                   fix=f'patrol(job_ids=["{r.id}"]) to settle its state, or job_cancel(job_id="{r.id}")',
                                   loss=lose, loss_kind="unverified"))
        if m is None:
            missing.append(Missing(job_id=r.id, problem=f"job {r.id} ({r.name}) has no verified pull (no manifest)",
                                   fix=verify, loss=lose, loss_kind="unverified"))
            continue
        if not req:
            missing.append(Missing(job_id=r.id, problem=f"job {r.id} ({r.name}) declared no outputs: there is nothing "
                                                         "the gate can verify",
                                   fix="if that is true, a human accepts it: request_teardown(..., accept_loss=True) "
                                       f"puts 'job {r.id} keeps nothing' in the phrase",
                                   loss=f"job {r.id} keeps nothing", loss_kind="keeps_nothing"))
            continue
        gaps = uncovered(req, m)
        if gaps:
            missing.append(Missing(job_id=r.id, problem=f"manifest #{m.id} of job {r.id} does not cover its required "
                                                         f"outputs {', '.join(gaps)} (fixed at launch)",
                                   fix=verify, loss=lose, loss_kind="unverified"))
            continue
        if not m.all_ok:
            missing.append(Missing(job_id=r.id, problem=f"the latest manifest #{m.id} of job {r.id} is not all_ok "
                                                         f"(counts {m.manifest.counts})", fix=verify,
                                   loss=lose, loss_kind="unverified"))
        elif not m.manifest.checked:
            # a plain `pull` proves the bytes arrived, not that the checkpoints load: not Iron-Law evidence
            missing.append(Missing(job_id=r.id, problem=f"manifest #{m.id} of job {r.id} comes from a pull without "
                                                         "load checks", fix=verify, loss=lose,
                                   loss_kind="unverified"))
        elif absent(req, m) == _norm(req) and not _kept_elsewhere(r, m):
            missing.append(Missing(job_id=r.id, problem=f"job {r.id} ({r.name}) wrote nothing under its required "
                                                         f"outputs ({', '.join(req)}): they do not exist on the machine, "
                                                         "so there is nothing to keep",
                                   fix="if that is right, a human accepts it: request_teardown(..., accept_loss=True) "
                                       f"puts 'job {r.id} keeps nothing' in the phrase; if the job wrote elsewhere, "
                                       f"verify_artifacts(job_id=\"{r.id}\", paths=[<where it wrote>])",
                                   loss=f"job {r.id} keeps nothing", loss_kind="keeps_nothing"))
        if state == "running" and allow_running:
            continue
        why = stale_reason(m, newest)
        if why:
            missing.append(Missing(job_id=r.id, problem=f"manifest #{m.id} of job {r.id} is stale: {why}",
                                   fix=verify, loss=lose, loss_kind="unverified"))
    return Gate(host=host, allow_running=allow_running, jobs=gate_jobs, missing=missing, running=running,
                unknown=list(unknown or []), endpoints=list(endpoints or []))


def settle(gate: Gate, *, accept_loss: bool) -> Gate:
    """With `accept_loss`, every Missing that only loses results moves to `accepted` (the phrase will name it);
    what is not a loss (a job still running without allow_running) stays and keeps the gate shut."""
    if not accept_loss:
        return gate
    gate.accept_loss = True
    gate.accepted = [m for m in gate.missing if m.loss]
    gate.missing = [m for m in gate.missing if not m.loss]
    return gate


def loss_phrase(gate: Gate) -> str:
    """The words appended to the confirmation phrase: every loss the human accepts, by name."""
    if not gate.accepted:
        return ""
    unverified = [m.loss for m in gate.accepted if m.loss_kind in ("unverified", "unregistered", "unreachable")]
    nothing = [m.loss for m in gate.accepted if m.loss_kind == "keeps_nothing"]
    parts: list[str] = []
    if unverified:
        items = [x.removeprefix("unverified results ") for x in dict.fromkeys(u for u in unverified if u)]
        parts.append("lose unverified results " + ", ".join(items))
    if nothing:
        parts.append("accept that " + ", ".join(dict.fromkeys(n for n in nothing if n)))
    return " and " + " and ".join(parts)


def check_identity(gate: Gate, platform: str, instance_id: str, method: str) -> Gate:
    """Is the machine the gate probed the one the meter-stop will hit? Proven when it reports its own id;
    a machine that reports ANOTHER id refuses the teardown outright (no human can accept stopping the wrong
    machine); otherwise the human is told 'instance identity unproven'."""
    if method in ("none", "cli"):
        gate.identity_check, gate.identity_detail = "not_applicable", ""
        return gate
    verdict, detail = identity_verdict(platform, instance_id, gate.reported_env)
    gate.identity_check, gate.identity_detail = verdict, detail
    for alias, env in gate.alias_reports.items():  # an alias of this identity that reaches ANOTHER machine
        other, why = identity_verdict(platform, instance_id, env)
        if other == "contradicted":
            verdict, detail = other, f"alias {alias}: {why}"
    if verdict == "contradicted":
        raise GateRefused(f"teardown of {gate.host} refused: {detail}",
                          hint="check the instance id in the provider console; register the right one under a new "
                               "host name (an id of a host with jobs cannot be changed). Nothing was stopped.",
                          data={"missing": [{"job_id": "", "problem": detail, "fix": "register the right instance id"}]})
    return gate


def require(gate: Gate) -> Gate:
    if gate.missing:
        lines = [f"- {m.problem} → {m.fix}" for m in gate.missing]
        acceptable = [m.loss for m in gate.missing if m.loss]
        tail = ""
        if acceptable and not gate.accept_loss:
            tail = ("\nOnly a human may accept these losses instead: " + "; ".join(dict.fromkeys(
                a for a in acceptable if a)) + " (request_teardown(..., accept_loss=True) names them in the phrase).")
        raise GateRefused(f"teardown of {gate.host} refused by the Iron-Law gate:\n" + "\n".join(lines) + tail,
                          hint="do the calls listed, then request_teardown again; nothing was stopped",
                          data={"missing": [m.model_dump() for m in gate.missing]})
    return gate
