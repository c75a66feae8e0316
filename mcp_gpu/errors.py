"""The one error tree every layer below `tools/` raises.

    GpuError                      code            retryable
    ├── ConfigError               config          no    bad settings, bad argument, broken profile
    ├── NotFoundError             not_found       no    unknown job / host / profile / gotcha
    ├── UnsupportedError          unsupported     no    a capability the platform or backend lacks
    ├── TransportError            transport       yes   the machine could not be reached or the link dropped
    │   ├── ConnectError          connect         yes   refused, timed out, DNS
    │   ├── CommandTimeout        timeout         yes   a remote command ran past its limit
    │   ├── AuthError             auth            no    key refused
    │   └── HostKeyError          host_key        no    unknown or CHANGED host key: never auto-accepted
    ├── CommandFailed             command_failed  no    a command we needed exited non-zero (carries the record)
    ├── GateRefused               gate_refused    no    a destructive action's preconditions do not hold
    ├── ConfirmationError         confirmation    no    token wrong, expired, replayed, or phrase mismatch
    ├── ProviderError             provider        429/5xx  a platform API failed
    └── StoreError                store           no    the local registry could not be read or written

Each error carries a one-line message and a hint: the next thing to do. The tool layer turns them into
`isError` results the model can act on; the CLI prints them to stderr with the hint.

Retryable means "the same call, unchanged, may succeed later". The class default above is refined by
`RETRY_RULES`, matched against the error's message and its causes (errno, exception type): a name that does
not resolve, an argument list the kernel refuses, a bad host key, a refused key or a bad argument will fail
the same way every time, so they are never retryable, whatever class carried them; a timeout, a refused,
reset or unreachable connection and a dropped link are.
"""

from __future__ import annotations

import errno
import re
import socket
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class RetryRule:
    reason: str
    retryable: bool
    text: re.Pattern[str] | None = None  # matched against the message and every cause's text
    errnos: frozenset[int] = frozenset()  # matched against every cause's errno
    types: tuple[type[BaseException], ...] = ()  # matched against every cause's type


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# First match wins; the permanent causes come first so "connection ... name not known" is not retried.
RETRY_RULES: tuple[RetryRule, ...] = (
    RetryRule("unresolvable host name", False,
              _re(r"cannot resolve|name or service not known|nodename nor servname|no address associated|"
                  r"temporary failure in name resolution|could not resolve hostname"),
              types=(socket.gaierror,)),
    RetryRule("argument list too long", False, _re(r"argument list too long"), frozenset({errno.E2BIG})),
    RetryRule("host key problem", False, _re(r"host key|REMOTE HOST IDENTIFICATION HAS CHANGED")),
    RetryRule("authentication failed", False, _re(r"permission denied \(publickey|refused our key|auth(entication)? fail")),
    RetryRule("bad input", False, _re(r"\bbad (host|port)\b|could not read ssh config|invalid argument"),
              frozenset({errno.EINVAL, errno.ENAMETOOLONG})),
    RetryRule("timed out", True, _re(r"timed? ?out|ran past|no answer from"), frozenset({errno.ETIMEDOUT}),
              (TimeoutError,)),
    RetryRule("connection refused", True, _re(r"connection refused"), frozenset({errno.ECONNREFUSED}),
              (ConnectionRefusedError,)),
    RetryRule("connection reset or lost", True, _re(r"connection (reset|lost|closed)|broken pipe|interrupted"),
              frozenset({errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED}), (ConnectionResetError,)),
    RetryRule("unreachable", True, _re(r"unreachable"), frozenset({errno.EHOSTUNREACH, errno.ENETUNREACH})),
)


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in out and len(out) < 8:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def retry_rule(exc: BaseException) -> RetryRule | None:
    """The first rule of RETRY_RULES that matches `exc` or one of its causes, or None."""
    chain = _chain(exc)
    texts = [str(getattr(e, "message", "") or e) for e in chain]
    codes = {getattr(e, "errno", None) for e in chain}
    for rule in RETRY_RULES:
        if rule.types and any(isinstance(e, rule.types) for e in chain):
            return rule
        if rule.errnos and codes & rule.errnos:
            return rule
        if rule.text is not None and any(rule.text.search(t) for t in texts):
            return rule
    return None


class GpuError(Exception):
    """Root of every error mcp-gpu raises on purpose."""

    code: ClassVar[str] = "error"
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, hint: str | None = None, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.data = data or {}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message, "retryable": self.is_retryable()}
        if self.hint:
            out["hint"] = self.hint
        if self.data:
            out["data"] = self.data
        return out

    def is_retryable(self) -> bool:
        """The class default, refined by RETRY_RULES for errors of a retryable class (a transport error
        caused by an unresolvable name or an over-long argument list is not retryable)."""
        if not self.retryable:
            return False
        rule = retry_rule(self)
        return rule.retryable if rule is not None else True

    def __str__(self) -> str:
        return f"{self.message}\nHint: {self.hint}" if self.hint else self.message


class ConfigError(GpuError):
    code = "config"


class NotFoundError(GpuError):
    code = "not_found"


class UnsupportedError(GpuError):
    code = "unsupported"


class TransportError(GpuError):
    code = "transport"
    retryable = True


class ConnectError(TransportError):
    code = "connect"


class CommandTimeout(TransportError):
    code = "timeout"


class AuthError(TransportError):
    code = "auth"
    retryable = False


class HostKeyError(TransportError):
    code = "host_key"
    retryable = False


class CommandFailed(GpuError):
    code = "command_failed"


class GateRefused(GpuError):
    code = "gate_refused"


class ConfirmationError(GpuError):
    code = "confirmation"


class ProviderError(GpuError):
    code = "provider"

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None,
                 data: dict[str, Any] | None = None) -> None:
        super().__init__(message, hint=hint, data=data)
        self.status = status

    def is_retryable(self) -> bool:
        return self.status is not None and (self.status == 429 or self.status >= 500)


class StoreError(GpuError):
    code = "store"
