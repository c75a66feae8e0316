"""`mcp-gpu serve`: the MCP server on stdio (default) or streamable HTTP."""

from __future__ import annotations

import argparse
from typing import Any

from mcp_gpu.errors import ConfigError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    p.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP at HOST:PORT (e.g. 127.0.0.1:8765)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mcp_gpu.server import serve

    if args.http:
        host, _, port = args.http.rpartition(":")
        if not port.isdigit():
            raise ConfigError(f"--http {args.http!r}: expected HOST:PORT", hint="e.g. --http 127.0.0.1:8765")
        if host not in ("127.0.0.1", "localhost", "::1", ""):
            raise ConfigError("--http binds to loopback only: the server can act on paid machines",
                              hint="use 127.0.0.1:PORT and tunnel if you need remote access")
    serve(http=args.http)
    return 0
