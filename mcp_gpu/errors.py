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
"""

from __future__ import annotations

from typing import Any, ClassVar


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
        return self.retryable

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
