"""Paperspace (DigitalOcean) machines: destroy = DELETE /machines/{id}, stop = PATCH /machines/{id}/stop.

The current API at https://api.paperspace.com/v1 with `Authorization: Bearer <key>` (docs.digitalocean.com/
reference/paperspace/api-reference/machine); the legacy Core/Gradient API was retired on 15 July 2024 (PS4).
Poll GET /machines/{id} until 404 (destroy) or state `off` (stop). A stopped machine still bills its storage,
public IP and snapshots (PS1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from mcp_gpu.providers import InstanceInfo
from mcp_gpu.providers._http import HttpProvider


class PaperspaceProvider(HttpProvider):
    name = "paperspace"
    label = "Paperspace"
    kind = "machine"
    key_url = "https://console.paperspace.com/settings/apikeys"
    console_url = "https://console.paperspace.com/machines"
    default_base_url = "https://api.paperspace.com/v1"
    destroy_verb = "destroy"
    actions = frozenset({"destroy", "stop"})
    status_map: Mapping[str, str] = {
        "provisioning": "starting",
        "starting": "starting",
        "restarting": "starting",
        "upgrading": "starting",
        "ready": "running",
        "serviceready": "running",
        "stopping": "stopping",
        "off": "stopped",
        "failed": "unknown",
    }

    def request_for(self, action: str, instance_id: str) -> tuple[str, str, Any]:
        if action == "stop":
            return "PATCH", f"/machines/{instance_id}/stop", None
        return "DELETE", f"/machines/{instance_id}", None

    def status_path(self, instance_id: str) -> str:
        return f"/machines/{instance_id}"

    def read_state(self, body: Any) -> str | None:
        data = body.get("data", body) if isinstance(body, dict) else None
        state = data.get("state") if isinstance(data, dict) else None
        return str(state).lower() if state else None

    # GET /machines?limit=..&after=<cursor> (Paperspace API "List machines"): {"items": [...], "hasMore": bool,
    # "nextPage": cursor}. The listing carries no price, so no cost figure.
    def list_request(self, cursor: str | None) -> str:
        q = {"limit": 120, **({"after": cursor} if cursor else {})}
        return f"/machines?{urlencode(q)}"

    def list_page(self, body: Any) -> tuple[list[dict[str, Any]], str | None]:
        items = body.get("items") if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise TypeError("expected 'items' to be a list")
        nxt = body.get("nextPage")
        return items, (str(nxt) if body.get("hasMore") and nxt else None)

    def read_instance(self, item: dict[str, Any], now: float) -> InstanceInfo:
        return self.info(item.get("id"), item.get("state"), name=item.get("name"), now=now, ip=item.get("publicIp"),
                         ssh_host=item.get("publicIp"), ssh_port=22 if item.get("publicIp") else None)
