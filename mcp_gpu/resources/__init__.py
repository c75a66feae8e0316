"""Resource modules: each defines `register(server)`; every module here not starting with `_` is registered."""

from __future__ import annotations

import importlib
import pkgutil

from mcp.server.mcpserver import MCPServer


def register_all(server: MCPServer) -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.register(server)
