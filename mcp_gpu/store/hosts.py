"""Registered hosts: a name, how to reach it, its platform and provider instance id."""

from __future__ import annotations

from mcp_gpu.errors import ConfigError, NotFoundError
from mcp_gpu.models import HostRecord, iso
from mcp_gpu.store import Store


def job_count(store: Store, rec: HostRecord) -> int:
    """Jobs registered under this host's name or target."""
    rows = store.query("SELECT count(*) AS n FROM jobs WHERE host IN (?, ?)", (rec.name, rec.target))
    return int(rows[0]["n"])


def upsert(store: Store, rec: HostRecord) -> HostRecord:
    """Register or update a host. The billing identity (platform + instance id) of a host that has jobs is fixed:
    changing it would point the teardown gate's evidence at another machine's meter."""
    old = find(store, rec.name)
    if old is not None and (old.platform, old.instance_id) != (rec.platform, rec.instance_id):
        n = job_count(store, old)
        if n:
            raise ConfigError(
                f"host {rec.name!r} has {n} job(s) and is registered as {old.platform or 'no platform'} "
                f"{old.instance_id or '(no instance id)'}: its platform and instance id cannot be changed to "
                f"{rec.platform or 'none'} {rec.instance_id or '(none)'}",
                hint=f"pass the same platform and instance id to change only the target; register another machine "
                     f"under a new name (register_host(name='{rec.name}-2', ...))")
    now = iso()
    store.execute(
        "INSERT INTO hosts(name, target, platform, instance_id, created_at, updated_at) VALUES (?,?,?,?,?,?) "
        "ON CONFLICT(name) DO UPDATE SET target=excluded.target, platform=excluded.platform, "
        "instance_id=excluded.instance_id, updated_at=excluded.updated_at",
        (rec.name, rec.target, rec.platform, rec.instance_id, now, now),
    )
    return get(store, rec.name)


def canonical_id(instance_id: str | None) -> str | None:
    """One spelling per instance: a provider's API reads a numeric id as a number (vast.ai: 01234567 is
    1234567), so leading zeros would make a second 'identity' for the same machine."""
    if instance_id is not None and instance_id.isascii() and instance_id.isdigit():
        return str(int(instance_id))
    return instance_id


def same_identity(store: Store, platform: str, instance_id: str) -> list[HostRecord]:
    """Every host registered with this billing identity (platform + provider instance id, compared canonically:
    rows registered before ids were canonical count too)."""
    want = canonical_id(instance_id)
    rows = store.query("SELECT name, target, platform, instance_id, created_at FROM hosts WHERE platform=? "
                       "ORDER BY name", (platform,))
    return [HostRecord(name=r["name"], target=r["target"], platform=r["platform"], instance_id=r["instance_id"],
                       created_at=r["created_at"]) for r in rows if canonical_id(r["instance_id"]) == want]


def find(store: Store, name: str) -> HostRecord | None:
    rows = store.query("SELECT name, target, platform, instance_id, created_at FROM hosts WHERE name=?", (name,))
    if not rows:
        return None
    r = rows[0]
    return HostRecord(name=r["name"], target=r["target"], platform=r["platform"], instance_id=r["instance_id"],
                      created_at=r["created_at"])


def get(store: Store, name: str) -> HostRecord:
    rec = find(store, name)
    if rec is None:
        raise NotFoundError(f"host {name!r} is not registered", hint="register it with register_host / "
                            "`mcp-gpu hosts add NAME TARGET --platform P --instance-id ID`")
    return rec


def all_hosts(store: Store) -> list[HostRecord]:
    rows = store.query("SELECT name, target, platform, instance_id, created_at FROM hosts ORDER BY name")
    return [HostRecord(name=r["name"], target=r["target"], platform=r["platform"], instance_id=r["instance_id"],
                       created_at=r["created_at"]) for r in rows]


def target_of(store: Store, name: str) -> str:
    rec = find(store, name)
    return rec.target if rec else name
