"""Phase 3, launch: an immutable run script, detached under tmux/nohup/Slurm/Kubernetes, and a first-minute probe.

Idempotent: a job with the same name on the same host that is still running (checked on the host, not only
in the registry) is returned, never started twice. Launching a finished name again is a new attempt linked
to the previous one. Secrets are named, read from the server's own environment, sent over stdin, and never
stored, logged or returned.
"""

from __future__ import annotations

import asyncio
import importlib.resources
import json
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, Field

from mcp_gpu import log
from mcp_gpu.app import App
from mcp_gpu.backends import Backend, LaunchSpec, Observation, RunLayout
from mcp_gpu.backends._env import allowed_env, check_job_env_name
from mcp_gpu.backends.registry import choose_backend
from mcp_gpu.backends.wrapper import ENV_NAME_RE, PREPARE, WRAPPER, command_sha, normalise_command, parse_kv
from mcp_gpu.errors import CommandFailed, ConfigError, GateRefused, GpuError
from mcp_gpu.lifecycle import next_step
from mcp_gpu.lifecycle.jobs import clean_lines, refresh_job, state_from
from mcp_gpu.models import Finding, JobRecord, JobState, check_name, finding, iso
from mcp_gpu.store import jobs as jobstore
from mcp_gpu.transport import Completed, Transport, monotonic

_log = log.get("mcp_gpu.launch")
_locks: dict[tuple[str, str], asyncio.Lock] = {}
FIRST_LINES = 20
LAUNCH_GRACE_S = 300.0
"""A `launching` record younger than this belongs to a launcher still at work (reuse it); an older one was
left by a launcher that died, and is refreshed like any other."""


class LaunchResult(BaseModel):
    job_id: str
    name: str
    host: str
    backend: str
    state: JobState
    run_dir: str
    log: str
    reused: bool = Field(description="an attempt with this name was already running: nothing new was started")
    attempt: int
    previous_id: str | None = None
    script_sha: str
    exit_code: int | None = None
    exit_signal: str | None = None
    first_lines: list[str] = Field(default_factory=list)
    last_lines: list[str] = Field(default_factory=list, description="the end of the log when it is longer")
    findings: list[Finding] = Field(default_factory=list)
    next: str


def _check_text(value: str, what: str, *, allow_newline: bool = False) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{what} is empty", hint=f"give a {what}")
    if "\0" in value or (not allow_newline and ("\n" in value or "\r" in value)):
        raise ConfigError(f"{what} {value!r} contains a NUL byte or a line break",
                          hint=f"use a plain {what} on one line")
    return value


def check_env_name(name: str) -> str:
    """A name a job may set: well formed, and not one the wrapper or its shell uses (attack 10)."""
    if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name):
        raise ConfigError(f"invalid environment variable name {name!r}",
                          hint="use letters, digits and _ only, not starting with a digit (e.g. HF_TOKEN)")
    return check_job_env_name(name)


class CleanEnvTransport:
    """This machine's transport, but every command starts from the allow-listed environment (`env -i NAME=value
    ... argv`): a local job (and the tmux server its first launch starts) inherits no provider key, token or
    MCP_GPU_* setting from the server, only what is allow-listed plus the env and secrets it names (attack 7)."""

    def __init__(self, inner: Transport) -> None:
        self._inner = inner
        self.host = inner.host
        self.kind = inner.kind

    def _argv(self, argv: Sequence[str]) -> list[str]:
        return ["env", "-i", *(f"{k}={v}" for k, v in sorted(allowed_env().items())), *argv]

    async def run(self, argv: Sequence[str], *, stdin: bytes | str | None = None, timeout: float | None = None,
                  check: bool = False) -> Completed:
        return await self._inner.run(self._argv(argv), stdin=stdin, timeout=timeout, check=check)

    async def run_script(self, script: str, args: Sequence[str] = (), *, stdin: bytes | str | None = None,
                         timeout: float | None = None, check: bool = False) -> Completed:
        return await self.run(["bash", "-c", script, "mcp-gpu", *args], stdin=stdin, timeout=timeout, check=check)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class SandboxedTransport(CleanEnvTransport):
    """This machine's transport for a command that runs a program the agent named (audit_env's `python`): the
    allow-listed environment, inside the sandbox that hides the state dir, the key files and the tmux servers."""

    def __init__(self, inner: Transport, prefix: Sequence[str]) -> None:
        super().__init__(inner)
        self._prefix = list(prefix)

    def _argv(self, argv: Sequence[str]) -> list[str]:
        return [*self._prefix, *super()._argv(argv)]


def for_agent_program(app: App, t: Transport, keep: Sequence[str] = ()) -> Transport:
    """`t` unchanged for a remote host; on this machine, sandboxed with a clean environment."""
    if t.kind != "local":
        return t
    return SandboxedTransport(t, local_sandbox(app, list(keep)))  # type: ignore[return-value]


def teardown_keys() -> frozenset[str]:
    """The provider API keys that stop meters (profiles whose teardown is an API call): what guards the Iron Law."""
    from mcp_gpu.profiles import all_profiles

    return frozenset(n for p in all_profiles() if p.head.teardown.method == "api" for n in p.head.credentials.env)


def read_secrets(names: list[str] | None) -> dict[str, str]:
    """Values of the named variables from this server's environment; registered for redaction. A provider key
    that can stop a meter is never handed to a job: a job that had it could destroy machines past the gate."""
    out: dict[str, str] = {}
    guarded = teardown_keys() if names else frozenset()
    for name in names or []:
        check_env_name(name)
        if name in guarded:
            raise ConfigError(f"{name} is the provider key mcp-gpu stops machines with: it is not handed to jobs",
                              hint="a job never needs the key that can delete machines; if it really does, give "
                                   "the job its own scoped key under another name")
        value = os.environ.get(name)
        if value is None:
            raise ConfigError(f"secret env var {name} is not set in the mcp-gpu server's environment",
                              hint=f"export {name} where the server (or the CLI) runs, then launch again; "
                                   "never pass secret values as arguments")
        if "\0" in value:
            raise ConfigError(f"the value of {name} contains a NUL byte", hint="environment values cannot hold NUL")
        log.register_secret(value)
        out[name] = value
    return out


def _traceback_findings(lines: list[str], exit_code: int | None, exit_signal: str | None) -> list[Finding]:
    """Findings from the triage engine when present, else a minimal local traceback detector."""
    try:
        from mcp_gpu.triage.engine import triage
    except ImportError:
        triage = None  # type: ignore[assignment]
    if triage is not None:
        return list(triage(lines, exit_code=exit_code, exit_signal=exit_signal).findings)
    start = next((i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last)")), None)
    if start is None:
        return []
    tail = lines[start:]
    last = next((ln for ln in reversed(tail) if ln and not ln.startswith((" ", "\t"))), tail[-1])
    cls = "import_or_config_error" if last.startswith(("ModuleNotFoundError", "ImportError")) else "traceback"
    return [finding(cls, "error", last[:200], evidence=tail[-12:], remedy="fix the error and launch again")]


def _has_traceback(lines: list[str]) -> bool:
    return any(ln.startswith("Traceback (most recent call last)") for ln in lines)


async def _log_lines(t: Transport, layout: RunLayout) -> list[str]:
    data = await t.read_tail(layout.log, 256 * 1024)
    lines = clean_lines(data)  # remote text: secrets scrubbed, escape and control sequences stripped
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def next_for(res: LaunchResult, has_outputs: bool, aud: next_step.Audience = "mcp") -> str:
    return next_step.launch_next(job_id=res.job_id, name=res.name, host=res.host, backend=res.backend,
                                 state=res.state.value, reused=res.reused, attempt=res.attempt,
                                 cause=res.findings[0].title if res.findings else f"exit {res.exit_code}",
                                 has_outputs=has_outputs, aud=aud)


def _result(rec: JobRecord, *, reused: bool, lines: list[str], findings: list[Finding]) -> LaunchResult:
    layout = RunLayout(rec.run_dir)
    res = LaunchResult(job_id=rec.id, name=rec.name, host=rec.host, backend=rec.backend, state=rec.state,
                       run_dir=rec.run_dir, log=layout.log, reused=reused, attempt=rec.attempt,
                       previous_id=rec.previous_id, script_sha=rec.script_sha, exit_code=rec.exit_code,
                       exit_signal=rec.exit_signal, first_lines=lines[:FIRST_LINES],
                       last_lines=lines[-FIRST_LINES:] if len(lines) > FIRST_LINES else [], findings=findings, next="")
    res.next = next_for(res, bool(next_step.declared_outputs(rec)))
    return res


async def probe(app: App, t: Transport, backend: Backend, rec: JobRecord, probe_s: float,
                interval: float = 1.0) -> tuple[JobRecord, list[str], list[Finding]]:
    """Watch a fresh job until its first output settles, it exits, or `probe_s` passes."""
    layout = RunLayout(rec.run_dir)
    deadline = monotonic() + max(0.0, probe_s)
    quiet_polls = 0
    lines: list[str] = []
    obs = Observation(alive=None)
    got: dict[str, Any] = {}

    async def _obs() -> None:
        got["obs"] = await backend.observe(t, rec.handle, layout)

    async def _lines() -> None:
        got["lines"] = await _log_lines(t, layout)

    while True:
        async with anyio.create_task_group() as tg:  # two channels on one connection, one round trip of wall time
            tg.start_soon(_obs)
            tg.start_soon(_lines)
        obs, lines = got["obs"], got["lines"]
        if obs.alive is False:
            break
        if lines and not _has_traceback(lines):
            quiet_polls += 1
            if quiet_polls >= 2:  # output seen on two polls and no traceback: it started
                break
        if monotonic() >= deadline:
            break
        await anyio.sleep(min(interval, max(0.05, deadline - monotonic())))
    new = state_from(obs, rec.backend)
    if new is not None:
        rec = jobstore.set_state(app.store, rec.id, new, kind="probe", exit_code=obs.exit_code,
                                 exit_signal=obs.exit_signal, detail={"detail": obs.detail})
    else:
        jobstore.append_event(app.store, rec.id, "probe", rec.state, {"detail": obs.detail, "lines": len(lines)})
    findings = _traceback_findings(lines, rec.exit_code, rec.exit_signal) if lines or new else []
    return rec, lines, findings


async def launch_detached(app: App, host: str, command: str, workdir: str, name: str, backend: str = "auto",
                          env: dict[str, str] | None = None, secret_env: list[str] | None = None,
                          probe_s: float = 60, run_root: str | None = None, outputs: list[str] | None = None,
                          relaunch: bool = False, options: dict[str, Any] | None = None,
                          stall_floor_s: float | None = None) -> LaunchResult:
    """Start `command` detached on `host` from `workdir` as job `name` (see the module doc)."""
    check_name(name, "job name")
    _check_text(host, "host")
    _check_text(command, "command", allow_newline=True)
    _check_text(workdir, "workdir")
    if run_root is not None:
        _check_text(run_root, "run_root")
    # the required outputs, fixed here for good: what the teardown gate demands a verified manifest of
    declared = [_check_text(o, "output dir") for o in (outputs or [])]
    outs = declared or [workdir.rstrip("/") + "/checkpoints"]
    env = dict(env or {})
    for k, v in env.items():
        check_env_name(k)
        if not isinstance(v, str) or "\0" in v:
            raise ConfigError(f"the value of env {k} is not a string without NUL bytes", hint="pass strings")
    secrets = read_secrets(secret_env)
    opts = dict(options or {})
    if probe_s < 0:
        raise ConfigError("probe_s must be >= 0", hint="e.g. 60")
    if stall_floor_s is not None and not stall_floor_s > 0:
        raise ConfigError("stall_floor_s must be > 0", hint="seconds of silence never called a stall, e.g. 60")
    t = await app.transport(host)

    lock = _locks.setdefault((host, name), asyncio.Lock())
    async with lock:
        prev = jobstore.find_by_name(app.store, host, name)
        if prev is not None and prev.state is JobState.launching and _launch_age_s(prev) < LAUNCH_GRACE_S:
            # another process is starting this name right now (it holds the claim): its job is the answer
            jobstore.append_event(app.store, prev.id, "reused", prev.state, {"by": "concurrent launch"})
            return _result(prev, reused=True, lines=[], findings=[])
        if prev is not None and not prev.state.finished:
            prev, obs = await refresh_job(app, prev, t)
            if obs is None or not prev.state.finished:  # still alive there (or cannot tell): never start twice
                lines = await _log_lines(t, RunLayout(prev.run_dir)) if prev.run_dir else []
                jobstore.append_event(app.store, prev.id, "reused", prev.state, {})
                return _result(prev, reused=True, lines=lines, findings=[])
        profile_default = opts.pop("profile_backend", None)
        chosen = await choose_backend(t, backend, profile_default)
        script_text = normalise_command(command)
        sha = command_sha(script_text)
        now = iso()
        rec = JobRecord(
            id=jobstore.new_id(), host=host, name=name, backend=chosen.name, state=JobState.launching,
            attempt=(prev.attempt + 1) if prev else 1, previous_id=prev.id if prev else None, command=script_text,
            workdir=workdir, run_dir="", script_sha=sha, created_at=now, updated_at=now,
            spec={"env_names": sorted(env), "secret_env": sorted(secrets), "outputs": outs,
                  "outputs_declared": bool(declared), "run_root": run_root,
                  "probe_s": probe_s, "relaunch": relaunch, "options": opts,
                  **({"stall_floor_s": stall_floor_s} if stall_floor_s is not None else {})},
        )
        rec, claimed = jobstore.claim(app.store, rec)
        if not claimed:  # another process sharing this registry launched the name first: that job is the answer
            lines = await _log_lines(t, RunLayout(rec.run_dir)) if rec.run_dir else []
            jobstore.append_event(app.store, rec.id, "reused", rec.state, {"by": "concurrent launch"})
            return _result(rec, reused=True, lines=lines, findings=[])
        jobstore.append_event(app.store, rec.id, "created", rec.state,
                              {"backend": chosen.name, "attempt": rec.attempt, "previous_id": rec.previous_id})
        try:
            await _claim_on_box(t, rec, run_root)
            start_t: Transport = CleanEnvTransport(t) if t.kind == "local" else t  # type: ignore[assignment]
            rec = await _start(app, start_t, chosen, rec, env, secrets, opts, run_root)
        except GpuError as err:
            jobstore.set_state(app.store, rec.id, JobState.failed, kind="launch_failed",
                               detail={"code": err.code, "message": log.scrub(err.message)})
            raise
    rec, lines, findings = await probe(app, t, chosen, rec, probe_s, interval=float(opts.get("probe_interval_s", 1.0)))
    res = _result(rec, reused=False, lines=lines, findings=findings)
    _log.info("launched", job_id=rec.id, host=host, name=name, backend=chosen.name, state=rec.state.value)
    return res


def _launch_age_s(rec: JobRecord) -> float:
    """Seconds since a `launching` record last changed (a launcher that died mid-launch leaves one behind)."""
    try:
        then = datetime.fromisoformat(rec.updated_at.replace("Z", "+00:00"))
    except ValueError:
        return float("inf")
    return (datetime.now(UTC) - then).total_seconds()


async def _claim_on_box(t: Transport, rec: JobRecord, run_root: str | None) -> None:
    """The name's claim on the box itself (`probes/claim.sh`, an atomic `mkdir`): launchers that do not share
    this registry (another laptop, another state dir) cannot both start the name there either."""
    script = importlib.resources.files("mcp_gpu.probes").joinpath("claim.sh").read_text()
    res = await t.run_script(script, [run_root or "", rec.name, rec.id, rec.previous_id or ""], timeout=60)
    if res.exit_status == 13:
        holder = parse_kv(res.stdout).get("held", "unknown")
        raise GateRefused(f"{t.host}: the job name {rec.name!r} is held on the box by job {holder}, which has not "
                          "exited (launched from another mcp-gpu state dir?); nothing was started",
                          hint="watch or cancel that job from where it was launched, or pick another name")
    if not res.ok:
        raise CommandFailed(f"{t.host}: claiming the job name on the box failed (exit {res.exit_status}): "
                            f"{' | '.join(res.tail(3)) or 'no output'}", hint="check the run_root is writable")


def local_sandbox(app: App, keep: list[str]) -> tuple[str, ...]:
    """A job on THIS machine is code running as the server's user: it must not read or write what guards the server
    (the registry, where a forged approval row would complete a destructive request; the audit log; the TOTP and
    HTTP keys; the provider key files). The wrapper starts in the same mount namespace sandbox as `smoke_cpu`, with
    the job's own run dir and workdir left reachable. No sandbox on this machine → none (the docs say so)."""
    from mcp_gpu.lifecycle.sandbox import covers_keeping, escape_hatches, sandbox_for
    from mcp_gpu.lifecycle.smoke import guarded_paths

    keep_paths = [Path(k) for k in keep if k]
    box = sandbox_for(covers_keeping([app.settings.home, *guarded_paths(), *escape_hatches()], keep_paths))
    return tuple(box.wrap([])) if box.active else ()


async def _start(app: App, t: Transport, backend: Backend, rec: JobRecord, env: dict[str, str],
                 secrets: dict[str, str], opts: dict[str, Any], run_root: str | None) -> JobRecord:
    meta = json.dumps({"job_id": rec.id, "name": rec.name, "host": rec.host, "backend": rec.backend,
                       "attempt": rec.attempt, "previous_id": rec.previous_id, "command_sha256": rec.script_sha,
                       "script": f"run-{rec.script_sha[:12]}.sh", "env_names": sorted(env),
                       "secret_env_names": sorted(secrets), "outputs": rec.spec.get("outputs", []),
                       "workdir": rec.workdir, "created_at": rec.created_at}, indent=1, ensure_ascii=False)
    res = await t.run_script(PREPARE, [run_root or "", rec.id, rec.script_sha[:12], rec.command, WRAPPER,
                                       meta + "\n", rec.workdir], timeout=60)
    if res.exit_status == 10:
        raise ConfigError(f"{t.host}: workdir {rec.workdir!r} does not exist there",
                          hint="create it or sync the code first; nothing was started")
    if res.exit_status == 11:
        raise GateRefused(f"{t.host}: {res.stderr.strip()}", hint="a running job's script is never overwritten")
    if not res.ok:
        raise CommandFailed(f"{t.host}: preparing the run directory failed (exit {res.exit_status}): "
                            f"{' | '.join(res.tail(3)) or 'no output'}", hint="check the run_root is writable")
    kv = parse_kv(res.stdout)
    run_dir, workdir = kv.get("run_dir", ""), kv.get("workdir", rec.workdir)
    layout = RunLayout(run_dir)
    rec = jobstore.update(app.store, rec.id, run_dir=run_dir, workdir=workdir)
    spec = LaunchSpec(job_id=rec.id, name=rec.name, command=rec.command, workdir=workdir, env=env, secrets=secrets,
                      options=opts, sandbox=local_sandbox(app, [run_dir, workdir]) if t.kind == "local" else ())
    handle = await backend.launch(t, spec, layout, layout.script(rec.script_sha))
    rec = jobstore.update(app.store, rec.id, handle=handle)
    return jobstore.set_state(app.store, rec.id, JobState.running, kind="launched",
                              detail={"backend": backend.name, "handle": handle})
