"""`smoke_cpu`: phase 2, the user's entry point for a batch or two on this machine's CPU before paying for a GPU."""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from mcp_gpu.lifecycle.smoke import SmokeReport, guarded_paths, smoke_cpu
from mcp_gpu.tools._base import app_of, gpu_tool

# Honest hints: it runs whatever command it is given, on this machine, as the server's user. That command can
# write or delete files in cwd and reach the network (so not read-only, destructive possible, open world, and
# running it twice may not do the same thing). What it cannot do is read what guards the server (sandbox.py).
RUNS_CODE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)


def register(server: MCPServer) -> None:
    @server.tool(name="smoke_cpu", title="CPU smoke test of the entry point (phase 2; runs the command here)",
                 annotations=RUNS_CODE)
    @gpu_tool
    async def smoke_cpu_tool(
        command: Annotated[list[str] | str, Field(description="argv, e.g. ['python', 'train.py', '--max-steps', '2']; "
                                                              "a string is split like a shell would, but never run by one")],
        cwd: Annotated[str, Field(description="the local project directory the command runs in")],
        ctx: Context[Any, Any],
        timeout_s: Annotated[float, Field(description="kill the whole process tree after this many seconds", gt=0,
                                          le=3600)] = 120,
        env: Annotated[dict[str, str] | None, Field(description="extra environment variables (not secrets)")] = None,
        secret_env: Annotated[list[str] | None, Field(description="NAMES of variables in the server's environment "
                                                                  "the command needs (e.g. HF_TOKEN); values never "
                                                                  "pass through you and are redacted from the output")]
        = None,
    ) -> SmokeReport:
        """Run the training entry point locally for 1-2 batches on CPU (GPUs hidden, W&B/Comet/MLflow/Neptune/trackio
        off, unbuffered) and kill it with all its children at the time limit. Returns exit status, duration, the
        last lines, triage findings (missing module → the pip name; code that hard-requires CUDA → add a device
        flag; shape/config errors) and a verdict. Pass a flag that limits the run (e.g. --max-steps 2): a run that
        reaches the limit is a warning, not a pass. Runs only on the machine the server runs on, with an
        allow-listed environment (plus the secrets named in secret_env), in a sandbox that hides the server's
        state dir and provider key files (`sandbox` says how, or that this machine allows none)."""
        hide = [app_of(ctx).settings.home, *guarded_paths()]
        return await smoke_cpu(command, cwd, timeout_s=timeout_s, env=env, secret_env=secret_env, hide=hide)
