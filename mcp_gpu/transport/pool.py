"""One transport per host name, reused across calls and closed together."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from mcp_gpu.transport import Transport, canonical_target
from mcp_gpu.transport.local import LocalTransport

LOCAL_NAMES = frozenset({"local", "localhost-local"})


class TransportPool:
    """Hands out the pooled transport for a host name; `resolve` maps a registered name to its target."""

    def __init__(self, *, config_paths: Sequence[str] = (), connect_timeout: float = 15, keepalive: float = 15,
                 resolve: Callable[[str], str] | None = None) -> None:
        self._config_paths = tuple(config_paths)
        self._connect_timeout = connect_timeout
        self._keepalive = keepalive
        self._resolve = resolve or (lambda name: name)
        self._pool: dict[str, Transport] = {}
        self._lock = asyncio.Lock()

    async def get(self, host: str) -> Transport:
        async with self._lock:
            target = self._resolve(host)
            key = canonical_target(target)  # names of one target share its connection
            t = self._pool.get(key)
            if t is None:
                if target in LOCAL_NAMES:
                    t = LocalTransport(host)
                else:
                    from mcp_gpu.transport.ssh import SSHTransport  # asyncssh loads on the first SSH host only

                    t = SSHTransport(host, target, config_paths=self._config_paths,
                                     connect_timeout=self._connect_timeout, keepalive=self._keepalive)
                self._pool[key] = t
            return t

    def forget(self, host: str) -> None:
        self._pool.pop(canonical_target(self._resolve(host)), None)

    async def aclose(self) -> None:
        pool, self._pool = self._pool, {}
        for t in pool.values():
            await t.aclose()
