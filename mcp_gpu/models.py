"""Shared domain models: findings, verdicts, hosts and jobs as every layer sees them."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

Severity = Literal["info", "warn", "error", "critical"]
Verdict = Literal["pass", "warn", "fail"]

SEVERITY_RANK: dict[str, int] = {"info": 0, "warn": 1, "error": 2, "critical": 3}

# The fixed triage vocabulary (ARCHITECTURE.md): extend it, never rename it.
TRIAGE_CLASSES: tuple[str, ...] = (
    "cuda_oom", "host_oom_killed", "nan_inf", "nccl_timeout", "disk_full", "inode_exhausted",
    "cuda_device_error", "preempted", "dataloader_error", "checkpoint_corrupt", "network_stall",
    "ssh_disconnect", "import_or_config_error", "traceback", "healthy",
    # added later (extensions, never renames): a deliberate stop and a scheduler time limit are neither a crash
    # nor a preemption (a relaunch-on-preempt policy must not act on them); stalled and lost are patrol verdicts
    "time_limit", "cancelled", "stalled", "lost",
)


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(ts: datetime | None = None) -> str:
    return (ts or utcnow()).isoformat(timespec="seconds").replace("+00:00", "Z")


class Finding(BaseModel):
    """One thing a check found: the shape audit, smoke, patrol, triage and verify all speak."""

    model_config = ConfigDict(populate_by_name=True, frozen=True)

    cls: str = Field(alias="class", description="triage/audit class, e.g. inode_exhausted, cuda_oom, gpu_ecc")
    severity: Severity
    gotcha: str | None = Field(default=None, description="catalogue id (gpu://gotchas/{id}) when one applies")
    title: str
    evidence: list[str] = Field(default_factory=list, description="the exact lines or numbers behind it")
    remedy: str = Field(default="", description="the fixed next step")


def finding(cls: str, severity: Severity, title: str, *, gotcha: str | None = None,
            evidence: list[str] | None = None, remedy: str = "") -> Finding:
    """Build a Finding without spelling the `class` alias at every call site."""
    return Finding.model_validate({"class": cls, "severity": severity, "title": title, "gotcha": gotcha,
                                   "evidence": evidence or [], "remedy": remedy})


def worst(findings: list[Finding]) -> Severity | None:
    if not findings:
        return None
    best = max(findings, key=lambda f: SEVERITY_RANK[f.severity])
    return best.severity


def verdict_of(findings: list[Finding]) -> Verdict:
    """error/critical → fail, warn → warn, otherwise pass."""
    w = worst(findings)
    if w in ("error", "critical"):
        return "fail"
    if w == "warn":
        return "warn"
    return "pass"


class JobState(StrEnum):
    launching = "launching"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    preempted = "preempted"
    cancelled = "cancelled"
    lost = "lost"

    @property
    def finished(self) -> bool:
        return self not in (JobState.launching, JobState.running)


class HostRecord(BaseModel):
    """A registered host: how to reach it and what it is (needed for teardown)."""

    name: str
    target: str = Field(description="'local', an ~/.ssh/config alias, or user@host[:port]")
    platform: str | None = None
    instance_id: str | None = None
    created_at: str | None = None


class JobRecord(BaseModel):
    """A job as the registry holds it. `handle` carries backend-specific ids (tmux socket/session, pid,
    slurm id, k8s name); `spec` carries what launch was asked (env var NAMES only, outputs, policy)."""

    id: str
    host: str
    name: str
    backend: str
    state: JobState
    attempt: int = 1
    previous_id: str | None = None
    command: str
    workdir: str
    run_dir: str
    script_sha: str = ""
    handle: dict[str, Any] = Field(default_factory=dict)
    spec: dict[str, Any] = Field(default_factory=dict)
    created_at: str
    updated_at: str
    finished_at: str | None = None
    exit_code: int | None = None
    exit_signal: str | None = None
    log_offset: int = 0
    last_patrol: dict[str, Any] = Field(default_factory=dict)

    @property
    def job_handle(self) -> JobHandle:
        return JobHandle.of(self.handle)

    @property
    def request(self) -> LaunchRequest:
        return LaunchRequest.of(self.spec)


class JobHandle(BaseModel):
    """What a backend needs to find its job again, typed. Stored as the same `handle_json` column; old rows
    spelled the tmux fields `socket`/`session` and are read as such. Unknown keys are kept."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    backend: str | None = None
    tmux_socket: str | None = Field(default=None, validation_alias=AliasChoices("tmux_socket", "socket"))
    tmux_session: str | None = Field(default=None, validation_alias=AliasChoices("tmux_session", "session"))
    pgid: int | None = None
    grace_s: float | None = None
    slurm_job_id: str | None = None
    cluster: str | None = None
    batch_script: str | None = None
    sbatch_argv: list[str] | None = None
    k8s_job: str | None = None
    namespace: str | None = None
    context: str | None = None
    secret: str | None = None
    uid: str | None = None

    @classmethod
    def of(cls, raw: dict[str, Any] | JobHandle | None) -> JobHandle:
        if isinstance(raw, JobHandle):
            return raw
        data = dict(raw or {})
        pg = data.get("pgid")
        if pg is not None and not (isinstance(pg, int) or str(pg).isdigit()):
            data["pgid"] = None
        return cls.model_validate(data)

    def to_json(self) -> dict[str, Any]:
        """The stored form: canonical field names, unset fields left out."""
        return self.model_dump(exclude_none=True)


class LaunchRequest(BaseModel):
    """What launch was asked, kept for relaunch and patrol (the job's `spec_json` column; old rows load).
    Only the NAMES of env vars and secrets are ever here."""

    model_config = ConfigDict(extra="allow")

    env_names: list[str] = Field(default_factory=list)
    secret_env: list[str] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)
    run_root: str | None = None
    probe_s: float = 60
    relaunch: bool = False
    options: dict[str, Any] = Field(default_factory=dict)
    stall_floor_s: float | None = Field(default=None, description="never call the job stalled before this")

    @classmethod
    def of(cls, raw: dict[str, Any] | LaunchRequest | None) -> LaunchRequest:
        if isinstance(raw, LaunchRequest):
            return raw
        try:
            return cls.model_validate(dict(raw or {}))
        except ValueError:
            return cls()

    @property
    def stall_floor(self) -> float | None:
        """The launch's stall floor: `stall_floor_s`, or `options["stall_floor_s"]`."""
        value = self.stall_floor_s if self.stall_floor_s is not None else self.options.get("stall_floor_s")
        try:
            return float(value) if value is not None else None
        except (TypeError, ValueError):
            return None


_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def check_name(value: str, what: str = "name") -> str:
    """Names become file names, tmux sessions, Slurm job names and k8s labels: keep them boring."""
    from mcp_gpu.errors import ConfigError

    if not _NAME_RE.fullmatch(value or ""):
        raise ConfigError(
            f"invalid {what} {value!r}: use 1-63 characters from A-Z a-z 0-9 . _ - , starting with a letter or digit",
            hint=f"pick a {what} like 'train-lr3e-4'",
        )
    return value
