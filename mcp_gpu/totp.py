"""RFC 6238 time-based one-time codes for `MCP_GPU_CONFIRM=totp`: a second factor on EVERY destructive act
(teardown and job_cancel), typed by the human into the form or the terminal, never derivable from anything the
agent can read through this server's tools.

The secret lives in the state dir (`totp.key`, mode 0600, dir 0700) and is enrolled with `mcp-gpu totp-setup`,
which prints the otpauth:// URI to the terminal only. A code works once (the last accepted time step is
remembered). Guessing is rate-limited: MAX_FAILURES wrong codes within WINDOW_S lock every check out for
LOCKOUT_S (even a right code is refused then), and the lockout is written to the audit log. The counter lives in
the registry, so the CLI and the server share it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import struct
import time
from pathlib import Path
from urllib.parse import quote

from mcp_gpu import log
from mcp_gpu.errors import ConfigError, ConfirmationError
from mcp_gpu.store import Store, audit_log

STEP_S = 30
MAX_FAILURES = 5
WINDOW_S = 300
LOCKOUT_S = 300
DIGITS = 6
KEY_FILE = "totp.key"
LAST_FILE = "totp.last"


def _write_0600(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    os.chmod(path, 0o600)


def enrol(home: Path, *, force: bool = False) -> str:
    """Create the secret (base32) and return it. Refuses to replace an existing one unless `force`."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(home, 0o700)
    path = home / KEY_FILE
    if path.exists() and not force:
        raise ConfigError(f"a TOTP secret already exists at {path}", hint="pass --force to replace it (re-enrol)")
    secret = base64.b32encode(secrets.token_bytes(20)).decode().rstrip("=")
    _write_0600(path, secret.encode())
    return secret


def otpauth_uri(secret: str, account: str = "teardown") -> str:
    return f"otpauth://totp/mcp-gpu:{quote(account)}?secret={secret}&issuer=mcp-gpu&digits={DIGITS}&period={STEP_S}"


def code_at(secret: str, step: int) -> str:
    key = base64.b32decode(secret + "=" * (-len(secret) % 8), casefold=True)
    mac = hmac.new(key, struct.pack(">Q", step), hashlib.sha1).digest()
    off = mac[-1] & 0x0F
    value = (struct.unpack(">I", mac[off:off + 4])[0] & 0x7FFFFFFF) % 10**DIGITS
    return f"{value:0{DIGITS}d}"


def locked_until(store: Store, now: float) -> float | None:
    rows = store.query("SELECT at FROM totp_failures WHERE at > ? ORDER BY at DESC", (now - WINDOW_S - LOCKOUT_S,))
    times = [float(r["at"]) for r in rows]
    # locked when MAX_FAILURES failures fall inside one WINDOW_S, for LOCKOUT_S after the last of them
    for i in range(len(times) - MAX_FAILURES + 1):
        if times[i] - times[i + MAX_FAILURES - 1] <= WINDOW_S and times[i] + LOCKOUT_S > now:
            return times[i] + LOCKOUT_S
    return None


def _fail(store: Store, now: float, why: str, hint: str) -> ConfirmationError:
    store.execute("INSERT INTO totp_failures(at) VALUES (?)", (now,))
    until = locked_until(store, now)
    if until is not None:
        audit_log.append(store, "totp_lockout", detail={"failures": MAX_FAILURES, "window_s": WINDOW_S,
                                                        "locked_for_s": round(until - now)})
        return ConfirmationError(f"{why}; too many wrong codes: authenticator checks are locked for "
                                 f"{round(until - now)} s", hint="nothing was done; the lockout is in the audit log")
    return ConfirmationError(why, hint=hint)


def verify(home: Path, code: str | None, *, store: Store, now: float | None = None) -> None:
    """Accept a current code (±1 step) once; raise ConfirmationError otherwise. Rate-limited (see module doc)."""
    t = now if now is not None else time.time()
    path = home / KEY_FILE
    if not path.exists():
        raise ConfirmationError("MCP_GPU_CONFIRM=totp but no authenticator is enrolled",
                                hint="the human runs `mcp-gpu totp-setup` in a terminal and scans the URI")
    until = locked_until(store, t)
    if until is not None:
        raise ConfirmationError(f"authenticator checks are locked for {round(until - t)} s after repeated wrong codes",
                                hint="wait for the lockout to end; nothing was done")
    if not code or not code.strip().isdigit():
        raise ConfirmationError("a code from the human's authenticator app is required (MCP_GPU_CONFIRM=totp)",
                                hint="the human types the 6-digit code into the form or the terminal; it cannot be "
                                     "derived from anything here")
    secret = path.read_text().strip()
    log.register_secret(secret)  # never in a log line or a tool answer
    step = int(t // STEP_S)
    last_path = home / LAST_FILE
    last = int(last_path.read_text() or "0") if last_path.exists() else 0
    for s in (step, step - 1, step + 1):
        if hmac.compare_digest(code_at(secret, s), code.strip()):
            if s <= last:
                raise _fail(store, t, "this authenticator code was already used", "wait for the next code")
            _write_0600(last_path, str(s).encode())
            return
    raise _fail(store, t, "the authenticator code is wrong or expired", "type the code currently shown")
