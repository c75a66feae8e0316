"""Resource modules: each defines `register(server)`; every module here not starting with `_` is registered."""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer


def register_all(server: MCPServer) -> None:
    from mcp_gpu.registry import register_package

    register_package(server, sys.modules[__name__])
