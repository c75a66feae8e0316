"""`mcp-gpu serve`: the MCP server on stdio (default) or streamable HTTP.

The helpers here own what a person sees when starting the server: which addresses are accepted (loopback
only; `[::1]:PORT` and `::1:PORT` alike), the URL to configure (the SDK serves MCP at `/mcp`, the root is a
404), a one-line notice when `serve` is started by hand in a terminal, and a clear error for a port in use.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import socket
import sys
from typing import Any

from mcp_gpu.errors import ConfigError

MCP_PATH = "/mcp"  # the SDK's streamable_http_path default
EXAMPLE = "127.0.0.1:8765"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the MCP server for an agent (stdio by default)",
                       description="Speak MCP on stdin/stdout (what Claude Code, Codex and Claude Desktop start), "
                                   f"or streamable HTTP on a loopback address; the HTTP endpoint is {MCP_PATH}.")
    p.add_argument("--http", metavar="HOST:PORT",
                   help=f"serve streamable HTTP at HOST:PORT on loopback, e.g. {EXAMPLE}, localhost:8765 or "
                        f"[::1]:8765; clients connect to http://HOST:PORT{MCP_PATH}")
    p.set_defaults(func=run)


def parse_http(text: str) -> tuple[str, int]:
    """(host, port) from HOST:PORT, [IPv6]:PORT or a bare IPv6 loopback `::1:PORT`; loopback only."""
    raw = text.strip()
    if raw.startswith("["):
        host, sep, rest = raw[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        if not sep:
            raise ConfigError(f"--http {text!r}: unclosed '['", hint=f"e.g. --http [::1]:8765 or --http {EXAMPLE}")
    else:
        host, _, port = raw.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--http {text!r}: expected HOST:PORT with a port from 1 to 65535",
                          hint=f"e.g. --http {EXAMPLE}")
    host = host or "127.0.0.1"
    if not is_loopback(host):
        raise ConfigError(f"--http {text!r}: the server binds to loopback only (it can act on paid machines)",
                          hint=f"use 127.0.0.1, localhost or [::1], e.g. --http {EXAMPLE}; tunnel it (ssh -L) "
                               "if you need it elsewhere")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_of(host: str, port: int) -> str:
    """The URL a client must be configured with (brackets around an IPv6 address)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{MCP_PATH}"


def check_port_free(host: str, port: int) -> None:
    """Fail before starting, naming the port, when something already listens there."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host if host != "localhost" else "127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"port {port} on {host} is already in use (another `mcp-gpu serve`?)",
                                  hint=f"stop what listens there (e.g. `ss -ltnp 'sport = :{port}'` shows it) or "
                                       f"choose another port: --http {host if ':' not in host else f'[{host}]'}:"
                                       f"{port + 1}") from None
            if exc.errno == errno.EADDRNOTAVAIL:
                raise ConfigError(f"{host} is not an address of this machine", hint=f"e.g. --http {EXAMPLE}") from None
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}", hint=f"e.g. --http {EXAMPLE}") from None


def stdio_notice() -> str:
    return ("mcp-gpu serve: speaking MCP (JSON-RPC) on stdin/stdout; this is for an MCP client, not for typing. "
            "Add it to a client, e.g. `claude mcp add mcp-gpu -- mcp-gpu serve`, or see "
            "claude_desktop_config.example.json. People use the other verbs (`mcp-gpu --help`). Ctrl-C stops.")


def run(args: argparse.Namespace) -> int:
    from mcp_gpu.config import check_secret_env
    from mcp_gpu.providers import API_KEY_ENV
    from mcp_gpu.server import serve

    check_secret_env(API_KEY_ENV.values())  # at start: a placeholder key is a config error, not a key to send

    if args.http:
        host, port = parse_http(args.http)
        check_port_free(host, port)
        url = url_of(host, port)
        if sys.stderr.isatty():
            print(f"mcp-gpu serve: MCP over streamable HTTP at {url} (configure this URL in the client)",
                  file=sys.stderr, flush=True)
        serve(http=f"{host}:{port}", url=url)
        return 0
    if sys.stdin.isatty() and sys.stderr.isatty():
        print(stdio_notice(), file=sys.stderr, flush=True)
    serve()
    return 0
