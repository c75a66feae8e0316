"""The local registry: one SQLite file (WAL) in the state dir; the only package that imports sqlite3.

Repositories for each area (hosts, audits, jobs, manifests, tokens, audit log) are small modules beside
this one that take a `Store`. Calls are synchronous: each is a sub-millisecond local write, cheaper than a
thread hop, and WAL lets the CLI and the server share the file.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp_gpu.errors import StoreError
from mcp_gpu.models import iso
from mcp_gpu.store.migrations import MIGRATIONS


class Store:
    """A connection to the registry with `atomic()` transactions and migrations applied on open."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10)
            self.conn.row_factory = sqlite3.Row
            self.conn.execute("PRAGMA busy_timeout=10000")
            self._wal()
            self.conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the registry at {self.path}: {exc}",
                             hint="check MCP_GPU_HOME points at a writable directory") from exc
        self._lock = threading.RLock()
        self._depth = 0
        self.migrate()

    def _wal(self) -> None:
        """Switch to WAL. Several processes opening a new registry at once (three `mcp-gpu launch` racing) can get
        SQLITE_BUSY here without the busy handler being consulted, so retry for a few seconds."""
        for attempt in range(50):
            try:
                self.conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if ("locked" not in str(exc) and "busy" not in str(exc)) or attempt == 49:
                    raise
                time.sleep(0.1)

    def migrate(self) -> list[str]:
        """Apply pending migrations, each in one transaction together with its record."""
        self.conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        done = {r[0] for r in self.conn.execute("SELECT name FROM _migrations")}
        applied: list[str] = []
        for name, sql in MIGRATIONS:
            if name in done:
                continue
            with self.atomic():
                # several processes may open a fresh registry at once (three `mcp-gpu launch` racing): the
                # check that counts is the one made under the write lock, not the read before it
                if self.conn.execute("SELECT 1 FROM _migrations WHERE name=?", (name,)).fetchone():
                    continue
                for stmt in _statements(sql):
                    self.conn.execute(stmt)
                self.conn.execute("INSERT INTO _migrations(name, applied_at) VALUES (?, ?)", (name, iso()))
            applied.append(name)
        return applied

    def applied(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT name FROM _migrations ORDER BY rowid")]

    @contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        """A transaction (nesting becomes a savepoint): all of it lands or none of it does."""
        with self._lock:
            depth = self._depth
            sp = f"sp{depth}"
            try:
                self.conn.execute("BEGIN IMMEDIATE" if depth == 0 else f"SAVEPOINT {sp}")
            except sqlite3.Error as exc:
                raise StoreError(f"registry busy or unwritable: {exc}", hint="retry in a moment") from exc
            self._depth += 1
            try:
                yield self.conn
            except BaseException:
                self._depth -= 1
                self.conn.execute("ROLLBACK" if depth == 0 else f"ROLLBACK TO {sp}")
                if depth:
                    self.conn.execute(f"RELEASE {sp}")
                raise
            else:
                self._depth -= 1
                self.conn.execute("COMMIT" if depth == 0 else f"RELEASE {sp}")

    def query(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                return list(self.conn.execute(sql, params))
            except sqlite3.Error as exc:
                raise StoreError(f"registry query failed: {exc}") from exc

    def execute(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> int:
        """Run one write; returns lastrowid. Wrap several in `atomic()` to make them one unit."""
        with self._lock:
            try:
                cur = self.conn.execute(sql, params)
                return int(cur.lastrowid or 0)
            except sqlite3.Error as exc:
                raise StoreError(f"registry write failed: {exc}") from exc

    def close(self) -> None:
        self.conn.close()


def _statements(sql: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies (BEGIN ... END;) whole."""
    out: list[str] = []
    buf = ""
    for part in sql.split(";"):
        buf += part + ";"
        if sqlite3.complete_statement(buf):
            if buf.strip(" \n;"):
                out.append(buf.strip())
            buf = ""
    return out
