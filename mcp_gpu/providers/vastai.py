"""vast.ai: destroy = DELETE /api/v0/instances/{id}/, stop = PUT /api/v0/instances/{id}/ {"state": "stopped"}.

Base https://console.vast.ai, `Authorization: Bearer <key>` (docs.vast.ai/api-reference/instances/destroy-instance:
DELETE /api/v0/instances/{id}/; start/stop is the same path with PUT and a `state`). Destroy is eventually
consistent (VAST15): a 404, `instances: null`, or actual_status `destroyed` / `exited` count as final.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from mcp_gpu.providers import InstanceInfo
from mcp_gpu.providers._http import GONE, HttpProvider, Observation


class VastAIProvider(HttpProvider):
    name = "vastai"
    label = "vast.ai"
    kind = "instance"
    key_url = "https://cloud.vast.ai/manage-keys/"
    console_url = "https://cloud.vast.ai/instances/"
    default_base_url = "https://console.vast.ai"
    destroy_verb = "destroy"
    actions = frozenset({"destroy", "stop"})
    # actual_status → ours. A stopped instance keeps billing its disk, even with a negative balance (VAST1).
    status_map: Mapping[str, str] = {
        "running": "running",
        "loading": "starting",
        "scheduling": "starting",
        "rebooting": "starting",
        "frozen": "running",      # paused with memory kept: GPU charges still apply
        "stopped": "stopped",
        "exited": "stopped",
        "offline": "unknown",
        "unknown": "unknown",
        "destroyed": GONE,
    }

    def request_for(self, action: str, instance_id: str) -> tuple[str, str, Any]:
        path = f"/api/v0/instances/{instance_id}/"
        if action == "stop":
            return "PUT", path, {"state": "stopped"}
        return "DELETE", path, None

    def status_path(self, instance_id: str) -> str:
        return f"/api/v0/instances/{instance_id}/"

    def read_state(self, body: Any) -> str | None:
        if not isinstance(body, dict):
            return None
        if "instances" in body:
            inst = body["instances"]
            if isinstance(inst, list):
                inst = inst[0] if inst else None
            if inst is None:
                return GONE
        else:
            inst = body
        if not isinstance(inst, dict):
            return None
        state = inst.get("actual_status")
        return str(state).lower() if state else None

    def reached(self, action: str, obs: Observation) -> bool:
        if action == "destroy" and obs.vendor == "exited":
            return True  # VAST15: the platform's own final word after a destroy
        return super().reached(action, obs)

    # GET /api/v1/instances/ (docs.vast.ai "show instances (v1)"): {"instances": [...], "next_token": ...};
    # the next page is asked for with ?next_token=<token>.
    def list_request(self, cursor: str | None) -> str:
        return "/api/v1/instances/" + (f"?{urlencode({'next_token': cursor})}" if cursor else "")

    def list_page(self, body: Any) -> tuple[list[dict[str, Any]], str | None]:
        items = body.get("instances") if isinstance(body, dict) else None
        if items is None:
            items = []
        if not isinstance(items, list):
            raise TypeError("expected 'instances' to be a list")
        token = body.get("next_token")
        return items, str(token) if token else None

    def read_instance(self, item: dict[str, Any], now: float) -> InstanceInfo:
        started = item.get("start_date")
        return self.info(item.get("id"), item.get("actual_status"), name=item.get("label"),
                         hourly=item.get("dph_total"), started=float(started) if isinstance(started, int | float) else None,
                         now=now, ip=item.get("public_ipaddr"), ssh_host=item.get("ssh_host"),
                         ssh_port=item.get("ssh_port"))
