"""The application context: settings, registry, transport pool and confirmer, shared by server and CLI."""

from __future__ import annotations

from dataclasses import dataclass

from mcp_gpu.config import Settings
from mcp_gpu.confirm import Confirmer
from mcp_gpu.store import Store, hosts
from mcp_gpu.transport import Transport
from mcp_gpu.transport.pool import TransportPool


@dataclass
class App:
    settings: Settings
    store: Store
    pool: TransportPool
    confirmer: Confirmer

    @classmethod
    def open(cls, settings: Settings | None = None) -> App:
        settings = settings or Settings.from_env()
        settings.ensure_home()
        store = Store(settings.db_path)
        pool = TransportPool(config_paths=settings.ssh_config, connect_timeout=settings.connect_timeout,
                             keepalive=settings.keepalive, resolve=lambda name: hosts.target_of(store, name))
        return cls(settings=settings, store=store, pool=pool, confirmer=Confirmer(store, settings.home))

    async def transport(self, host: str) -> Transport:
        return await self.pool.get(host)

    async def aclose(self) -> None:
        await self.pool.aclose()
        self.store.close()
