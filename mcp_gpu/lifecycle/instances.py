"""Reconcile what bills with what mcp-gpu knows: every instance each provider lists for the account, marked
against the registry (known and busy, known and idle, unknown, recorded as torn down yet still listed).

Read-only: it lists, it never stops anything. Only providers whose API key is in the environment are asked; a
provider that fails is reported as such, and the others still answer. A teardown is proven by this listing
(`prove_teardown`): the instance absent, or stopped for a stop.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Literal

import anyio
from pydantic import BaseModel, Field

from mcp_gpu import log
from mcp_gpu.app import App
from mcp_gpu.errors import GpuError
from mcp_gpu.models import iso
from mcp_gpu.providers import API_KEY_ENV, InstanceInfo, list_instances
from mcp_gpu.store import audit_log
from mcp_gpu.store import hosts as hosts_repo
from mcp_gpu.store import jobs as jobs_repo

_log = log.get("mcp_gpu.instances")
Mark = Literal["known_busy", "known_idle", "unknown", "torn_down_still_present"]
_DESTROY_ACTIONS = ("terminate", "destroy", "delete", "release")


class InstanceRow(InstanceInfo):
    mark: Mark
    hosts: list[str] = Field(default_factory=list, description="registered host names with this billing identity")
    running_jobs: list[str] = Field(default_factory=list)
    note: str = ""


class ProviderListing(BaseModel):
    provider: str
    ok: bool
    instances: int = 0
    error: str | None = None


class InstancesReport(BaseModel):
    at: str
    duration_s: float
    providers: list[ProviderListing]
    instances: list[InstanceRow]
    total_hourly_usd: float = Field(description="sum of the hourly prices of every listed instance that reports one")
    summary: list[str]
    next: str


def providers_with_keys(env: Mapping[str, str] = os.environ) -> list[str]:
    return [name for name, var in API_KEY_ENV.items() if (env.get(var) or "").strip()]


def _torn_down(app: App) -> dict[tuple[str, str], str]:
    """(platform, instance id) → the teardown action the audit log records as executed and done."""
    out: dict[tuple[str, str], str] = {}
    for e in audit_log.entries(app.store, limit=100_000):
        if e["event"] != "teardown_executed" or (e.get("detail") or {}).get("status") != "done":
            continue
        _host, _, rest = str(e.get("target") or "").partition("|")
        platform, _, iid = rest.partition("|")
        if platform and iid:
            out[(platform, iid)] = str(e.get("action") or "").removeprefix("teardown:").split("+")[0]
    return out


def _mark(info: InstanceInfo, names: list[str], running: list[str], torn: str | None) -> tuple[Mark, str]:
    if torn:
        destroyed = torn in _DESTROY_ACTIONS
        if destroyed or info.state in ("running", "starting"):
            want = "gone" if destroyed else "stopped"
            return "torn_down_still_present", (f"a {torn} was recorded as done, yet the platform still lists it "
                                               f"as {info.vendor_state or info.state} (expected {want})")
    if not names:
        return "unknown", "not registered with mcp-gpu (created by hand or by another session?)"
    if running:
        return "known_busy", f"{len(running)} job(s) running"
    return "known_idle", "registered, no job running" + (" — still billing" if info.state == "running" else "")


async def _list_one(name: str, out: dict[str, list[InstanceInfo] | GpuError]) -> None:
    try:
        out[name] = await list_instances(name)
    except GpuError as err:
        _log.info("instances_list_failed", provider=name, code=err.code, message=err.message)
        out[name] = err


async def reconcile(app: App, providers: list[str] | None = None) -> InstancesReport:
    """List every provider's instances (concurrently) and mark each against the registry."""
    t0 = time.monotonic()
    names = providers if providers is not None else providers_with_keys()
    results: dict[str, list[InstanceInfo] | GpuError] = {}
    async with anyio.create_task_group() as tg:
        for n in names:
            tg.start_soon(_list_one, n, results)
    torn = _torn_down(app)
    by_identity: dict[tuple[str, str], list[str]] = {}
    for h in hosts_repo.all_hosts(app.store):
        if h.platform and h.instance_id:
            by_identity.setdefault((h.platform, h.instance_id), []).append(h.name)
    running_by_host: dict[str, list[str]] = {}
    for j in jobs_repo.list_jobs(app.store):
        if not j.state.finished:
            running_by_host.setdefault(j.host, []).append(j.id)
    listings: list[ProviderListing] = []
    rows: list[InstanceRow] = []
    for n in names:
        res = results.get(n)
        if isinstance(res, GpuError) or res is None:
            listings.append(ProviderListing(provider=n, ok=False, error=res.message if res else "no answer"))
            continue
        listings.append(ProviderListing(provider=n, ok=True, instances=len(res)))
        for info in res:
            hnames = by_identity.get((n, info.instance_id), [])
            running = [jid for h in hnames for jid in running_by_host.get(h, [])]
            mark, note = _mark(info, hnames, running, torn.get((n, info.instance_id)))
            rows.append(InstanceRow(**info.model_dump(), mark=mark, hosts=hnames, running_jobs=running, note=note))
    order = {"torn_down_still_present": 0, "unknown": 1, "known_idle": 2, "known_busy": 3}
    rows.sort(key=lambda r: (order[r.mark], r.provider, r.instance_id))
    total = round(sum(r.hourly_usd or 0.0 for r in rows if r.state in ("running", "starting")), 2)
    return InstancesReport(at=iso(), duration_s=round(time.monotonic() - t0, 3), providers=listings, instances=rows,
                           total_hourly_usd=total, summary=_summary(names, listings, rows, total), next=_next(rows))


def _money(v: float | None) -> str:
    return f"${v:.2f}" if v is not None else "?"


def _summary(names: list[str], listings: list[ProviderListing], rows: list[InstanceRow], total: float) -> list[str]:
    if not names:
        return ["no provider API key is set (" + ", ".join(API_KEY_ENV.values()) + "): nothing to list"]
    lines = [f"{len(rows)} instance(s) across {sum(1 for p in listings if p.ok)}/{len(listings)} provider(s); "
             f"running now: {_money(total)}/h"]
    for p in listings:
        if not p.ok:
            lines.append(f"{p.provider}: listing FAILED ({p.error}) — its instances are not shown")
    for r in rows:
        run = f", up {r.running_s / 3600:.1f} h, so far {_money(r.cost_so_far_usd)}" if r.running_s is not None else ""
        lines.append(f"{r.mark.upper()} {r.provider} {r.instance_id}{f' ({r.name})' if r.name else ''}: "
                     f"{r.vendor_state or r.state}, {_money(r.hourly_usd)}/h{run}"
                     f"{' — hosts ' + ', '.join(r.hosts) if r.hosts else ''} — {r.note}")
    return lines


def _next(rows: list[InstanceRow]) -> str:
    torn = [r for r in rows if r.mark == "torn_down_still_present"]
    if torn:
        r = torn[0]
        return (f"{r.provider} {r.instance_id} is still listed after a recorded teardown: check it in the "
                f"{r.provider} console now — it may still bill")
    unknown = [r for r in rows if r.mark == "unknown" and r.state in ("running", "starting")]
    if unknown:
        return (f"{len(unknown)} running instance(s) unknown to mcp-gpu: register_host(...) them with their platform "
                "and instance id to watch and tear them down safely, or ask the user whose they are")
    idle = [r for r in rows if r.mark == "known_idle" and r.state == "running"]
    if idle:
        return (f"{idle[0].hosts[0]} is running with no job: verify its results and request_teardown when the user "
                "agrees")
    return "nothing billing unexpectedly"


async def prove_teardown(provider_name: str, instance_id: str, action: str) -> str:
    """What the provider's own listing says after a teardown: a sentence the answer carries."""
    try:
        listed = await list_instances(provider_name)
    except GpuError as err:
        return f"not proven by the listing: it failed ({err.message})"
    hit = next((i for i in listed if i.instance_id == instance_id), None)
    if hit is None:
        return f"proven: {provider_name}'s instance listing no longer shows {instance_id}"
    if action not in _DESTROY_ACTIONS and hit.state == "stopped":
        return f"proven: {provider_name}'s listing shows {instance_id} stopped ({hit.vendor_state})"
    return (f"NOT proven: {provider_name}'s listing still shows {instance_id} as {hit.vendor_state or hit.state} — "
            "check the console; it may still bill")


# Patrol shows what each host costs. Listings are cached briefly so a patrol every few seconds (wait) does not
# hit the providers' APIs each time; a failed listing just leaves the price out.
_BILLING_TTL_S = 300.0
_billing_cache: dict[str, tuple[float, list[InstanceInfo]]] = {}


async def host_billing(app: App, host_names: list[str]) -> dict[str, InstanceInfo]:
    """host name → its instance as its provider lists it (price, time up, cost so far), for registered hosts whose
    provider has a key. Never raises: billing is decoration on a patrol, not a reason for it to fail."""
    wanted: dict[str, tuple[str, str]] = {}
    for name in host_names:
        h = hosts_repo.find(app.store, name)
        if h and h.platform and h.instance_id and h.platform in API_KEY_ENV and (
                os.environ.get(API_KEY_ENV[h.platform]) or "").strip():
            wanted[name] = (h.platform, h.instance_id)
    out: dict[str, InstanceInfo] = {}
    for platform in sorted({p for p, _ in wanted.values()}):
        cached = _billing_cache.get(platform)
        if cached is None or time.monotonic() - cached[0] > _BILLING_TTL_S:
            try:
                with anyio.fail_after(15):
                    listed = await list_instances(platform, max_retries=0)
            except (GpuError, TimeoutError) as err:
                _log.info("billing_unavailable", provider=platform, error=str(err))
                continue
            cached = (time.monotonic(), listed)
            _billing_cache[platform] = cached
        by_id = {i.instance_id: i for i in cached[1]}
        for name, (p, iid) in wanted.items():
            if p == platform and iid in by_id:
                out[name] = by_id[iid]
    return out


def billing_line(info: InstanceInfo) -> str:
    up = f", up {info.running_s / 3600:.1f} h, so far {_money(info.cost_so_far_usd)}" if info.running_s else ""
    return f"{info.provider} {info.instance_id} {info.vendor_state or info.state} {_money(info.hourly_usd)}/h{up}"
