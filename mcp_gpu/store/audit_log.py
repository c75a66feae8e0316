"""Append-only audit log of every destructive request, confirmation, decline and execution."""

from __future__ import annotations

import json
from typing import Any

from mcp_gpu.log import scrub
from mcp_gpu.models import iso
from mcp_gpu.store import Store


def append(store: Store, event: str, *, action: str | None = None, target: str | None = None,
           detail: dict[str, Any] | None = None) -> int:
    body = scrub(json.dumps(detail or {}, sort_keys=True, default=str))
    return store.execute("INSERT INTO audit_log(at, event, action, target, detail_json) VALUES (?,?,?,?,?)",
                         (iso(), event, action, target, body))


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
