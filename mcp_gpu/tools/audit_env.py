"""`audit_env`: phase 0, one probe of a host."""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from mcp_gpu.lifecycle.audit import AuditReport, audit_env
from mcp_gpu.tools._base import READ_ONLY, app_of, gpu_tool


def register(server: MCPServer) -> None:
    @server.tool(name="audit_env", title="Audit a GPU host (phase 0)", annotations=READ_ONLY)
    @gpu_tool
    async def audit_env_tool(
        host: Annotated[str, Field(description="'local', an ~/.ssh/config alias, user@host[:port], or a registered name")],
        ctx: Context[Any, Any],
        platform: Annotated[str | None, Field(description="platform profile, e.g. runpod, autodl, vastai")] = None,
        checkpoint_gb: Annotated[float | None, Field(description="size of one checkpoint in GB", ge=0)] = None,
        keep: Annotated[int, Field(description="checkpoints kept at once (save_top_k)", ge=1)] = 3,
        scratch_gb: Annotated[float, Field(description="extra scratch space the run needs, GB", ge=0)] = 0,
        run_dir: Annotated[str | None, Field(description="where checkpoints will be written")] = None,
        python: Annotated[str, Field(description="the interpreter the job will use")] = "python3",
    ) -> AuditReport:
        """Audit a host in one round trip before paying for a run: GPUs (health, ECC, Xid, throttling), disks and
        inodes, cgroup memory and OOM kills, /dev/shm, Python/torch/CUDA, and the checkpoint disk budget.
        Read `summary` first; `findings` carry the fixed remedy for anything wrong."""
        return await audit_env(app_of(ctx), host, platform=platform, checkpoint_gb=checkpoint_gb, keep=keep,
                               scratch_gb=scratch_gb, run_dir=run_dir, python=python)
