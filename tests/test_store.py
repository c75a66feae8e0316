"""The registry: named append-only migrations, idempotent upgrades, transactions, an append-only audit log."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mcp_gpu.errors import StoreError
from mcp_gpu.store import Store, audit_log
from mcp_gpu.store.migrations import MIGRATIONS


def test_a_database_from_the_first_release_is_upgraded_in_place_and_keeps_its_rows(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(db)
    conn.executescript("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL);"
                       + MIGRATIONS[0][1]
                       + "INSERT INTO _migrations VALUES ('0001_hosts_audits', '2026-01-01');"
                       "INSERT INTO hosts VALUES ('box1','testhost','runpod','pod-1','2026-01-01','2026-01-01');")
    conn.commit()
    conn.close()
    s = Store(db)
    assert s.applied() == [name for name, _ in MIGRATIONS]
    assert s.query("SELECT instance_id FROM hosts WHERE name='box1'")[0][0] == "pod-1"
    s.close()
    again = Store(db)
    assert again.migrate() == [] and again.query("PRAGMA journal_mode")[0][0] == "wal"
    again.close()


def test_migration_names_are_unique_and_in_order() -> None:
    names = [n for n, _ in MIGRATIONS]
    assert names == sorted(names) and len(set(names)) == len(names)


def test_atomic_rolls_back_everything_on_error(tmp_path: Path) -> None:
    s = Store(tmp_path / "r.sqlite3")
    with pytest.raises(RuntimeError), s.atomic():
        s.execute("INSERT INTO hosts VALUES ('a','t',NULL,NULL,'x','x')")
        with s.atomic():
            s.execute("INSERT INTO hosts VALUES ('b','t',NULL,NULL,'x','x')")
        raise RuntimeError("boom")
    assert s.query("SELECT count(*) FROM hosts")[0][0] == 0
    s.close()


def test_audit_log_rows_cannot_be_changed_or_deleted(tmp_path: Path) -> None:
    s = Store(tmp_path / "r.sqlite3")
    rid = audit_log.append(s, "teardown_requested", action="destroy", target="vastai 1", detail={"reason": "done"})
    with pytest.raises(StoreError):
        s.execute("UPDATE audit_log SET event='x' WHERE id=?", (rid,))
    with pytest.raises(StoreError):
        s.execute("DELETE FROM audit_log WHERE id=?", (rid,))
    (entry,) = audit_log.entries(s)
    assert entry["event"] == "teardown_requested" and entry["detail"] == {"reason": "done"}
    s.close()


def _open_and_count(path: str) -> int:
    from mcp_gpu.store import Store

    s = Store(path)
    try:
        return len(s.applied())
    finally:
        s.close()


def test_processes_opening_a_fresh_registry_at_once_all_migrate_it(tmp_path: Path) -> None:
    """Three `mcp-gpu launch` started together on a new state dir raced the migrations ("table already exists")."""
    import multiprocessing

    from mcp_gpu.store.migrations import MIGRATIONS

    with multiprocessing.get_context("spawn").Pool(6) as pool:
        counts = pool.map(_open_and_count, [str(tmp_path / "registry.sqlite3")] * 6)
    assert counts == [len(MIGRATIONS)] * 6
