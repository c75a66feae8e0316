"""Paperspace (DigitalOcean) machines: destroy = DELETE /machines/{id}, stop = PATCH /machines/{id}/stop.

The current API at https://api.paperspace.com/v1 with `Authorization: Bearer <key>` (docs.digitalocean.com/
reference/paperspace/api-reference/machine); the legacy Core/Gradient API was retired on 15 July 2024 (PS4).
Poll GET /machines/{id} until 404 (destroy) or state `off` (stop). A stopped machine still bills its storage,
public IP and snapshots (PS1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
