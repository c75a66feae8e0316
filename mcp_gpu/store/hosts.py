"""Registered hosts: a name, how to reach it, its platform and provider instance id."""

from __future__ import annotations

from mcp_gpu.errors import NotFoundError
from mcp_gpu.models import HostRecord, iso
from mcp_gpu.store import Store


def upsert(store: Store, rec: HostRecord) -> HostRecord:
    now = iso()
    store.execute(
        "INSERT INTO hosts(name, target, platform, instance_id, created_at, updated_at) VALUES (?,?,?,?,?,?) "
        "ON CONFLICT(name) DO UPDATE SET target=excluded.target, platform=excluded.platform, "
        "instance_id=excluded.instance_id, updated_at=excluded.updated_at",
        (rec.name, rec.target, rec.platform, rec.instance_id, now, now),
    )
    return get(store, rec.name)


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
