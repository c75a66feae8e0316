"""`register_host` / `host_list`: name a host, with its platform and provider instance id (teardown needs them)."""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

from mcp_gpu.errors import ConfigError
from mcp_gpu.models import HostRecord, check_name
from mcp_gpu.store import hosts
from mcp_gpu.tools._base import LOCAL_READ_ONLY, OVERWRITES, app_of, gpu_tool


class HostList(BaseModel):
    hosts: list[HostRecord]


def register(server: MCPServer) -> None:
    @server.tool(name="register_host", title="Register a host", annotations=OVERWRITES)
    @gpu_tool
    async def register_host(
        name: Annotated[str, Field(description="short name used in every other call, e.g. box1")],
        target: Annotated[str, Field(description="'local', an ~/.ssh/config alias, or user@host[:port]")],
        ctx: Context[Any, Any],
        platform: Annotated[str | None, Field(description="platform profile: runpod, vastai, autodl, ...")] = None,
        instance_id: Annotated[str | None, Field(description="the provider's instance/pod id (for teardown)")] = None,
    ) -> HostRecord:
        """Register (or update) a host with its platform and provider instance id. An instance id is a claim: the
        teardown gate checks it against what the machine reports about itself where the platform allows, and shows
        'instance identity unproven' to the human otherwise. The platform and instance id of a host that already
        has jobs cannot be changed."""
        app = app_of(ctx)
        return register_host_record(app.store, name, target, platform, instance_id)

    @server.tool(name="host_list", title="List registered hosts", annotations=LOCAL_READ_ONLY)
    @gpu_tool
    async def host_list(ctx: Context[Any, Any]) -> HostList:
        """List registered hosts with platform and instance id."""
        return HostList(hosts=hosts.all_hosts(app_of(ctx).store))


def register_host_record(store: Any, name: str, target: str, platform: str | None,
                         instance_id: str | None) -> HostRecord:
    check_name(name, "host name")
    if not target or target.startswith("-") or any(c.isspace() for c in target):
        raise ConfigError(f"bad target {target!r}", hint="use 'local', an ~/.ssh/config alias, or user@host[:port]")
    if platform is not None:
        try:
            from mcp_gpu import profiles

            profiles.load_profile(platform)
        except ImportError:
            pass
    if instance_id is not None and (not instance_id.strip() or any(c.isspace() for c in instance_id)):
        raise ConfigError(f"bad instance id {instance_id!r}", hint="copy the id from the provider console")
    from mcp_gpu.transport import canonical_target

    rec: HostRecord = hosts.upsert(store, HostRecord(name=name, target=canonical_target(target), platform=platform,
                                                     instance_id=hosts.canonical_id(instance_id)))
    return rec
