"""Append-only, tamper-evident audit log of every destructive request, confirmation, decline and execution.

Append-only is enforced by triggers; tamper-EVIDENT by a hash chain: each row stores
`sha256(previous row's hash | its own id, time, event, action, target, detail)`, so deleting, editing or
reordering a row (after `DROP TRIGGER`, issue 10 attack 8) breaks every later link. Two more checks catch a cut
tail, which a chain alone cannot see: SQLite's AUTOINCREMENT counter (`sqlite_sequence`) must equal the last id,
and the head the server last wrote (`audit.head` in the state dir, 0600) must still be in the chain.

`verify()` runs on every read and before every destructive act; a broken chain makes destructive acts refuse
(fail closed) until a human runs `mcp-gpu audit-log --accept-break`, which appends a row recording exactly what
was broken and restarts the chain from the current last row (`audit_anchor`).

The chain has no secret: someone who rewrites the registry AND recomputes every hash AND the head file is not
caught. It makes tampering visible to tools that edit rows, not impossible for the machine's owner.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_gpu.log import scrub
from mcp_gpu.models import iso
from mcp_gpu.store import Store

HEAD_FILE = "audit.head"


@dataclass
class ChainReport:
    ok: bool
    rows_checked: int
    unchained_before: int = 0
    first_bad_id: int | None = None
    problems: list[str] = field(default_factory=list)

    def text(self) -> str:
        if self.ok:
            return f"audit chain intact ({self.rows_checked} rows checked)"
        return "AUDIT LOG TAMPERED: " + "; ".join(self.problems)


def _link(prev: str, rid: int, at: str, event: str, action: str | None, target: str | None, body: str) -> str:
    content = json.dumps([rid, at, event, action, target, body], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(f"{prev}\x1f{content}".encode()).hexdigest()


def _head_path(store: Store) -> Path | None:
    return None if store.path == ":memory:" else Path(store.path).parent / HEAD_FILE


def _write_head(store: Store, rid: int, digest: str) -> None:
    path = _head_path(store)
    if path is None:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"{rid} {digest}\n")
    os.replace(tmp, path)


def _read_head(store: Store) -> tuple[int, str] | None:
    path = _head_path(store)
    if path is None or not path.exists():
        return None
    try:
        rid, digest = path.read_text().split()
        return int(rid), digest
    except ValueError:
        return (-1, "unreadable")


def _anchor(store: Store) -> tuple[int, str]:
    rows = store.query("SELECT from_id, prev_hash FROM audit_anchor ORDER BY id DESC LIMIT 1")
    return (int(rows[0]["from_id"]), str(rows[0]["prev_hash"])) if rows else (1, "genesis")


def append(store: Store, event: str, *, action: str | None = None, target: str | None = None,
           detail: dict[str, Any] | None = None) -> int:
    body = scrub(json.dumps(detail or {}, sort_keys=True, default=str))
    at = iso()
    with store.atomic() as conn:  # BEGIN IMMEDIATE: the previous link cannot change under us (CLI and server)
        last = conn.execute("SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1").fetchone()
        seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name='audit_log'").fetchone()
        from_id, anchor_prev = _anchor(store)
        rid = max(int(last["id"]) if last else 0, int(seq["seq"]) if seq else 0) + 1
        prev = str(last["hash"]) if last and last["hash"] and int(last["id"]) >= from_id else anchor_prev
        digest = _link(prev, rid, at, event, action, target, body)
        conn.execute("INSERT INTO audit_log(id, at, event, action, target, detail_json, hash) VALUES (?,?,?,?,?,?,?)",
                     (rid, at, event, action, target, body, digest))
    _write_head(store, rid, digest)
    return rid


def verify(store: Store) -> ChainReport:
    """Walk the chain from the last anchor; also check the tail against sqlite_sequence and the head file."""
    from_id, prev = _anchor(store)
    rows = store.query("SELECT id, at, event, action, target, detail_json, hash FROM audit_log WHERE id >= ? "
                       "ORDER BY id", (from_id,))
    before = store.query("SELECT count(*) AS n FROM audit_log WHERE id < ?", (from_id,))[0]["n"]
    rep = ChainReport(ok=True, rows_checked=len(rows), unchained_before=int(before))
    expect_id = from_id
    hashes: dict[int, str] = {}
    for r in rows:
        rid = int(r["id"])
        if rid != expect_id:
            rep.problems.append(f"rows {expect_id}..{rid - 1} are missing (deleted)")
            rep.first_bad_id = rep.first_bad_id or expect_id
        want = _link(prev, rid, r["at"], r["event"], r["action"], r["target"], r["detail_json"])
        if r["hash"] != want:
            rep.problems.append(f"row {rid} does not match its chain hash (edited, or a row before it was removed)")
            rep.first_bad_id = rep.first_bad_id or rid
            break
        hashes[rid] = want
        prev = str(r["hash"])
        expect_id = rid + 1
    seq = store.query("SELECT seq FROM sqlite_sequence WHERE name='audit_log'")
    last_id = int(rows[-1]["id"]) if rows else from_id - 1
    if seq and int(seq[0]["seq"]) > last_id and int(seq[0]["seq"]) >= from_id:
        rep.problems.append(f"rows {last_id + 1}..{seq[0]['seq']} were written and are gone (tail deleted)")
        rep.first_bad_id = rep.first_bad_id or last_id + 1
    head = _read_head(store)
    if head is not None and head[0] >= from_id and hashes.get(head[0]) != head[1] and not rep.problems:
        rep.problems.append(f"the last row this server wrote (#{head[0]}) is not in the log as written")
        rep.first_bad_id = head[0]
    rep.ok = not rep.problems
    return rep


def accept_break(store: Store, who: str) -> tuple[ChainReport, int]:
    """A human accepts a broken chain: record what was broken, then restart the chain at the current end."""
    rep = verify(store)
    with store.atomic() as conn:
        last = conn.execute("SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1").fetchone()
        seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name='audit_log'").fetchone()
        nxt = max(int(last["id"]) if last else 0, int(seq["seq"]) if seq else 0) + 1
        conn.execute("INSERT INTO audit_anchor(at, from_id, prev_hash, note) VALUES (?,?,?,?)",
                     (iso(), nxt, (last["hash"] if last and last["hash"] else "genesis"),
                      f"break accepted by {who}: {rep.text()}"))
        rid = append(store, "audit_chain_reset", detail={"by": who, "was_ok": rep.ok, "problems": rep.problems,
                                                         "first_bad_id": rep.first_bad_id})
    return rep, rid


def entries(store: Store, *, target: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    sql = "SELECT id, at, event, action, target, detail_json FROM audit_log"
    params: tuple[Any, ...] = ()
    if target is not None:
        sql += " WHERE target=?"
        params = (target,)
    sql += " ORDER BY id DESC LIMIT ?"
    rows = store.query(sql, (*params, limit))
    return [{"id": r["id"], "at": r["at"], "event": r["event"], "action": r["action"], "target": r["target"],
             "detail": json.loads(r["detail_json"])} for r in reversed(rows)]
