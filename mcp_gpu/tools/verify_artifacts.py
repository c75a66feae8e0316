"""`verify_artifacts`: phase 5a, resumable hashed pull + load checks + manifest (the teardown gate's evidence)."""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from mcp_gpu.lifecycle.verify import VerifyReport, verify_artifacts
from mcp_gpu.tools._base import app_of, gpu_tool

WRITES_LOCALLY = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                 open_world_hint=True)


def register(server: MCPServer) -> None:
    @server.tool(name="verify_artifacts", title="Pull and verify a job's results (phase 5a)",
                 annotations=WRITES_LOCALLY)
    @gpu_tool
    async def verify_artifacts_tool(
        ctx: Context[Any, Any],
        job_id: Annotated[str | None, Field(description="job id (or name): its declared outputs are pulled")] = None,
        host: Annotated[str | None, Field(description="host to pull from when there is no job; needs paths")] = None,
        paths: Annotated[list[str] | None, Field(description="remote files/directories (default: the job's outputs)")]
        = None,
        dest: Annotated[str | None, Field(description="local folder (default: <state dir>/artifacts/<job or host>)")]
        = None,
        remote_check: Annotated[bool, Field(description="also check checkpoints with the remote's own python3")]
        = False,
    ) -> VerifyReport:
        """Pull a job's checkpoints and outputs (resumable, several at once, SHA-256 end to end), load-check each
        (safetensors, torch, numpy, json, csv), and write MANIFEST.json plus a registry record. Run it again after
        an interruption: it resumes, and files already verified are not pulled again. `all_ok` is the evidence
        request_teardown reads; `findings` say what is wrong (checkpoint_corrupt, path_refused, ssh_disconnect)."""
        app = app_of(ctx)

        async def progress(done: int, total: int, msg: str) -> None:
            await ctx.report_progress(done, total, msg)

        return await verify_artifacts(app, job_id=job_id, host=host, paths=paths, dest=dest,
                                      remote_check=remote_check, progress=progress)
