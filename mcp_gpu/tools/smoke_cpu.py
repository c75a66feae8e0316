"""`smoke_cpu`: phase 2, the user's entry point for a batch or two on this machine's CPU before paying for a GPU."""

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from mcp_gpu.lifecycle.smoke import SmokeReport, smoke_cpu
from mcp_gpu.tools._base import ACTS, gpu_tool


def register(server: MCPServer) -> None:
    @server.tool(name="smoke_cpu", title="CPU smoke test of the entry point (phase 2)", annotations=ACTS)
    @gpu_tool
    async def smoke_cpu_tool(
        command: Annotated[list[str] | str, Field(description="argv, e.g. ['python', 'train.py', '--max-steps', '2']; "
                                                              "a string is split like a shell would, but never run by one")],
        cwd: Annotated[str, Field(description="the local project directory the command runs in")],
        timeout_s: Annotated[float, Field(description="kill the whole process tree after this many seconds", gt=0,
                                          le=3600)] = 120,
        env: Annotated[dict[str, str] | None, Field(description="extra environment variables (not secrets)")] = None,
    ) -> SmokeReport:
        """Run the training entry point locally for 1-2 batches on CPU (GPUs hidden, W&B/Comet/MLflow/Neptune/trackio
        off, unbuffered) and kill it with all its children at the time limit. Returns exit status, duration, the
        last lines, triage findings (missing module → the pip name; code that hard-requires CUDA → add a device
        flag; shape/config errors) and a verdict. Pass a flag that limits the run (e.g. --max-steps 2): a run that
        reaches the limit is a warning, not a pass. Runs only on the machine the server runs on."""
        return await smoke_cpu(command, cwd, timeout_s=timeout_s, env=env)
