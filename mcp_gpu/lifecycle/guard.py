"""A guard ON the box that keeps the meter honest when the agent, the laptop or the server is gone.

Rules: a deadline (max hours) and idle (no job process and every GPU idle) for N minutes. When one fires, the
guard SIGTERMs every mcp-gpu job group on the box, waits the grace for their checkpoints, SIGKILLs what is left
(recorded), then calls only the platform's NON-destructive stop verb from inside the box — and only where the
platform profile says the storage holding the jobs' outputs survives a stop. Anywhere else it writes a loud
NOTICE and stops nothing. It never destroys or terminates: the verb table below has no destroy verb.

Arming is itself a future stop, so it needs the human (form elicitation, or `mcp-gpu guard arm` at a terminal);
reading a guard's status never does. Every firing and refusal is logged on the box and pulled into the audit log
at the next contact (`guard_status`, which patrol and wait call for hosts with a guard).
"""

from __future__ import annotations

import base64
import importlib.resources
import math
import os
import posixpath
import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcp_gpu.app import App
from mcp_gpu.errors import CommandFailed, ConfigError
from mcp_gpu.profiles import Profile, load_profile
from mcp_gpu.providers import API_KEY_ENV, base_url_env
from mcp_gpu.store import audit_log
from mcp_gpu.store import guards as guards_repo
from mcp_gpu.store import hosts as hosts_repo
from mcp_gpu.store import jobs as jobs_repo
from mcp_gpu.untrusted import clean, clean_line

DEFAULT_GRACE_S = 120.0
DEFAULT_INTERVAL_S = 30.0
GPU_IDLE_PCT = 5
MAX_HOURS = 24 * 14


@dataclass(frozen=True)
class StopVerb:
    """A platform's documented NON-destructive meter stop, callable from inside the instance with its API key."""

    method: str
    path: str            # with {id}
    base: str
    in_box_key_env: str  # the variable the platform itself sets inside the instance, used when none is sent
    body: str = ""
    doc: str = ""


# Only stop verbs live here, never destroy/terminate: a guard cannot delete a machine whatever its rules say.
STOP_VERBS: dict[str, StopVerb] = {
    "runpod": StopVerb("POST", "/pods/{id}/stop", "https://rest.runpod.io/v1", "RUNPOD_API_KEY",
                       doc="RunPod REST 'Stop a Pod'; /workspace (volume) survives, / does not"),
    "vastai": StopVerb("PUT", "/api/v0/instances/{id}/", "https://console.vast.ai", "CONTAINER_API_KEY",
                       body='{"state": "stopped"}', doc="vast.ai 'manage instance' state=stopped; disk kept, billed"),
    "paperspace": StopVerb("PATCH", "/machines/{id}/stop", "https://api.paperspace.com/v1", "PAPERSPACE_API_KEY",
                           doc="Paperspace 'Stop a machine'"),
}


class GuardRules(BaseModel):
    max_hours: float | None = Field(default=None, description="stop after this many hours from arming")
    idle_minutes: float | None = Field(default=None, description="stop after no job ran and the GPUs idled this long")
    grace_s: float = Field(default=DEFAULT_GRACE_S, description="seconds between SIGTERM and SIGKILL for checkpoints")
    interval_s: float = Field(default=DEFAULT_INTERVAL_S, description="seconds between the guard's checks")


class GuardPlan(BaseModel):
    host: str
    platform: str
    instance_id: str | None
    rules: GuardRules
    deadline: float | None
    stop: Literal["api", "notice"]
    method: str
    url: str
    why_notice: str | None = None
    key_source: str
    summary: str = Field(description="what the guard will do, in one paragraph for the human")


class GuardEvent(BaseModel):
    at: str
    event: str
    detail: str


class GuardStatus(BaseModel):
    host: str
    present: bool
    alive: bool = False
    state: str = ""
    deadline: str | None = None
    time_left_s: float | None = None
    stop: str = ""
    new_events: list[GuardEvent] = Field(default_factory=list)
    notice: str = ""
    line: str = ""


def _script(name: str) -> str:
    return importlib.resources.files("mcp_gpu.probes").joinpath(name).read_text()


def _tier_of(profile: Profile, path: str) -> tuple[str, bool | None]:
    """The storage tier a path lives on (longest path prefix) and whether it survives a stop. Tiers that share a
    path must all survive for the path to count as surviving."""
    best: list[Any] = []
    best_len = -1
    for t in profile.head.storage.tiers:
        root = t.path.rstrip("/") or "/"
        if path == root or path.startswith(root.rstrip("/") + "/") or root == "/":
            n = len(root)
            if n > best_len:
                best, best_len = [t], n
            elif n == best_len:
                best.append(t)
    if not best:
        return "an unknown disk", None
    survives = all(t.survives_stop for t in best) if all(t.survives_stop is not None for t in best) else None
    return " / ".join(t.name for t in best), survives


def _outputs(app: App, host: str) -> list[str]:
    out: list[str] = []
    for j in jobs_repo.list_jobs(app.store, host=host):
        for o in j.spec.get("outputs") or [f"{j.workdir.rstrip('/')}/checkpoints"]:
            o = str(o)
            out.append(o if o.startswith(("/", "~")) else posixpath.join(j.workdir, o))
    return list(dict.fromkeys(out))


def plan_guard(app: App, host: str, rules: GuardRules) -> GuardPlan:
    """Decide what a guard on `host` would do. Changes nothing."""
    if rules.max_hours is None and rules.idle_minutes is None:
        raise ConfigError("a guard needs a rule: max_hours, idle_minutes, or both",
                          hint="e.g. max_hours=8 (hard deadline) and idle_minutes=30 (after the last job ends)")
    for name, v, hi in (("max_hours", rules.max_hours, MAX_HOURS), ("idle_minutes", rules.idle_minutes, 7 * 24 * 60),
                        ("grace_s", rules.grace_s, 3600), ("interval_s", rules.interval_s, 600)):
        if v is not None and not (math.isfinite(v) and 0 < v <= hi):
            raise ConfigError(f"{name}={v} is out of range (0, {hi}]", hint=f"pass a positive {name} up to {hi}")
    rec = hosts_repo.find(app.store, host)
    platform = (rec.platform if rec else None) or ("local" if host == "local" else "generic-ssh")
    iid = rec.instance_id if rec else None
    deadline = time.time() + rules.max_hours * 3600 if rules.max_hours else None
    verb = STOP_VERBS.get(platform)
    why: str | None = None
    method, url = "none", ""
    if verb is None:
        why = f"{platform} has no stop verb callable from inside the box (mcp-gpu never destroys from a guard)"
    elif not iid:
        why = f"host {host} has no registered instance id, so the guard cannot name what to stop"
    else:
        profile = load_profile(platform)
        for out in _outputs(app, host):
            tier, survives = _tier_of(profile, out)
            if survives is not True:
                why = (f"the output {out} lives on {tier}, which a {platform} stop "
                       f"{'does not keep' if survives is False else 'may not keep'}")
                break
        base = os.environ.get(base_url_env(platform)) or verb.base
        method, url = verb.method, base.rstrip("/") + verb.path.format(id=iid)
    server_key = API_KEY_ENV.get(platform)
    have_key = bool(server_key and (os.environ.get(server_key) or "").strip())
    if why is None and not have_key:
        key_source = f"the platform's own {verb.in_box_key_env if verb else '?'} inside the instance"
    else:
        inbox = verb.in_box_key_env if verb else "?"
        key_source = (f"the platform's own {inbox} inside the instance when the box has it; otherwise {server_key}, "
                      "sent over a pipe and kept in the guard's memory (root on the box can read it)"
                      if have_key else "none")
    stop: Literal["api", "notice"] = "notice" if why else "api"
    rule_txt = " or ".join(x for x in (
        f"at {iso_time(deadline)} ({rules.max_hours:g} h from now)" if deadline else "",
        f"after {rules.idle_minutes:g} min with no job and idle GPUs" if rules.idle_minutes else "") if x)
    act = (f"then {method} {url} — a {platform} STOP (storage kept; it never destroys), key from {key_source}"
           if stop == "api" else f"then it only writes a loud NOTICE and stops nothing ({why}); the machine keeps "
                                 "billing until a human stops it")
    summary = (f"Guard on {host}: {rule_txt}, it sends SIGTERM to every mcp-gpu job, waits {rules.grace_s:g} s for "
               f"their checkpoints, SIGKILLs what is left, {act}. It runs on the box and outlives this session.")
    return GuardPlan(host=host, platform=platform, instance_id=iid, rules=rules, deadline=deadline, stop=stop,
                     method=method, url=url, why_notice=why, key_source=key_source, summary=summary)


def iso_time(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


async def arm_guard(app: App, plan: GuardPlan, *, approved_by: str, run_root: str | None = None,
                    guard_dir: str | None = None) -> GuardStatus:
    """Start the guard on the box (replacing an older one). Call only after a human approved `plan.summary`."""
    t = await app.transport(plan.host)
    r = plan.rules
    verb = STOP_VERBS.get(plan.platform)
    server_key = API_KEY_ENV.get(plan.platform, "")
    key = (os.environ.get(server_key) or "").strip() if plan.stop == "api" and server_key else ""
    args = [guard_dir or "", run_root or "", _script("guard.sh"),
            str(int(plan.deadline or 0)), str(int(r.idle_minutes * 60) if r.idle_minutes else 0), str(int(r.grace_s)),
            str(r.interval_s), str(GPU_IDLE_PCT), plan.method if plan.stop == "api" else "none",
            plan.url or (plan.why_notice or "no stop verb"), verb.body if verb and plan.stop == "api" else "",
            verb.in_box_key_env if verb else ""]
    res = await t.run_script(_script("guard_start.sh"), args, stdin=key + "\n", timeout=60)
    if not res.ok:
        raise CommandFailed(f"{plan.host}: the guard did not start (exit {res.exit_status})",
                            hint="check that the host's home is writable and bash/setsid exist",
                            data={"stderr": [clean_line(x) for x in res.tail(5)]})
    kv = dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)
    gd = kv.get("guard_dir", "")
    stop_desc = f"{plan.method} {plan.url}" if plan.stop == "api" else f"notice only: {plan.why_notice}"
    if plan.stop == "api" and kv.get("curl") != "1":
        stop_desc += " (curl is missing on the box: it will only write a notice)"
    guards_repo.record(app.store, plan.host, guard_dir=gd, pid=int(kv["pid"]) if kv.get("pid", "").isdigit() else None,
                       # the deadline the box enforces (whole seconds), so time left reads the same on both sides
                       deadline=float(int(plan.deadline)) if plan.deadline else None,
                       idle_s=r.idle_minutes * 60 if r.idle_minutes else None,
                       grace_s=r.grace_s, interval_s=r.interval_s, stop=stop_desc)
    audit_log.append(app.store, "guard_armed", action="guard", target=plan.host,
                     detail={"approved_by": approved_by, "summary": plan.summary, "guard_dir": gd})
    return await guard_status(app, plan.host)


async def guard_status(app: App, host: str, *, disarm: bool = False) -> GuardStatus:
    """Read the guard's state and new events (pulled into the audit log), or disarm it."""
    row = guards_repo.find(app.store, host)
    if row is None:
        return GuardStatus(host=host, present=False, line=f"{host}: no guard armed")
    t = await app.transport(host)
    res = await t.run_script(_script("guard_status.sh"), [row["guard_dir"], str(row["events_offset"]),
                                                          "disarm" if disarm else ""], timeout=30)
    kv = dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)
    if kv.get("present") != "1":
        return GuardStatus(host=host, present=False, line=f"{host}: the guard's directory is gone from the box")

    def b64(name: str) -> str:
        try:
            return clean(base64.b64decode(kv.get(name, ""), validate=False).decode("utf-8", "replace"))
        except ValueError:
            return ""

    events: list[GuardEvent] = []
    for line in b64("events_b64").splitlines():
        at, _, rest = line.partition(" ")
        ev, _, detail = rest.partition(" ")
        if at.isdigit() and ev:
            events.append(GuardEvent(at=iso_time(float(at)), event=clean_line(ev, 40), detail=clean_line(detail)))
    for e in events:
        audit_log.append(app.store, "guard_event", action=f"guard:{e.event}", target=host,
                         detail={"at": e.at, "detail": e.detail})
    size = int(kv.get("events_size", "0")) if kv.get("events_size", "").isdigit() else row["events_offset"]
    state = clean_line(b64("state_b64"), 300).strip()
    alive = kv.get("alive") == "1"
    if disarm:
        audit_log.append(app.store, "guard_disarmed", action="guard", target=host, detail={"alive_after": alive})
        state = "disarmed" if not alive else state
    guards_repo.advance(app.store, host, events_offset=size, state=state.split(" ", 1)[0] if state else row["state"])
    now = float(kv["now"]) if kv.get("now", "").isdigit() else time.time()
    left = max(0.0, row["deadline"] - now) if row["deadline"] and alive else None
    notice = b64("notice_b64").strip()
    word = "ALIVE" if alive else "NOT RUNNING"
    shown = state or "no state yet"
    if state.startswith("armed"):
        fields = dict(x.split("=", 1) for x in state.split()[1:] if "=" in x)
        idle = fields.get("idle_since", "0")
        shown = "armed, " + ("jobs running" if fields.get("jobs") == "busy" else "no job running") + (
            f", idle since {iso_time(float(idle))}" if idle.isdigit() and idle != "0" else "")
    line = (f"{host}: guard {word} ({shown})"
            + (f", deadline {iso_time(row['deadline'])} ({left / 3600:.1f} h left)" if left is not None else "")
            + (f"; NOTICE: {notice.splitlines()[-1]}" if notice else ""))
    return GuardStatus(host=host, present=True, alive=alive, state=state, deadline=iso_time(row["deadline"])
                       if row["deadline"] else None, time_left_s=left, stop=row["stop"], new_events=events,
                       notice=notice, line=line)


async def all_guard_status(app: App, hosts: list[str]) -> list[GuardStatus]:
    """Status of every armed guard among `hosts` (patrol and wait show them). A host that does not answer is
    reported as such; it never fails the caller."""
    from mcp_gpu.errors import GpuError

    out: list[GuardStatus] = []
    for h in hosts:
        if guards_repo.find(app.store, h) is None:
            continue
        try:
            out.append(await guard_status(app, h))
        except GpuError as err:
            out.append(GuardStatus(host=h, present=True, line=f"{h}: guard status unknown ({err.message})"))
    return out
