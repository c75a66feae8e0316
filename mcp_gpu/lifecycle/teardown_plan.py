"""What a teardown of one host would do, read from its platform profile: the action, the phrase, what is lost,
what survives, what keeps billing, the danger clocks and how old those facts are. Pure: no I/O but the profile."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from mcp_gpu.errors import ConfigError, NotFoundError
from mcp_gpu.models import HostRecord
from mcp_gpu.profiles import Profile, load_profile
from mcp_gpu.store import Store, hosts

RUNNING_SUFFIX = " with running jobs"
LOSS_SUFFIX = "+loss"
_NEEDS_INSTANCE = ("ssh-rental", "cloud-api", "notebook")


def _register_hint(name: str, target: str = "TARGET") -> str:
    return (f'register it with register_host(name="{name}", target="{target}", platform="vastai|runpod|...", '
            f'instance_id="<the provider\'s id>") or `mcp-gpu hosts add {name} {target} --platform P --instance-id ID`')


def resolve_host(store: Store, name: str) -> HostRecord:
    """The registered host (`local` works unregistered). A host whose platform is unknown cannot be torn down."""
    rec = hosts.find(store, name)
    if rec is None:
        if name == "local":
            return HostRecord(name="local", target="local", platform="local")
        raise NotFoundError(f"host {name!r} is not registered: teardown needs its platform and instance id",
                            hint=_register_hint(name))
    if not rec.platform:
        if rec.target == "local":
            return rec.model_copy(update={"platform": "local"})
        raise ConfigError(f"host {name!r} has no platform: teardown cannot know which meter to stop",
                          hint=_register_hint(name, rec.target))
    return rec


def actions_of(profile: Profile) -> tuple[str, ...]:
    """The action words a teardown of this platform accepts (the first one is what `auto` picks unless noted)."""
    td, kind = profile.head.teardown, profile.head.kind
    if td.method == "api":
        return tuple(td.verbs)
    if td.method == "none":
        return ("stop",)
    if td.method == "cli":
        return ("scancel",) if kind == "slurm" else ("delete",)
    return ("stop", "destroy")


def auto_action(profile: Profile) -> str:
    ms, acts = profile.head.meter_stop, actions_of(profile)
    if ms.verb in acts:
        return ms.verb
    if not ms.irreversible and "stop" in acts:
        return "stop"
    return next((a for a in acts if a != "stop"), acts[0])


@dataclass(frozen=True)
class Plan:
    host: HostRecord
    profile: Profile
    platform: str
    instance_id: str
    action: str
    allow_running: bool
    accept_loss: bool = False

    @property
    def method(self) -> str:
        return self.profile.head.teardown.method

    @property
    def label(self) -> str:
        return "local" if self.method == "none" else f"{self.platform} {self.instance_id}"

    @property
    def phrase(self) -> str:
        return f"{self.action} {self.label}" + (RUNNING_SUFFIX if self.allow_running else "")

    @property
    def action_key(self) -> str:
        return (f"teardown:{self.action}" + ("+running" if self.allow_running else "")
                + (LOSS_SUFFIX if self.accept_loss else ""))

    @property
    def target_key(self) -> str:
        return f"{self.host.name}|{self.platform}|{self.instance_id}"

    @property
    def is_stop(self) -> bool:
        return self.action == "stop" and self.method != "none"


def make_plan(rec: HostRecord, action: str = "auto", *, allow_running: bool = False,
              accept_loss: bool = False) -> Plan:
    platform = rec.platform or "local"
    profile = load_profile(platform)
    acts = actions_of(profile)
    want = (action or "auto").strip().lower()
    chosen = auto_action(profile) if want == "auto" else want
    if chosen not in acts:
        raise ConfigError(f"{profile.head.title} has no teardown action {action!r}",
                          hint=f"use action='auto' ({auto_action(profile)}) or one of: {', '.join(acts)}")
    iid = rec.instance_id
    if not iid:
        if profile.head.teardown.method == "api" or profile.head.kind in _NEEDS_INSTANCE:
            raise ConfigError(f"host {rec.name!r} ({platform}) has no provider instance id: teardown cannot name "
                              "the machine to stop", hint=_register_hint(rec.name, rec.target))
        iid = "local" if profile.head.teardown.method == "none" else rec.name
    return Plan(host=rec, profile=profile, platform=platform, instance_id=iid, action=chosen,
                allow_running=allow_running, accept_loss=accept_loss)


def _yes(v: bool | None) -> bool:
    return bool(v)


def survival(plan: Plan) -> tuple[list[str], list[str]]:
    """(lost, survives) from the profile's storage matrix for this action (stop column or destroy column)."""
    lost: list[str] = []
    kept: list[str] = []
    for t in plan.profile.head.storage.tiers:
        keeps = _yes(t.survives_stop) if plan.is_stop else t.survives_destroy
        if plan.method == "none":
            keeps = True
        line = f"{t.name} ({t.path})" + (f": {t.billing}" if t.billing and keeps else "")
        (kept if keeps else lost).append(line)
    return lost, kept


def keeps_billing(plan: Plan) -> list[str]:
    if plan.method == "none":
        return []
    out = list(plan.profile.head.keeps_billing_after_stop)
    _lost, _kept = survival(plan)
    for t in plan.profile.head.storage.tiers:
        keeps = _yes(t.survives_stop) if plan.is_stop else t.survives_destroy
        if keeps and t.billing and "free" not in t.billing.lower():
            out.append(f"{t.name}: {t.billing}")
    return list(dict.fromkeys(out))


def danger_clocks(plan: Plan) -> list[str]:
    return [f"{c.what}: after {c.after} → {c.consequence}" for c in plan.profile.head.danger.clocks]


def facts_used(plan: Plan, now: datetime | None = None) -> tuple[str, int]:
    """(oldest verified month among the fact groups a teardown relies on, its age in whole months)."""
    months = plan.profile.fact_months()
    used = ["meter_stop", "storage", "danger", "teardown"] + (["credentials"] if plan.method == "api" else [])
    oldest = min(months[g] for g in used)
    now = now or datetime.now(UTC)
    y, m = (int(x) for x in oldest.split("-"))
    return oldest, max(0, (now.year * 12 + now.month) - (y * 12 + m))


def credential_env(plan: Plan) -> list[str]:
    return list(plan.profile.head.credentials.env) if plan.method == "api" else []


# What each platform sets INSIDE the instance that names the instance itself (platform-facts; RP12: over SSH the
# pod's variables may be missing from the login session, so the probe also reads PID 1's environment).
# name -> prefix to strip before comparing (vast.ai's label is `C.<id>`).
SELF_ID_ENV: dict[str, dict[str, str]] = {
    "runpod": {"RUNPOD_POD_ID": ""},
    "vastai": {"CONTAINER_ID": "", "VAST_CONTAINERLABEL": "C."},
}
SELF_ID_NAMES: tuple[str, ...] = tuple(dict.fromkeys(n for d in SELF_ID_ENV.values() for n in d))

IdentityVerdict = str  # "proven" | "unproven" | "contradicted" | "not_applicable"


def identity_verdict(platform: str, instance_id: str, reported: dict[str, str]) -> tuple[IdentityVerdict, str]:
    """Does what the box reports about itself prove the instance id the agent registered?

    `reported` is NAME -> value as the machine's environment holds it (untrusted text, compared, never executed).
    proven: a self-id variable equals the claim; contradicted: one names ANOTHER instance; unproven: the platform
    sets none we know of, or the box did not say."""
    names = SELF_ID_ENV.get(platform)
    if not names:
        return ("not_applicable" if platform in ("local", "slurm", "kubernetes") else "unproven",
                f"{platform} sets no variable inside the instance that names it: instance identity unproven")
    seen: list[str] = []
    for name, prefix in names.items():
        raw = (reported.get(name) or "").strip()
        if not raw:
            continue
        value = raw[len(prefix):] if prefix and raw.startswith(prefix) else raw
        if value == instance_id:
            return "proven", f"the machine reports {name}={raw}"
        seen.append(f"{name}={raw[:80]}")
    if seen:
        return "contradicted", (f"the machine reached reports {', '.join(seen)}, not {platform} {instance_id}: this "
                                "host's instance id is wrong, or the target reaches another machine")
    return "unproven", (f"the machine did not report {' or '.join(names)}: instance identity unproven "
                        f"({platform} {instance_id} is what was registered, not what the box says)")
