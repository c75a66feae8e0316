"""Builds the MCP server: registers tools/, resources/ and prompts. The only place that knows the SDK's shape."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer

from mcp_gpu import __version__, log
from mcp_gpu.app import App
from mcp_gpu.config import Settings

INSTRUCTIONS = """\
mcp-gpu runs long GPU jobs on machines the user rents or reaches over SSH and gets the results off before
the meter or a preemption takes them. Work in phases: audit_env (phase 0) → smoke_cpu (2) → launch_detached (3)
→ patrol every ~30 min (4) → verify_artifacts (5a) → request_teardown then confirm_teardown (5b).
Tearing down and cancelling need a HUMAN: the server asks them in a form, or they run `mcp-gpu approve ID`
in their own terminal. Never try to approve for them. `unreachable` is not `failed`.
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


TOKEN_FILE = "http.token"  # noqa: S105  (a file name, not a secret)


def http_token(settings: Settings, url: str) -> str:
    """The bearer token HTTP clients must send; created 0600 at first start and shown ONCE, on stderr, to the
    human starting the server (never to an agent: stdout is not used, and the token never reaches a tool)."""
    import os
    import secrets
    import sys

    path = settings.ensure_home() / TOKEN_FILE
    if path.exists():
        os.chmod(path, 0o600)
        token = path.read_text().strip()
        log.register_secret(token)  # scrubbed from every log line and tool answer
        return token
    token = secrets.token_urlsafe(32)
    log.register_secret(token)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    print(f"mcp-gpu: HTTP clients must send `Authorization: Bearer {token}` (stored 0600 in {path}; shown only "
          f"this once).\nClient config: {{\"mcpServers\": {{\"mcp-gpu\": {{\"type\": \"http\", \"url\": \"{url}\", "
          f"\"headers\": {{\"Authorization\": \"Bearer {token}\"}}}}}}}}", file=sys.stderr, flush=True)
    return token


class BearerAuth:
    """ASGI middleware: every HTTP request needs the bearer token, compared in constant time. Lifespan events pass.
    The SDK's own Host/Origin checks (DNS rebinding) still run behind it."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._want = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        import hmac

        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        got = b""
        for k, v in scope.get("headers", []):
            if k.lower() == b"authorization":
                got = v
        if not hmac.compare_digest(got, self._want):
            body = b'{"error": "unauthorized: send Authorization: Bearer <token from the server\'s state dir>"}'
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def serve(http: str | None = None, settings: Settings | None = None, url: str | None = None) -> None:
    """Run over stdio (default) or streamable HTTP at HOST:PORT (bearer token required)."""
    import os

    from mcp_gpu import confirm

    settings = settings or Settings.from_env()
    log.configure(settings.log_level)
    server = build_server(settings)
    if http:
        import uvicorn

        host, _, port = http.rpartition(":")
        host = host or "127.0.0.1"
        where = url or f"http://{host}:{port}/mcp"
        token = http_token(settings, where)
        log.get("mcp_gpu.server").info("http_serving", url=where)
        app = BearerAuth(server.streamable_http_app(host=host), token)
        uvicorn.Server(uvicorn.Config(app, host=host, port=int(port), **log.uvicorn_config(settings.log_level))).run()
    else:
        # Over stdio our parent is the MCP client (the agent's host). `mcp-gpu approve` refuses to run inside its
        # process tree: that is where an agent's own shell tool runs.
        from mcp_gpu.lifecycle.human_gate import client_chain

        confirm.REQUESTER.update(server_pid=os.getpid(), client_chain=client_chain(os.getppid()))
        server.run()
