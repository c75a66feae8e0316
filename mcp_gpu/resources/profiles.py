"""gpu://profiles (index) and gpu://profiles/{name} (the head as JSON, then the Markdown body)."""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from mcp_gpu import profiles
from mcp_gpu.errors import NotFoundError


def index() -> list[dict[str, Any]]:
    out = []
    for p in profiles.all_profiles():
        h = p.head
        out.append({"name": h.name, "title": h.title, "kind": h.kind, "meter_stop": h.meter_stop.verb,
                    "irreversible": h.meter_stop.irreversible, "teardown": h.teardown.method,
                    "spot": h.spot.available, "verified": p.oldest_fact(), "uri": f"gpu://profiles/{h.name}"})
    return out


def render(name: str) -> str:
    p = profiles.load_profile(name)
    head = json.dumps(p.head.model_dump(mode="json"), indent=1, ensure_ascii=False)
    return (f"<!-- gpu://profiles/{p.name}: machine-readable head first, then the notes -->\n"
            f"```json\n{head}\n```\n\n{p.body}")


def register(server: MCPServer) -> None:
    @server.resource("gpu://profiles", name="profiles", title="Platform profiles", mime_type="application/json",
                     description="Every platform mcp-gpu knows: meter-stop verb, teardown method, spot, fact age.")
    def profiles_index() -> str:
        try:
            return json.dumps(index(), ensure_ascii=False)
        except profiles.ProfileError as err:
            raise ResourceError(str(err)) from None

    @server.resource("gpu://profiles/{name}", name="profile", title="One platform profile", mime_type="text/markdown",
                     description="What stops the meter, what survives stop/destroy, danger clocks, teardown steps.")
    def profile(name: str) -> str:
        try:
            return render(name)
        except NotFoundError as err:
            raise ResourceNotFoundError(str(err)) from None
        except profiles.ProfileError as err:
            raise ResourceError(str(err)) from None
