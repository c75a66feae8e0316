"""Retryable means retryable: the classification table, tested on real failures where they are cheap.

`nonexistent.invalid`: the .invalid TLD never resolves (RFC 2606) and costs one query to the local resolver.
A closed loopback port gives a real "connection refused"; a 1 MB argument gives the kernel's E2BIG.
"""

from __future__ import annotations

import errno
import socket
import sys
from pathlib import Path

import pytest

from mcp_gpu.app import App
from mcp_gpu.config import Settings
from mcp_gpu.errors import (
    AuthError,
    CommandTimeout,
    ConfigError,
    ConnectError,
    GpuError,
    HostKeyError,
    ProviderError,
    TransportError,
    retry_rule,
)
from mcp_gpu.tools._base import error_text
from tests.sshd import free_port

pytestmark = pytest.mark.anyio


async def _fail(app: App, host: str, argv: list[str], timeout: float | None = None) -> GpuError:
    with pytest.raises(GpuError) as info:
        t = await app.transport(host)
        await t.run(argv, timeout=timeout)
    return info.value


async def test_an_unresolvable_host_name_is_not_retryable(app: App) -> None:
    err = await _fail(app, "someone@nonexistent.invalid", ["true"])
    assert isinstance(err, ConnectError)
    assert not err.is_retryable(), err.message
    assert "(retryable)" not in error_text(err) and not err.to_dict()["retryable"]
    assert retry_rule(err) is not None and retry_rule(err).reason == "unresolvable host name"  # type: ignore[union-attr]


async def test_an_argument_list_too_long_is_not_retryable(app: App) -> None:
    err = await _fail(app, "local", ["echo", "x" * (1 << 20)])
    assert "Argument list too long" in err.message or getattr(err.__cause__, "errno", None) == errno.E2BIG
    assert not err.is_retryable() and "(retryable)" not in error_text(err)


async def test_a_refused_connection_is_retryable(settings: Settings, tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    app = App.open(settings)
    try:
        err = await _fail(app, f"root@127.0.0.1:{port}", ["true"])
    finally:
        await app.aclose()
    assert isinstance(err, TransportError) and err.is_retryable(), err.message
    assert error_text(err).endswith("(retryable)")


async def test_a_timeout_is_retryable(app: App) -> None:
    err = await _fail(app, "local", [sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert isinstance(err, CommandTimeout) and err.is_retryable()


def _caused(err: GpuError, cause: BaseException) -> GpuError:
    try:
        raise err from cause
    except GpuError as e:
        return e


@pytest.mark.parametrize(("err", "retryable", "reason"), [
    (ConnectError("x: could not connect", hint="h"), True, None),
    (_caused(ConnectError("x: could not connect"), socket.gaierror(-2, "Name or service not known")), False,
     "unresolvable host name"),
    (_caused(ConnectError("could not start 'echo' locally"), OSError(errno.E2BIG, "Argument list too long")), False,
     "argument list too long"),
    (ConnectError("bad host 'a b'"), False, "bad input"),
    (TransportError("x: SSH connection lost during `ls`"), True, "connection reset or lost"),
    (_caused(TransportError("x: link dropped"), ConnectionResetError(errno.ECONNRESET, "reset")), True,
     "connection reset or lost"),
    (_caused(ConnectError("x: could not connect"), OSError(errno.EHOSTUNREACH, "No route to host")), True,
     "unreachable"),
    (CommandTimeout("x: `ls` ran past 5s"), True, "timed out"),
    (HostKeyError("x: host key CHANGED"), False, None),
    (AuthError("x: the server refused our key"), False, None),
    (ConfigError("bad argument"), False, None),
    (ProviderError("rate limited", status=429), True, None),
    (ProviderError("bad request", status=400), False, None),
])
def test_classification_table(err: GpuError, retryable: bool, reason: str | None) -> None:
    assert err.is_retryable() is retryable, err.message
    if reason is not None:
        rule = retry_rule(err)
        assert rule is not None and rule.reason == reason
