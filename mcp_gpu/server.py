"""Builds the MCP server: registers tools/, resources/ and prompts. The only place that knows the SDK's shape."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.mcpserver import MCPServer

from mcp_gpu import __version__, log
from mcp_gpu.app import App
from mcp_gpu.config import Settings

INSTRUCTIONS = """\
mcp-gpu runs long GPU jobs on machines the user rents or reaches over SSH and gets the results off before
the meter or a preemption takes them. Work in phases: audit_env (phase 0) → smoke_cpu (2) → launch_detached (3)
→ patrol every ~30 min (4) → verify_artifacts (5a) → request_teardown then confirm_teardown (5b).
Never tear down or cancel without the human echoing the confirmation phrase. `unreachable` is not `failed`.
Platform facts: resources gpu://profiles/{name}; known failures: gpu://gotchas/{id} and gotcha_lookup."""


def build_server(settings: Settings | None = None, app: App | None = None) -> MCPServer:
    """Create the server. With `app` given (tests, the demo) the caller owns its lifetime."""

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[App]:
        if app is not None:
            yield app
            return
        own = App.open(settings)
        try:
            yield own
        finally:
            await own.aclose()

    server = MCPServer("mcp-gpu", instructions=INSTRUCTIONS, version=__version__, lifespan=lifespan)
    from mcp_gpu import prompts, resources, tools
    from mcp_gpu.tool_list import make_lean

    tools.register_all(server)
    make_lean(server)
    resources.register_all(server)
    prompts.register_all(server)
    return server


def serve(http: str | None = None, settings: Settings | None = None, url: str | None = None) -> None:
    """Run over stdio (default) or streamable HTTP at HOST:PORT (validated by the CLI)."""
    settings = settings or Settings.from_env()
    log.configure(settings.log_level)
    server = build_server(settings)
    if http:
        import uvicorn

        host, _, port = http.rpartition(":")
        host = host or "127.0.0.1"
        log.get("mcp_gpu.server").info("http_serving", url=url or f"http://{host}:{port}/mcp")
        uvicorn.Server(uvicorn.Config(server.streamable_http_app(host=host), host=host, port=int(port),
                                      **log.uvicorn_config(settings.log_level))).run()
    else:
        server.run()
