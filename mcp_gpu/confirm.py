"""Confirmation tokens and the pending requests they stand for.

The first call of a destructive tool acts on nothing: it stores a pending request in the registry (the
`approvals` table: what, on which target, the phrase and the plan a human will see) and returns a token for it.
A token is only a HANDLE: it proves that this server process issued the request (HMAC-SHA256 with a key that
lives in this process's memory and dies with it), binds it to the action, the target and a snapshot of the gate,
and expires. It never proves that a human agreed: that takes a human channel (mcp_gpu/lifecycle/human_gate.py).

A request is used at most once (`status` moves pending → approved → used, or → declined, which is final);
the move to `used` is one conditional UPDATE, so two concurrent confirmations cannot both act.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_gpu.errors import ConfirmationError
from mcp_gpu.models import iso, utcnow
from mcp_gpu.store import Store, audit_log

DEFAULT_TTL_S = 600
REQUESTER: dict[str, Any] = {}  # who is asking (the stdio client's pid), set by `serve`; see human_gate
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o/1/l/i: a human types the request id


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def normalise(phrase: str) -> str:
    return " ".join(phrase.strip().split()).lower()


def snapshot_digest(snapshot: str) -> str:
    return hashlib.sha256(snapshot.encode()).hexdigest()[:32] if snapshot else ""


def new_request_id(kind: str) -> str:
    return ("td-" if kind == "teardown" else "jc-") + "".join(secrets.choice(_ALPHABET) for _ in range(8))


@dataclass(frozen=True)
class Challenge:
    token: str
    request_id: str
    phrase: str
    expect: str
    expires_at: str
    action: str
    target: str


@dataclass(frozen=True)
class Pending:
    """One stored request, as `mcp-gpu approve` and the human gate read it."""

    id: str
    kind: str
    action: str
    target: str
    phrase: str
    expect: str
    summary: list[str]
    snapshot: str
    created_at: str
    expires_at: float
    status: str
    decided_via: str | None
    totp_ok: bool
    requester: dict[str, Any]

    @property
    def expired(self) -> bool:
        return self.expires_at < time.time()


def get_pending(store: Store, request_id: str) -> Pending | None:
    rows = store.query("SELECT * FROM approvals WHERE id=?", (request_id.strip(),))
    if not rows:
        return None
    r = rows[0]
    return Pending(id=r["id"], kind=r["kind"], action=r["action"], target=r["target"], phrase=r["phrase"],
                   expect=r["expect"], summary=json.loads(r["summary_json"]), snapshot=r["snapshot"],
                   created_at=r["created_at"], expires_at=float(r["expires_at"]), status=r["status"],
                   decided_via=r["decided_via"], totp_ok=bool(r["totp_ok"]), requester=json.loads(r["requester_json"]))


def list_pending(store: Store) -> list[Pending]:
    ids = [r["id"] for r in store.query("SELECT id FROM approvals WHERE status='pending' AND expires_at > ? "
                                        "ORDER BY created_at", (time.time(),))]
    return [p for p in (get_pending(store, i) for i in ids) if p is not None]


class Confirmer:
    """Issues tokens for pending requests and checks them. The key never leaves this process."""

    def __init__(self, store: Store, home: Path | None = None, *, ttl_s: int = DEFAULT_TTL_S) -> None:
        self.store = store
        self._secret = secrets.token_bytes(32)
        self.ttl_s = ttl_s
        self.requester: dict[str, Any] = dict(REQUESTER)

    def _mac(self, payload: bytes) -> str:
        return hmac.new(self._secret, payload, hashlib.sha256).hexdigest()

    def issue(self, action: str, target: str, phrase: str, *, kind: str, expect: str, summary: list[str] | None = None,
              snapshot: str = "", ttl_s: int | None = None) -> Challenge:
        expires = int(time.time()) + (ttl_s if ttl_s is not None else self.ttl_s)
        rid = new_request_id(kind)
        body = {"a": action, "t": target, "r": rid, "s": snapshot_digest(snapshot), "e": expires}
        payload = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        token = f"{_b64(payload)}.{self._mac(payload)}"
        exp_iso = iso(utcnow().fromtimestamp(expires, tz=utcnow().tzinfo))
        with self.store.atomic():
            self.store.execute(
                "INSERT INTO approvals(id, kind, action, target, phrase, expect, summary_json, snapshot, created_at, "
                "expires_at, requester_json) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (rid, kind, action, target, phrase, expect, json.dumps(summary or []), snapshot_digest(snapshot),
                 iso(), float(expires), json.dumps(self.requester)))
            audit_log.append(self.store, "confirmation_requested", action=action, target=target,
                             detail={"request_id": rid, "phrase": phrase, "expires_at": exp_iso})
        return Challenge(token=token, request_id=rid, phrase=phrase, expect=expect, expires_at=exp_iso, action=action,
                         target=target)

    def claims(self, token: str, *, audit: bool = True) -> dict[str, Any]:
        """The signed body of a token issued by THIS process, or ConfirmationError (audited unless `audit=False`:
        the form resolver peeks before the tool body, which then checks again and records)."""
        refuse = self.refuse if audit else (lambda *a, **k: None)
        try:
            b64, mac = token.strip().split(".", 1)
            payload = _unb64(b64)
            body = json.loads(payload)
        except (ValueError, json.JSONDecodeError):
            refuse(None, None, "malformed token")
            raise ConfirmationError("the confirmation token is malformed",
                                    hint="ask for a new token with the first call; nothing was done") from None
        if not hmac.compare_digest(self._mac(payload), mac) or not isinstance(body, dict):
            refuse(None, None, "bad signature")
            raise ConfirmationError("the confirmation token was altered, or was not issued by this server process "
                                    "(tokens do not survive a server restart)",
                                    hint="ask for a new token with the first call; nothing was done")
        return body

    def check(self, token: str, *, action: str, target: str, snapshot: str | None = None,
              audit: bool = True) -> Pending:
        """Signature, binding, expiry and state of the request a token stands for. Burns nothing."""
        body = self.claims(token, audit=audit)
        refuse = self.refuse if audit else (lambda *a, **k: None)
        if body.get("a") != action or body.get("t") != target:
            refuse(action, target, "token for another action or target")
            raise ConfirmationError(
                f"this token was issued for `{body.get('a')} {body.get('t')}`, not `{action} {target}`",
                hint="each token confirms exactly one action on one target; request a token for this one")
        if snapshot is not None and body.get("s", "") != snapshot_digest(snapshot):
            refuse(action, target, "gate changed since the token was issued")
            raise ConfirmationError("the situation changed since the token was issued (the gate snapshot differs)",
                                    hint="run the first call again to re-check and get a fresh token")
        if int(body.get("e", 0)) < time.time():
            refuse(action, target, "expired")
            raise ConfirmationError("the confirmation token has expired",
                                    hint="run the first call again for a fresh token and request")
        pending = get_pending(self.store, str(body.get("r", "")))
        if pending is None:
            refuse(action, target, "unknown request")
            raise ConfirmationError("the request behind this token is not in the registry",
                                    hint="run the first call again; nothing was done")
        if pending.status == "used":
            refuse(action, target, "replay")
            raise ConfirmationError("this confirmation token was already used",
                                    hint="tokens work once; request a new one if the action is still wanted")
        if pending.status == "declined":
            refuse(action, target, "declined earlier")
            raise ConfirmationError(f"the human declined request {pending.id}: a decline is final",
                                    hint="nothing was done; only a new request, approved by the human, can act")
        return pending

    def burn(self, pending: Pending, *, via: str) -> None:
        """Mark the request used: exactly one caller wins; the loser raises (replay / concurrent confirm)."""
        with self.store.atomic() as conn:
            cur = conn.execute("UPDATE approvals SET status='used', decided_at=COALESCE(decided_at, ?), "
                               "decided_via=COALESCE(decided_via, ?) WHERE id=? AND status IN ('pending','approved')",
                               (iso(), via, pending.id))
            used = cur.rowcount == 1
            if used:
                audit_log.append(self.store, "confirmation_accepted", action=pending.action, target=pending.target,
                                 detail={"request_id": pending.id, "via": via})
        if not used:
            self.refuse(pending.action, pending.target, "replay")
            raise ConfirmationError("this confirmation token was already used",
                                    hint="tokens work once; request a new one if the action is still wanted")

    def decline(self, pending: Pending, *, via: str, outcome: str = "decline") -> bool:
        with self.store.atomic() as conn:
            cur = conn.execute("UPDATE approvals SET status='declined', decided_at=?, decided_via=? WHERE id=? AND "
                               "status IN ('pending','approved')", (iso(), via, pending.id))
            if cur.rowcount == 1:
                audit_log.append(self.store, "confirmation_declined", action=pending.action, target=pending.target,
                                 detail={"request_id": pending.id, "via": via, "outcome": outcome})
                return True
        return False

    def refuse(self, action: str | None, target: str | None, reason: str, **detail: Any) -> None:
        audit_log.append(self.store, "confirmation_refused", action=action, target=target,
                         detail={"reason": reason, **detail})
