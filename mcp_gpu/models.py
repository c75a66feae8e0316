"""Shared domain models: findings, verdicts, hosts and jobs as every layer sees them."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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
