"""On-box guards the server armed: where each lives, its rules, and how far its event log has been read."""

from __future__ import annotations

from typing import Any

from mcp_gpu.models import iso
from mcp_gpu.store import Store

_COLS = "host, guard_dir, pid, armed_at, deadline, idle_s, grace_s, interval_s, stop, events_offset, state, updated_at"


def record(store: Store, host: str, *, guard_dir: str, pid: int | None, deadline: float | None, idle_s: float | None,
           grace_s: float, interval_s: float, stop: str) -> None:
    now = iso()
    store.execute(
        f"INSERT INTO guards({_COLS}) VALUES (?,?,?,?,?,?,?,?,?,0,'armed',?) "  # noqa: S608
        "ON CONFLICT(host) DO UPDATE SET guard_dir=excluded.guard_dir, pid=excluded.pid, armed_at=excluded.armed_at, "
        "deadline=excluded.deadline, idle_s=excluded.idle_s, grace_s=excluded.grace_s, interval_s=excluded.interval_s, "
        "stop=excluded.stop, events_offset=0, state='armed', updated_at=excluded.updated_at",
        (host, guard_dir, pid, now, deadline, idle_s, grace_s, interval_s, stop, now))


def find(store: Store, host: str) -> dict[str, Any] | None:
    rows = store.query(f"SELECT {_COLS} FROM guards WHERE host=?", (host,))  # noqa: S608
    return dict(rows[0]) if rows else None


def all_guards(store: Store) -> list[dict[str, Any]]:
    return [dict(r) for r in store.query(f"SELECT {_COLS} FROM guards ORDER BY host")]  # noqa: S608


def advance(store: Store, host: str, *, events_offset: int, state: str) -> None:
    store.execute("UPDATE guards SET events_offset=?, state=?, updated_at=? WHERE host=?",
                  (events_offset, state, iso(), host))
