"""The next step, computed from a job's facts in one place, for the agent (tool calls) or the person (CLI verbs).

Everything that tells a reader what to do next about a job (patrol's `next`, launch's `next`, the CLI's
`next:` lines) goes through `job_next` (one job) and `combine` (a host or a whole report), so advice cannot
drift between call sites: a cancelled job is never "patrol again", a job whose latest manifest is all_ok,
load-checked and fresh is never "verify again", and a job that declared no outputs is told how to name them.

`Facts` are plain data; `job_next` and `combine` are pure. `facts_from_patrol` gathers the facts of a patrol
row from the registry (declared outputs, latest manifest); `to_cli` rewrites tool-call hints raised below the
tool layer into CLI verbs for the terminal.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from mcp_gpu.lifecycle.patrol_eval import JobPatrol
    from mcp_gpu.models import JobRecord
    from mcp_gpu.store import Store

Audience = Literal["mcp", "cli"]
# none: no manifest · ok: all_ok, load-checked, fresh · not_ok: latest is not all_ok · unchecked: a pull without
# load checks · stale: the remote has a checkpoint newer than the manifest saw
ManifestStatus = Literal["none", "ok", "not_ok", "unchecked", "stale"]
BAD = ("failed", "lost", "preempted", "stalled")
PLACEHOLDER_PATH = "/path/to/results"

# when a failure comes without a remedy of its own: the fixed next step per triage class
_CLASS_FIX: dict[str, str] = {
    "cuda_oom": "lower the batch size or sequence length, or enable gradient checkpointing",
    "host_oom_killed": "the host (cgroup) killed it for memory: fewer dataloader workers or a smaller prefetch",
    "nan_inf": "lower the learning rate, enable gradient clipping, check the data for NaN",
    "nccl_timeout": "a rank hung or died: check every rank's log; restart from the last checkpoint",
    "disk_full": "free disk space on the host (old checkpoints, caches) before relaunching",
    "inode_exhausted": "free inodes on the host (many small files: pack them) before relaunching",
    "cuda_device_error": "the GPU itself failed (XID/ECC): move to another GPU or machine",
    "dataloader_error": "a dataloader worker crashed: run with num_workers=0 to see the real error",
    "checkpoint_corrupt": "resume from an earlier checkpoint; save atomically (write then rename)",
    "network_stall": "the network stalled: check the host's connectivity and retry from the last checkpoint",
    "ssh_disconnect": "the job died with the SSH session: it must run detached (launch does that)",
    "import_or_config_error": "fix the import or configuration error, then smoke test on CPU",
    "traceback": "read the traceback and fix the code, then smoke test on CPU",
    "time_limit": "the scheduler's time limit ended it: raise the limit or resume from the last checkpoint",
    "lost": "reboot, OOM kill, SIGHUP or a manual kill: check uptime, dmesg and memory.events",
    "stalled": "py-spy dump --pid <pid> tells hung from slow; a hung job needs a restart from its last checkpoint",
}


@dataclass(frozen=True)
class Facts:
    job_id: str
    name: str
    host: str
    state: str  # launching running silent stalled unreachable succeeded failed preempted cancelled lost
    primary: str = "healthy"  # the triage class that explains the state
    remedy: str = ""  # the remedy of the finding behind `primary`, if any
    has_outputs: bool = True  # outputs were declared at launch, or patrol saw a checkpoint
    manifest: ManifestStatus = "none"
    relaunched: str | None = None  # patrol's on_preempt=relaunch started this job id


# -- how each action is written for each audience ------------------------------------------------------------------

def verify(f: Facts, aud: Audience) -> str:
    if f.has_outputs:
        return f'verify_artifacts(job_id="{f.job_id}")' if aud == "mcp" else f"mcp-gpu verify {f.name}"
    if aud == "mcp":
        return f'verify_artifacts(job_id="{f.job_id}", paths=["{PLACEHOLDER_PATH}"])'
    return f"mcp-gpu verify {f.name} --path {PLACEHOLDER_PATH}"


def logs(f: Facts, aud: Audience) -> str:
    return f'job_logs(job_id="{f.job_id}")' if aud == "mcp" else f"mcp-gpu logs {f.name}"


def patrol_again(aud: Audience) -> str:
    return "patrol()" if aud == "mcp" else "mcp-gpu status"


def relaunch(f: Facts, aud: Audience) -> str:
    if aud == "mcp":
        return f'launch_detached(host="{f.host}", name="{f.name}", ...)'
    return f"mcp-gpu launch {f.host} --name {f.name} ... -- COMMAND"


def smoke(aud: Audience) -> str:
    return "smoke_cpu(...)" if aud == "mcp" else "mcp-gpu smoke -- COMMAND"


def cancel(f: Facts, aud: Audience) -> str:
    return f'job_cancel(job_id="{f.job_id}")' if aud == "mcp" else f"mcp-gpu cancel {f.name}"


def teardown(host: str, aud: Audience) -> str:
    return f'request_teardown(host="{host}")' if aud == "mcp" else f"mcp-gpu teardown {host}"


def launch_new(aud: Audience) -> str:
    return "launch_detached(...)" if aud == "mcp" else "mcp-gpu launch HOST --name N --workdir W -- COMMAND"


# -- one job -------------------------------------------------------------------------------------------------------

def _verified(f: Facts) -> bool:
    return f.manifest == "ok"


def _verify_advice(f: Facts, aud: Audience) -> str:
    """What to do about a job's outputs when they are not yet proven safe."""
    why = {"none": "not verified yet", "not_ok": "its latest manifest is NOT all_ok (read its findings, fix, redo)",
           "unchecked": "its latest pull had no load checks", "stale": "a checkpoint newer than its manifest exists",
           "ok": "verified"}[f.manifest]
    if not f.has_outputs:
        return (f"it declared no outputs: if it wrote results, name them: {verify(f, aud)}; otherwise there is "
                "nothing to pull")
    return f"results {why}: {verify(f, aud)} before any teardown"


def job_next(f: Facts, aud: Audience = "mcp") -> str:
    """The next step for one job, for the agent ("mcp": tool calls) or the person ("cli": CLI verbs)."""
    s = f.state
    if f.relaunched:
        return f"relaunched as {f.relaunched} per on_preempt=relaunch: {patrol_again(aud)} to watch it"
    if s == "unreachable":
        return f"the host did not answer: {patrol_again(aud)} later; never cancel or tear down because a host is silent"
    if s in ("launching", "running"):
        extra = f"; {f.remedy}" if f.remedy else ""
        return f"running: {patrol_again(aud)} again in ~30 min{extra}"
    if s == "silent":
        return (f"the log is silent but the job is alive: {f.remedy or 'probably buffered output (python -u)'}; "
                f"check {logs(f, aud)} and {patrol_again(aud)} again sooner")
    if s == "stalled":
        fix = f.remedy or _CLASS_FIX["stalled"]
        return f"stalled: {fix}; read {logs(f, aud)}, then {cancel(f, aud)} and relaunch from its last checkpoint"
    if s == "cancelled":
        if f.has_outputs and not _verified(f):
            return f"cancelled on request: nothing to patrol; to keep what it wrote: {verify(f, aud)}"
        return "nothing: the job was cancelled on request (nothing to patrol" + (
            ", its outputs are verified)" if _verified(f) else ", no outputs to verify)")
    if s == "succeeded":
        if _verified(f):
            return (f"done: results verified (manifest all_ok, load-checked, fresh); nothing left for this job. "
                    f"When every job on {f.host} is verified: {teardown(f.host, aud)}")
        return "succeeded; " + _verify_advice(f, aud)
    if s == "preempted":
        keep = "" if _verified(f) or not f.has_outputs else f"; {verify(f, aud)} keeps what it wrote so far"
        return (f"preempted (not a bug in the job): relaunch with the same name to resume from its newest "
                f"checkpoint: {relaunch(f, aud)}{keep}")
    if s in ("failed", "lost"):
        fix = f.remedy or _CLASS_FIX.get(f.primary) or _CLASS_FIX.get(s) or "read the log before relaunching"
        keep = "" if _verified(f) or not f.has_outputs else f"; {verify(f, aud)} keeps its checkpoints"
        what = f"failed ({f.primary})" if s == "failed" and f.primary not in ("healthy", "") else s
        return (f"{what}: {fix}. Read {logs(f, aud)}; fix, {smoke(aud)}, then {relaunch(f, aud)} — never retry "
                f"blindly{keep}")
    return f"state {s}: read {logs(f, aud)} before doing anything else"


# -- many jobs (a host, or a whole patrol) -----------------------------------------------------------------------

def combine(facts: list[Facts], aud: Audience = "mcp", *, per_job: dict[str, str] | None = None) -> str:
    """One next step for a report: the most urgent job first. `per_job` overrides a job's own text (patrol's
    relaunch policy writes its own)."""
    def text(f: Facts) -> str:
        return (per_job or {}).get(f.job_id) or job_next(f, aud)

    def more(n: int) -> str:
        return f" (+{n} more)" if n else ""

    if not facts:
        return f"nothing running: {launch_new(aud)} starts a job"
    bad = [f for f in facts if f.state in BAD and not f.relaunched]
    if bad:
        return f"{bad[0].name}: {text(bad[0])}{more(len(bad) - 1)}"
    if any(f.state == "unreachable" for f in facts):
        return (f"some hosts did not answer: {patrol_again(aud)} again later; do not cancel or tear down on that "
                "basis")
    silent = [f for f in facts if f.state == "silent"]
    if silent:
        return f"{silent[0].name}: {text(silent[0])}{more(len(silent) - 1)}"
    todo = [f for f in facts if f.state in ("succeeded", "cancelled") and f.has_outputs and not _verified(f)]
    if todo:
        return f"{todo[0].name}: {text(todo[0])}{more(len(todo) - 1)}"
    if any(f.state in ("launching", "running") or f.relaunched for f in facts):
        return f"all running: {patrol_again(aud)} again in ~30 min"
    done = [f for f in facts if f.state == "succeeded"]
    unnamed = [f for f in done if not f.has_outputs]
    if unnamed:
        return f"{unnamed[0].name}: {text(unnamed[0])}{more(len(unnamed) - 1)}"
    if done:
        hosts = sorted({f.host for f in done})
        return ("every finished job's results are verified: nothing to do; when you are done with "
                + ", ".join(hosts) + ": " + "; ".join(teardown(h, aud) for h in hosts))
    return "nothing to do: no job is active and none has results waiting"


# -- facts from the registry ---------------------------------------------------------------------------------------

def declared_outputs(rec: JobRecord) -> list[str]:
    """The outputs the job declared at launch. Launch fills in `<workdir>/checkpoints` when none were given;
    that default is a guess, not a declaration (unless the job is known to have written there)."""
    spec = rec.spec or {}
    if "outputs_declared" in spec:
        return [str(o) for o in spec.get("outputs") or []] if spec["outputs_declared"] else []
    outs = [str(o) for o in spec.get("outputs") or []]
    default = rec.workdir.rstrip("/") + "/checkpoints"
    return [] if outs == [default] else outs


def _age_s(at: str) -> float:
    try:
        return max(0.0, time.time() - datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return float("inf")


def manifest_status(store: Store, job_id: str, *, ckpt_age_s: float | None = None) -> ManifestStatus:
    """The status of a job's latest manifest. With the age of the newest output file patrol saw (on the
    host's own clock), a manifest taken before that file was last written is stale. Ages are durations, so
    a skew between the two clocks does not matter; the teardown gate makes the exact check."""
    from mcp_gpu.artifacts.manifest import latest_manifest

    m = latest_manifest(store, job_id=job_id)
    if m is None:
        return "none"
    if not m.all_ok:
        return "not_ok"
    if not m.manifest.checked:
        return "unchecked"
    # the manifest's `at` has one-second resolution: allow 2 s
    if ckpt_age_s is not None and ckpt_age_s + 2.0 < _age_s(m.at):
        return "stale"
    return "ok"


def patrol_state(r: JobPatrol) -> str:
    """Patrol's state, with `silent` for a running job whose log froze while its GPU stays busy."""
    if r.state == "running" and any(f.cls == "network_stall" and f.severity == "warn" for f in r.findings):
        return "silent"
    return r.state


def facts_from_patrol(store: Store, r: JobPatrol, rec: JobRecord | None = None) -> Facts:
    from mcp_gpu.store import jobs as jobs_repo

    rec = rec or jobs_repo.find(store, r.job_id)
    state = patrol_state(r)
    top = next((f for f in r.findings if f.severity in ("error", "critical")), None) or next(
        (f for f in r.findings if f.severity == "warn"), None)
    remedy = top.remedy if top is not None else ""
    ck = r.checkpoint
    status = manifest_status(store, r.job_id, ckpt_age_s=ck.age_s if ck else None)
    has_outputs = bool(declared_outputs(rec)) if rec is not None else True
    return Facts(job_id=r.job_id, name=r.name, host=r.host, state=state, primary=r.primary, remedy=remedy or "",
                 has_outputs=has_outputs or ck is not None or status != "none", manifest=status,
                 relaunched=r.relaunched)


def patrol_job_next(store: Store, rec: JobRecord, r: JobPatrol, aud: Audience = "mcp") -> str:
    return job_next(facts_from_patrol(store, r, rec), aud)


def patrol_next(store: Store, reports: list[JobPatrol], aud: Audience = "mcp") -> str:
    """The report-level `next` of a patrol; for the agent a job's own `next` (which the relaunch policy may
    have rewritten) is kept."""
    facts = [facts_from_patrol(store, r) for r in reports]
    per_job = {r.job_id: r.next for r in reports if r.next} if aud == "mcp" else None
    return combine(facts, aud, per_job=per_job)


# -- launch --------------------------------------------------------------------------------------------------------

def launch_next(*, job_id: str, name: str, host: str, backend: str, state: str, reused: bool, attempt: int,
                cause: str | None, has_outputs: bool, aud: Audience = "mcp") -> str:
    f = Facts(job_id=job_id, name=name, host=host, state=state, has_outputs=has_outputs)
    if reused:
        return (f"`{name}` is already running on {host} ({job_id}, attempt {attempt}); nothing was started. "
                f"Watch it with {patrol_again(aud)} or {logs(f, aud)}.")
    if state in ("running", "launching"):
        return (f"running under {backend} on {host}. Check progress with {patrol_again(aud)} every ~30 min or "
                f"{logs(f, aud)}; stop it with {cancel(f, aud)}.")
    if state == "failed":
        return (f"it failed in its first seconds ({cause}). Fix it, {smoke(aud)}, and launch again with the same "
                f"name (attempt {attempt + 1}).")
    if state == "succeeded":
        return "it already finished with exit 0; " + _verify_advice(f, aud)
    return job_next(f, aud)


# -- error hints for the terminal ----------------------------------------------------------------------------------

_Q = r"""["']([^"']+)["']"""
_CLI_REWRITES: list[tuple[re.Pattern[str], str]] = [
    # a hint that already gives both forms keeps only the CLI one
    (re.compile(r"register_host\([^)]*\)\s+or\s+`(mcp-gpu hosts add [^`]*)`"), r"`\1`"),
    (re.compile(r"register_host\(name=" + _Q + r",\s*target=" + _Q + r"[^)]*\)"),
     r"`mcp-gpu hosts add \1 \2 --platform P --instance-id ID`"),
    (re.compile(r"request_teardown\(host=" + _Q + r"[^)]*\)"), r"mcp-gpu teardown \1"),
    (re.compile(r"verify_artifacts\(job_id=" + _Q + r",\s*paths=\[" + _Q + r"\]\)"), r"mcp-gpu verify \1 --path \2"),
    (re.compile(r"verify_artifacts\(job_id=" + _Q + r"\)"), r"mcp-gpu verify \1"),
    (re.compile(r"patrol\(job_ids=\[" + _Q + r"\]\)"), r"mcp-gpu patrol \1"),
    (re.compile(r"job_cancel\(job_id=" + _Q + r"\)"), r"mcp-gpu cancel \1"),
    (re.compile(r"job_logs\(job_id=" + _Q + r"\)"), r"mcp-gpu logs \1"),
    (re.compile(r"request_teardown\(\.\.\., allow_running=True\)"), "mcp-gpu teardown HOST --allow-running"),
    (re.compile(r"\bpass job_id=" + _Q), r"give the job: mcp-gpu verify JOB (id or name, e.g. \1)"),
    (re.compile(r"\brun verify_artifacts\b"), "run `mcp-gpu verify JOB`"),
    (re.compile(r"\bverify_artifacts\b(?!\()"), "`mcp-gpu verify`"),
    (re.compile(r"\bA new request_teardown\b"), "A new `mcp-gpu teardown`"),
    (re.compile(r"\brequest_teardown\b(?!\()"), "`mcp-gpu teardown`"),
    (re.compile(r"\bjob_cancel again with this token\b[^.]*"), "the same `mcp-gpu cancel` (it asks for the phrase)"),
    (re.compile(r"\bjob_list\b"), "`mcp-gpu jobs`"),
    (re.compile(r"\bjob_logs\b(?!\()"), "`mcp-gpu logs`"),
    (re.compile(r"\bjob_cancel\b(?!\()"), "`mcp-gpu cancel`"),
    (re.compile(r"\bsmoke_cpu\b"), "`mcp-gpu smoke`"),
    (re.compile(r"\bregister_host\b"), "`mcp-gpu hosts add`"),
    (re.compile(r"\blaunch_detached\b"), "`mcp-gpu launch`"),
]


def to_cli(text: str) -> str:
    """Rewrite the tool calls in a hint written for the agent into the CLI verbs a person types."""
    for pat, repl in _CLI_REWRITES:
        text = pat.sub(repl, text)
    return text.replace("`mcp-gpu jobs` / `mcp-gpu jobs`", "`mcp-gpu jobs`")
