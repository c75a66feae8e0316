"""Registers every module of a package that defines `register(server)` (tools/, resources/)."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from mcp.server.mcpserver import MCPServer


def register_package(server: MCPServer, package: ModuleType) -> None:
    """Import each module of `package` not starting with `_`, in name order, and call its `register`."""
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{package.__name__}.{info.name}").register(server)
