"""Confirmation tokens for destructive tools: the first call acts on nothing and returns a token plus the
phrase a human must echo; only a second call carrying both acts.

A token is HMAC-SHA256-bound (secret in the state dir, mode 0600, never leaves it) to the action, the
target, the phrase and an optional snapshot of the gate, expires, and works once (its nonce is burned in the
registry). A wrong phrase burns nothing, so a typo can be retyped; anything else that does not match fails
closed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from mcp_gpu.errors import ConfirmationError
from mcp_gpu.models import iso, utcnow
from mcp_gpu.store import Store, audit_log

DEFAULT_TTL_S = 600


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def load_secret(home: Path, name: str = "confirm.key") -> bytes:
    """Read the HMAC secret, creating it 0600 on first use."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = home / name
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
    os.chmod(path, 0o600)
    return path.read_bytes()


def normalise(phrase: str) -> str:
    return " ".join(phrase.strip().split()).lower()


def snapshot_digest(snapshot: str) -> str:
    return hashlib.sha256(snapshot.encode()).hexdigest()[:32] if snapshot else ""


@dataclass(frozen=True)
class Challenge:
    token: str
    phrase: str
    expires_at: str
    action: str
    target: str


class Confirmer:
    """Issues and redeems confirmation tokens against the registry."""

    def __init__(self, store: Store, home: Path, *, ttl_s: int = DEFAULT_TTL_S) -> None:
        self.store = store
        self._secret = load_secret(home)
        self.ttl_s = ttl_s

    def _mac(self, payload: bytes) -> str:
        return hmac.new(self._secret, payload, hashlib.sha256).hexdigest()

    def issue(self, action: str, target: str, phrase: str, *, snapshot: str = "", ttl_s: int | None = None) -> Challenge:
        expires = int(time.time()) + (ttl_s if ttl_s is not None else self.ttl_s)
        nonce = secrets.token_urlsafe(12)
        body = {"a": action, "t": target, "p": normalise(phrase), "s": snapshot_digest(snapshot), "e": expires,
                "n": nonce}
        payload = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        token = f"{_b64(payload)}.{self._mac(payload)}"
        exp_iso = iso(utcnow().fromtimestamp(expires, tz=utcnow().tzinfo))
        self.store.execute("INSERT INTO tokens(nonce, action, target, issued_at, expires_at) VALUES (?,?,?,?,?)",
                           (nonce, action, target, iso(), exp_iso))
        audit_log.append(self.store, "confirmation_requested", action=action, target=target,
                         detail={"phrase": phrase, "expires_at": exp_iso})
        return Challenge(token=token, phrase=phrase, expires_at=exp_iso, action=action, target=target)

    def redeem(self, token: str, confirmation: str, *, action: str, target: str, snapshot: str = "") -> None:
        """Accept the token once, or raise ConfirmationError saying exactly why not. Nothing acts on failure."""
        try:
            b64, mac = token.strip().split(".", 1)
            payload = _unb64(b64)
            body = json.loads(payload)
        except (ValueError, json.JSONDecodeError) as exc:
            self._refuse(action, target, "malformed token")
            raise ConfirmationError("the confirmation token is malformed",
                                    hint="ask for a new token with the first call; nothing was done") from exc
        if not hmac.compare_digest(self._mac(payload), mac):
            self._refuse(action, target, "bad signature")
            raise ConfirmationError("the confirmation token was altered or was not issued by this server",
                                    hint="ask for a new token with the first call; nothing was done")
        if body.get("a") != action or body.get("t") != target:
            self._refuse(action, target, "token for another action or target")
            raise ConfirmationError(
                f"this token was issued for `{body.get('a')} {body.get('t')}`, not `{action} {target}`",
                hint="each token confirms exactly one action on one target; request a token for this one")
        if body.get("s", "") != snapshot_digest(snapshot):
            self._refuse(action, target, "gate changed since the token was issued")
            raise ConfirmationError("the situation changed since the token was issued (the gate snapshot differs)",
                                    hint="run the first call again to re-check and get a fresh token")
        if int(body.get("e", 0)) < time.time():
            self._refuse(action, target, "expired")
            raise ConfirmationError("the confirmation token has expired",
                                    hint="run the first call again for a fresh token and phrase")
        if normalise(confirmation) != body.get("p"):
            self._refuse(action, target, "phrase mismatch")
            raise ConfirmationError("the confirmation phrase does not match",
                                    hint="the human must type the exact phrase shown with the token; "
                                         "the token stays valid until it expires")
        with self.store.atomic() as conn:
            cur = conn.execute("UPDATE tokens SET used_at=? WHERE nonce=? AND used_at IS NULL", (iso(), body["n"]))
            used = cur.rowcount == 1
            if used:
                audit_log.append(self.store, "confirmation_accepted", action=action, target=target, detail={})
        if not used:  # recorded outside the transaction: a raise inside it would roll the record back
            self._refuse(action, target, "replay")
            raise ConfirmationError("this confirmation token was already used",
                                    hint="tokens work once; request a new one if the action is still wanted")

    def _refuse(self, action: str, target: str, reason: str) -> None:
        audit_log.append(self.store, "confirmation_refused", action=action, target=target, detail={"reason": reason})
