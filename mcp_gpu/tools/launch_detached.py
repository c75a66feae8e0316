"""`launch_detached`: phase 3, start a job detached on a host with a first-minute probe."""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from mcp_gpu.lifecycle.guard import GuardRules, plan_guard
from mcp_gpu.lifecycle.launch import LaunchResult, launch_detached
from mcp_gpu.tools._base import CREATES, app_of, gpu_tool


def register(server: MCPServer) -> None:
    @server.tool(name="launch_detached", title="Launch a detached job (phase 3)", annotations=CREATES)
    @gpu_tool
    async def launch_detached_tool(
        host: Annotated[str, Field(description="'local', an ~/.ssh/config alias, user@host[:port], or a registered name")],
        command: Annotated[str, Field(description="the shell command(s) to run, e.g. 'python -u train.py --lr 3e-4'")],
        workdir: Annotated[str, Field(description="directory on the host the job runs from (must exist)")],
        name: Annotated[str, Field(description="job name: 1-63 of A-Z a-z 0-9 . _ -; same name = same job")],
        ctx: Context[Any, Any],
        backend: Annotated[str, Field(description="auto (tmux, else nohup), tmux, nohup, slurm, kubernetes")] = "auto",
        env: Annotated[dict[str, str] | None, Field(description="NON-secret environment variables")] = None,
        secret_env: Annotated[list[str] | None, Field(description="NAMES of env vars in the server's environment to "
                                                                  "pass to the job (API keys); never the values")] = None,
        probe_s: Annotated[float, Field(description="seconds to watch the start for a crash", ge=0, le=600)] = 60,
        run_root: Annotated[str | None, Field(description="where run dirs go (default ~/.mcp-gpu/runs)")] = None,
        outputs: Annotated[list[str] | None, Field(description="output/checkpoint dirs (default workdir/checkpoints)")] = None,
        relaunch: Annotated[bool, Field(description="start a new attempt if the previous one finished")] = False,
        options: Annotated[dict[str, Any] | None, Field(description="backend options (slurm partition/gpus/time, "
                                                                    "k8s image, grace_s, tmux_socket ...)")] = None,
        stall_floor_s: Annotated[float | None, Field(description="patrol never calls the job stalled before this "
                                                                 "many silent seconds (default 120; past that, five "
                                                                 "of its own log intervals)", gt=0)] = None,
        guard: Annotated[GuardRules | None, Field(description="ask for an on-box guard (max_hours / idle_minutes) "
                                                              "that stops the meter if nobody watches; the human "
                                                              "approves it with guard_arm")] = None,
    ) -> LaunchResult:
        """Start a long job detached (survives the agent, the SSH connection and the laptop lid), then probe it for
        up to probe_s: `state` running / failed (with findings and the first log lines) / succeeded. Idempotent: the
        same name on the same host while it still runs returns that job (`reused: true`); a finished name starts a
        new attempt. Secrets go by env var NAME only. Run smoke_cpu first."""
        res = await launch_detached(app_of(ctx), host, command, workdir, name, backend=backend, env=env,
                                    secret_env=secret_env, probe_s=probe_s, run_root=run_root, outputs=outputs,
                                    relaunch=relaunch, options=options, stall_floor_s=stall_floor_s)
        if guard is not None:
            # arming is a future stop: only the human approves it, so launch asks for it rather than doing it
            plan = plan_guard(app_of(ctx), host, guard)
            args = ", ".join(f"{k}={v!r}" for k, v in (("host", host), ("max_hours", guard.max_hours),
                                                        ("idle_minutes", guard.idle_minutes)) if v is not None)
            res.next = (f"guard requested: call guard_arm({args}) — the human approves it in a form "
                        f"({plan.summary}); then {res.next}")
        return res
