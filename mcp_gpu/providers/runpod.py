"""RunPod: terminate = DELETE /pods/{id}, stop = POST /pods/{id}/stop, then GET /pods/{id} until 404 / EXITED.

REST API v1 at https://rest.runpod.io/v1 with `Authorization: Bearer <key>` (docs.runpod.io/api-reference:
"Delete a Pod" DELETE /pods/{podId}; "Stop a Pod" POST /pods/{podId}/stop). A delete that returns OK does not
mean the pod is gone (RP14): only a 404 from GET /pods/{id} does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_gpu.providers._http import GONE, HttpProvider


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
