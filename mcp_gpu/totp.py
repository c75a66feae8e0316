"""RFC 6238 time-based one-time codes for `MCP_GPU_CONFIRM=totp`: a code from the user's authenticator, which the
agent cannot produce, must accompany a destructive confirmation.

The secret lives in the state dir (`totp.key`, mode 0600) and is enrolled with `mcp-gpu totp-setup`, which prints
the otpauth:// URI to the terminal only. A code works once (the last accepted time step is remembered).
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

from mcp_gpu.errors import ConfigError, ConfirmationError

STEP_S = 30
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


def verify(home: Path, code: str | None, *, now: float | None = None) -> None:
    """Accept a current code (±1 step) once; raise ConfirmationError otherwise."""
    path = home / KEY_FILE
    if not path.exists():
        raise ConfirmationError("MCP_GPU_CONFIRM=totp but no authenticator is enrolled",
                                hint="the human runs `mcp-gpu totp-setup` in a terminal and scans the URI")
    if not code or not code.strip().isdigit():
        raise ConfirmationError("a code from the human's authenticator app is required (MCP_GPU_CONFIRM=totp)",
                                hint="ask the human for the 6-digit code; it cannot be derived from anything here")
    secret = path.read_text().strip()
    step = int((now if now is not None else time.time()) // STEP_S)
    last_path = home / LAST_FILE
    last = int(last_path.read_text() or "0") if last_path.exists() else 0
    for s in (step, step - 1, step + 1):
        if hmac.compare_digest(code_at(secret, s), code.strip()):
            if s <= last:
                raise ConfirmationError("this authenticator code was already used", hint="wait for the next code")
            _write_0600(last_path, str(s).encode())
            return
    raise ConfirmationError("the authenticator code is wrong or expired", hint="type the code currently shown")
