"""RunPod: terminate = DELETE /pods/{id}, stop = POST /pods/{id}/stop, then GET /pods/{id} until 404 / EXITED.

REST API v1 at https://rest.runpod.io/v1 with `Authorization: Bearer <key>` (docs.runpod.io/api-reference:
"Delete a Pod" DELETE /pods/{podId}; "Stop a Pod" POST /pods/{podId}/stop). A delete that returns OK does not
mean the pod is gone (RP14): only a 404 from GET /pods/{id} does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_gpu.providers import InstanceInfo
from mcp_gpu.providers._http import GONE, HttpProvider, parse_time


class RunPodProvider(HttpProvider):
    name = "runpod"
    label = "RunPod"
    kind = "pod"
    key_url = "https://www.console.runpod.io/user/settings"
    console_url = "https://www.console.runpod.io/pods"
    default_base_url = "https://rest.runpod.io/v1"
    destroy_verb = "terminate"
    actions = frozenset({"terminate", "stop"})
    # desiredStatus of a pod → ours. A stopped pod still bills its volume disk at 2x (RP4).
    status_map: Mapping[str, str] = {
        "RUNNING": "running",
        "CREATED": "starting",
        "RESTARTING": "starting",
        "EXITED": "stopped",
        "TERMINATED": GONE,
    }

    def request_for(self, action: str, instance_id: str) -> tuple[str, str, Any]:
        if action == "stop":
            return "POST", f"/pods/{instance_id}/stop", None
        return "DELETE", f"/pods/{instance_id}", None

    def status_path(self, instance_id: str) -> str:
        return f"/pods/{instance_id}"

    def read_state(self, body: Any) -> str | None:
        if not isinstance(body, dict):
            return None
        state = body.get("desiredStatus") or body.get("status")
        return str(state).upper() if state else None

    # GET /pods (docs.runpod.io "List Pods"): a JSON array of Pod objects, no pagination.
    def list_request(self, cursor: str | None) -> str:
        return "/pods"

    def list_page(self, body: Any) -> tuple[list[dict[str, Any]], str | None]:
        items = body if isinstance(body, list) else body.get("pods") if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise TypeError("expected a list of pods")
        return items, None

    def read_instance(self, item: dict[str, Any], now: float) -> InstanceInfo:
        pm = item.get("portMappings")
        ports: dict[str, Any] = pm if isinstance(pm, dict) else {}
        vendor = item.get("desiredStatus") or item.get("status")
        return self.info(item.get("id"), str(vendor).upper() if vendor else None, name=item.get("name"),
                         hourly=item.get("costPerHr") or item.get("adjustedCostPerHr"),
                         started=parse_time(item.get("lastStartedAt")), now=now, ip=item.get("publicIp"),
                         ssh_host=item.get("publicIp"), ssh_port=ports.get("22"))
