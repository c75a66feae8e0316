"""Platform profiles: what stops the meter, what survives a stop or a destroy, which clocks delete data.

One Markdown file per platform in `profiles/` (see `frontmatter` for where that directory is found; the
environment variable MCP_GPU_PROFILES_DIR overrides it). The TOML head is validated by `ProfileHead`; every
fact group carries the month it was verified (`verified = "2026-06"`), so a teardown can say how old its facts
are and `stale_facts()` can list the ones past a year. The body has the fixed sections of `BODY_SECTIONS`.

`platform_briefing()` and `profile_checks()` are what `audit_env` calls on a host whose platform is known.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mcp_gpu import frontmatter
from mcp_gpu.errors import ConfigError, NotFoundError
from mcp_gpu.models import Finding, Severity, finding

ENV_DIR = "MCP_GPU_PROFILES_DIR"
BODY_SECTIONS: tuple[str, ...] = ("Launch", "Storage", "Network", "Spot and resume", "Teardown and billing", "Daemon",
                                  "Platform gotchas", "Overrides")
Month = str  # "YYYY-MM"
_MONTH_RE = re.compile(r"^20\d\d-(0[1-9]|1[0-2])$")
_ENV_NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")

INODE_WARN, INODE_FAIL = 0.80, 0.95


class ProfileError(ConfigError):
    """A profile file that does not load: names the file and the field path."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Dated(_Strict):
    verified: Month = Field(description="month these facts were last checked against the vendor, YYYY-MM")

    @field_validator("verified")
    @classmethod
    def _month(cls, v: str) -> str:
        if not _MONTH_RE.match(v):
            raise ValueError(f"expected a month like '2026-06', got {v!r}")
        return v


class MeterStop(_Dated):
    verb: str = Field(description="the action that stops the compute meter")
    irreversible: bool = Field(description="true when the verb also deletes the machine and its local disks")
    note: str = ""


class Detach(_Dated):
    primitives: list[str] = Field(min_length=1, description="how a job outlives the SSH session here")
    default_backend: Literal["tmux", "nohup", "slurm", "kubernetes"]


class Spot(_Dated):
    available: bool
    grace_s: float | None = Field(default=None, ge=0, description="seconds between the warning and the kill")
    signal: str | None = Field(default=None, description="what the job receives first, or 'none'")
    note: str = ""

    @model_validator(mode="after")
    def _grace_when_available(self) -> Spot:
        if self.available and self.grace_s is None:
            raise ValueError("grace_s is required when spot is available (0 when there is no warning)")
        return self


class StorageTier(_Strict):
    name: str
    path: str
    survives_stop: bool | None = Field(description="null when the platform has no stop state")
    survives_destroy: bool
    size_cap: str | None = None
    inode_cap: int | None = Field(default=None, gt=0)
    billing: str = ""


class Storage(_Dated):
    tiers: list[StorageTier] = Field(min_length=1)


class Network(_Dated):
    mirror_needed: bool
    proxy_hook: str | None = Field(default=None, description="shell line every session must run first")
    env: dict[str, str] = Field(default_factory=dict, description="non-secret environment the platform needs")
    notes: list[str] = Field(default_factory=list)


class Credentials(_Dated):
    env: list[str] = Field(default_factory=list, description="names of environment variables, never values")
    files: list[str] = Field(default_factory=list, description="paths of credential files, never contents")
    note: str = ""

    @field_validator("env")
    @classmethod
    def _names_only(cls, v: list[str]) -> list[str]:
        for name in v:
            if not _ENV_NAME_RE.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable NAME (values never go in a profile)")
        return v


class DangerClock(_Strict):
    what: str
    after: str = Field(description="how long, in words: '15 days', '6 h', 'balance reaches 0'")
    after_s: float | None = Field(default=None, ge=0, description="the same in seconds when it is a duration")
    consequence: str


class Danger(_Dated):
    clocks: list[DangerClock] = Field(default_factory=list)


class Teardown(_Dated):
    method: Literal["api", "cli", "console", "none"]
    provider: str | None = Field(default=None, description="providers/ module that speaks the API (method=api)")
    verbs: list[str] = Field(default_factory=list, description="destroy/stop verbs the provider offers")
    console_steps: list[str] = Field(default_factory=list, description="exact manual steps (method=console/cli)")
    confirm_gone: str = Field(default="", description="how to confirm the meter really stopped")

    @model_validator(mode="after")
    def _method_needs(self) -> Teardown:
        if self.method == "api" and (not self.provider or not self.verbs):
            raise ValueError("method 'api' needs provider and verbs")
        if self.method in ("console", "cli") and not self.console_steps:
            raise ValueError(f"method {self.method!r} needs console_steps")
        return self


class ProfileHead(_Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    title: str
    kind: Literal["ssh-rental", "cloud-api", "ssh", "slurm", "kubernetes", "notebook", "workstation"]
    data_dir: str | None = Field(description="where runs and caches go by default (fast, maybe ephemeral)")
    durable_dir: str | None = Field(description="the tier that survives destroy, when the platform has one")
    keeps_billing_after_stop: list[str] = Field(default_factory=list)
    gotchas: list[str] = Field(default_factory=list, description="catalogue ids (gpu://gotchas/{id})")
    meter_stop: MeterStop
    detach: Detach
    spot: Spot
    storage: Storage
    network: Network
    credentials: Credentials
    danger: Danger
    teardown: Teardown


@dataclass(frozen=True)
class Profile:
    head: ProfileHead
    body: str
    path: Path

    @property
    def name(self) -> str:
        return self.head.name

    def fact_months(self) -> dict[str, Month]:
        """Each fact group and the month it was verified."""
        h = self.head
        groups: dict[str, _Dated] = {"meter_stop": h.meter_stop, "detach": h.detach, "spot": h.spot,
                                     "storage": h.storage, "network": h.network, "credentials": h.credentials,
                                     "danger": h.danger, "teardown": h.teardown}
        return {k: v.verified for k, v in groups.items()}

    def oldest_fact(self) -> Month:
        return min(self.fact_months().values())

    def probe_paths(self) -> list[str]:
        """Paths an audit should `df -h`/`df -i` so `profile_checks` can judge them."""
        paths = [p for p in (self.head.data_dir, self.head.durable_dir) if p]
        paths += [t.path for t in self.head.storage.tiers if t.path.startswith("/") and "<" not in t.path]
        return list(dict.fromkeys(paths))


class StaleFact(BaseModel):
    profile: str
    group: str
    verified: Month
    age_days: int


def _load_file(path: Path) -> Profile:
    source = _display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"{source}: cannot read: {exc.strerror}", data={"file": source}) from None
    try:
        head_raw, body = frontmatter.split(text, source)
    except ConfigError as exc:
        raise ProfileError(exc.message, hint=exc.hint, data=exc.data) from None
    try:
        head = ProfileHead.model_validate(head_raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = frontmatter.field_path(err["loc"])
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ProfileError(f"{source}: field {field}: {err['msg']}{more}",
                           hint=f"fix '{field}' in the TOML head of {source}",
                           data={"file": source, "field": field}) from None
    if head.name != path.stem:
        raise ProfileError(f"{source}: field name: {head.name!r} does not match the file name {path.stem!r}",
                           hint="name the file after the profile", data={"file": source, "field": "name"})
    found = frontmatter.sections(body)
    for section in BODY_SECTIONS:
        if section not in found:
            raise ProfileError(f"{source}: body section '## {section}' is missing",
                               hint=f"the body needs these sections: {', '.join(BODY_SECTIONS)}",
                               data={"file": source, "field": f"body.{section}"})
    return Profile(head=head, body=body, path=path)


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


@lru_cache(maxsize=64)
def _cached(path: Path, _mtime_ns: int, _size: int) -> Profile:
    return _load_file(path)


def profiles_dir() -> Path:
    return frontmatter.data_dir("profiles", ENV_DIR)


def profile_names() -> list[str]:
    d = profiles_dir()
    return sorted(p.stem for p in d.glob("*.md") if not p.name.startswith("_"))


def load_profile(name: str) -> Profile:
    """One profile by name; NotFoundError lists the known names, ProfileError names file and field."""
    d = profiles_dir()
    path = d / f"{name}.md"
    if not re.fullmatch(r"[a-z][a-z0-9-]*", name or "") or not path.is_file():
        raise NotFoundError(f"no platform profile {name!r}", hint=f"known profiles: {', '.join(profile_names())}")
    st = path.stat()
    return _cached(path, st.st_mtime_ns, st.st_size)


def all_profiles() -> list[Profile]:
    return [load_profile(n) for n in profile_names()]


def _age_days(month: Month, now: datetime) -> int:
    year, mon = (int(x) for x in month.split("-"))
    start = datetime(year, mon, 1, tzinfo=UTC)
    return (now.astimezone(UTC) - start).days


def profile_stale_facts(profile: Profile, now: datetime, max_age_days: int = 365) -> list[StaleFact]:
    return [StaleFact(profile=profile.name, group=g, verified=m, age_days=_age_days(m, now))
            for g, m in profile.fact_months().items() if _age_days(m, now) > max_age_days]


def stale_facts(now: datetime | None = None, max_age_days: int = 365) -> list[StaleFact]:
    """Every fact group, in every profile, verified longer ago than `max_age_days` (counted from the 1st)."""
    now = now or datetime.now(UTC)
    return [s for p in all_profiles() for s in profile_stale_facts(p, now, max_age_days)]


def _yes_no(v: bool | None) -> str:
    return "n/a" if v is None else ("yes" if v else "NO")


def platform_briefing(profile: Profile) -> list[str]:
    """A few lines that teach a user the platform on its first audit: meter, survival, billing, clocks."""
    h = profile.head
    lines = [f"{h.title}: the meter stops with '{h.meter_stop.verb}' "
             f"({'irreversible: it deletes the machine' if h.meter_stop.irreversible else 'reversible'})"
             + (f"; {h.meter_stop.note}" if h.meter_stop.note else "") + "."]
    # the tier's name goes first: two tiers can share a path (RunPod's volume disk and network volume are both
    # /workspace) and survive differently, so a path alone reads as a contradiction
    survival = "; ".join(f"{t.name} ({t.path}) stop={_yes_no(t.survives_stop)} destroy={_yes_no(t.survives_destroy)}"
                         for t in h.storage.tiers)
    lines.append(f"What survives: {survival}.")
    if h.keeps_billing_after_stop:
        lines.append("Keeps billing after a stop: " + "; ".join(h.keeps_billing_after_stop) + ".")
    for c in h.danger.clocks:
        lines.append(f"Danger clock: {c.what}, after {c.after} → {c.consequence}.")
    if h.spot.available:
        lines.append(f"Spot/interruptible: ~{h.spot.grace_s:g} s grace, signal {h.spot.signal or 'none'}; "
                     "checkpoint often and resume from the latest.")
    lines.append(f"Facts verified {profile.oldest_fact()} (oldest group); vendors change billing rules.")
    return lines


Disks = dict[str, tuple[int, int, int]]  # path -> (free_bytes, inodes_used, inodes_total)


def _covers(disks: Disks, path: str) -> tuple[int, int, int] | None:
    return disks.get(path.rstrip("/") or "/") or disks.get(path)


def profile_checks(profile: Profile, disks: Disks, now: datetime | None = None) -> list[Finding]:
    """Findings from the profile for the disks an audit measured (keys: the paths of `probe_paths()` found)."""
    h = profile.head
    out: list[Finding] = []
    durable = h.durable_dir
    if durable and "<" not in durable and _covers(disks, durable) is None:
        # on a workstation nothing is rented: a missing durable dir is advice, not a warning
        out.append(finding(
            "durable_dir_missing", "info" if h.kind == "workstation" else "warn",
            f"{h.title}: durable dir {durable} is not there",
            evidence=[f"probed: {', '.join(sorted(disks)) or 'nothing'}"],
            remedy=f"attach/create the {h.title} storage that survives destroy (see gpu://profiles/{h.name}, Storage) "
                   "or set an explicit durable path before launching; results left on local disk die with the box"))
    for tier in h.storage.tiers:
        got = _covers(disks, tier.path)
        if tier.inode_cap is None or got is None:
            continue
        _free, used, total = got
        cap = min(tier.inode_cap, total) if total > 0 else tier.inode_cap
        share = used / cap
        if share >= INODE_WARN:
            sev: Severity = "error" if share >= INODE_FAIL else "warn"
            out.append(finding(
                "inode_exhausted", sev, f"{tier.path}: {used:,} of ~{cap:,} inodes used ({share:.0%})",
                gotcha="universal.U7", evidence=[f"{tier.name} inode cap ~{tier.inode_cap:,}; df -i used={used} total={total}"],
                remedy="pack small files into tar/shards or move them to a tier without an inode cap before writing more; "
                       "'No space left on device' will come while df -h still shows room"))
    for s in profile_stale_facts(profile, now or datetime.now(UTC)):
        out.append(finding("stale_profile", "info", f"{h.title} profile: {s.group} facts are {s.age_days} days old",
                           evidence=[f"verified {s.verified}"],
                           remedy="re-check this against the vendor's current docs before relying on it for teardown"))
    return out
