"""gpu://gotchas (compact index) and gpu://gotchas/{id} (one entry in full)."""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from mcp_gpu import gotchas
from mcp_gpu.errors import NotFoundError


def index() -> str:
    cat = gotchas.load_catalogue()
    return json.dumps({
        "count": len(cat), "families": cat.families(),
        "format": "id [severity] title; read gpu://gotchas/{id} for symptom, signals, cause and fix; "
                  "or call gotcha_lookup with an error line",
        "entries": [f"{g.id} [{g.severity}] {g.title}" for g in cat.entries],
    }, ensure_ascii=False)


def entry(gotcha_id: str) -> str:
    g = gotchas.get(gotcha_id)
    return json.dumps({**g.model_dump(mode="json", by_alias=True), "uri": g.uri}, ensure_ascii=False, indent=1)


def register(server: MCPServer) -> None:
    @server.resource("gpu://gotchas", name="gotchas", title="Gotcha catalogue", mime_type="application/json",
                     description="Index of known failures: universal, per platform, and training families.")
    def gotchas_index() -> str:
        return index()

    @server.resource("gpu://gotchas/{gotcha_id}", name="gotcha", title="One gotcha", mime_type="application/json",
                     description="One known failure: symptom, machine-detectable signals, root cause, fixed remedy.")
    def gotcha(gotcha_id: str) -> str:
        try:
            return entry(gotcha_id)
        except NotFoundError as err:
            raise ResourceNotFoundError(str(err)) from None
