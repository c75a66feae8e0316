"""gpu://jobs/{job_id}: a job as the registry knows it (handles, state history, last patrol), without a probe."""

import json
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from mcp_gpu.app import App
from mcp_gpu.store import jobs as jobs_repo


def job_json(app: App, job_id: str) -> str:
    rec = jobs_repo.find(app.store, job_id)
    if rec is None:
        raise ResourceNotFoundError(f"no job {job_id!r}: job_list shows the known jobs")
    events = [e.model_dump() for e in jobs_repo.events(app.store, job_id)[-20:]]
    body = rec.model_dump(mode="json", exclude={"last_patrol"})
    lp = rec.last_patrol
    body["last_patrol"] = {k: lp.get(k) for k in ("state", "at", "progress", "history") if k in lp}
    body["events"] = events
    return json.dumps(body, indent=1)


def register(server: MCPServer) -> None:
    @server.resource("gpu://jobs/{job_id}", name="job", title="One job", mime_type="application/json",
                     description="A launched job from the local registry: host, backend handle, run dir, state, "
                                 "last patrol and its event history. Call patrol for a live look.")
    def job(job_id: str, ctx: Context[Any, Any]) -> str:
        app = ctx.request_context.lifespan_context
        assert isinstance(app, App)
        return job_json(app, job_id)
