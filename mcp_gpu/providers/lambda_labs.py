"""Lambda Cloud: terminate = POST /api/v1/instance-operations/terminate {"instance_ids": [id]}; no stop exists.

Base https://cloud.lambdalabs.com, HTTP basic auth with the key as the username (`curl -u $LAMBDA_API_KEY:`);
poll GET /api/v1/instances/{id} until 404 or status `terminated`. The terminate call can hang (LAM14): the
client timeout ends it and the status check decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx2

from mcp_gpu.providers import InstanceInfo
from mcp_gpu.providers._http import GONE, HttpProvider


class LambdaProvider(HttpProvider):
    name = "lambda"
    label = "Lambda"
    kind = "instance"
    key_url = "https://cloud.lambda.ai/api-keys"
    console_url = "https://cloud.lambda.ai/instances"
    default_base_url = "https://cloud.lambdalabs.com"
    destroy_verb = "terminate"
    actions = frozenset({"terminate"})
    unsupported: Mapping[str, str] = {
        "stop": "Lambda has no stop state: an instance either runs and bills, or is terminated. Shutting it down "
                "from inside (shutdown, poweroff, halt) moves it to Alert and it keeps billing (LAM3). To stop the "
                "meter, pull the results and terminate it; the local disk is wiped, only NFS survives.",
    }
    status_map: Mapping[str, str] = {
        "booting": "starting",
        "active": "running",
        "unhealthy": "running",   # still allocated, still billing
        "terminating": "terminating",
        "terminated": GONE,
    }

    def client_kwargs(self) -> dict[str, Any]:
        return {"auth": httpx2.BasicAuth(self._key, "")}

    def request_for(self, action: str, instance_id: str) -> tuple[str, str, Any]:
        return "POST", "/api/v1/instance-operations/terminate", {"instance_ids": [instance_id]}

    def status_path(self, instance_id: str) -> str:
        return f"/api/v1/instances/{instance_id}"

    def read_state(self, body: Any) -> str | None:
        data = body.get("data") if isinstance(body, dict) else None
        state = data.get("status") if isinstance(data, dict) else None
        return str(state).lower() if state else None

    # GET /api/v1/instances (docs.lambda.ai "List running instances"): {"data": [...]}, no pagination; the price
    # is the instance type's price_cents_per_hour. The listing carries no start time, so no cost-so-far.
    def list_request(self, cursor: str | None) -> str:
        return "/api/v1/instances"

    def list_page(self, body: Any) -> tuple[list[dict[str, Any]], str | None]:
        items = body.get("data") if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise TypeError("expected 'data' to be a list")
        return items, None

    def read_instance(self, item: dict[str, Any], now: float) -> InstanceInfo:
        itype = item.get("instance_type")
        cents = itype.get("price_cents_per_hour") if isinstance(itype, dict) else None
        hourly = float(cents) / 100.0 if isinstance(cents, int | float) else None
        return self.info(item.get("id"), item.get("status"), name=item.get("name"), hourly=hourly, now=now,
                         ip=item.get("ip"), ssh_host=item.get("ip"), ssh_port=22 if item.get("ip") else None)
