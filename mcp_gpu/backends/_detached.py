"""What tmux and nohup share: the same wrapper in the run dir, observed and cancelled through its files.

The wrapper's process group is the whole job tree, so cancel signals the group (TERM, a grace window, then
KILL), never a name found by pgrep.
"""

from __future__ import annotations

from typing import Any, ClassVar

from mcp_gpu.backends import LaunchSpec, Observation, RunLayout
from mcp_gpu.backends.wrapper import CANCEL, encode_env, parse_kv
from mcp_gpu.errors import CommandFailed, UnsupportedError
from mcp_gpu.models import JobHandle
from mcp_gpu.probes import load
from mcp_gpu.transport import Transport

DEFAULT_GRACE_S = 10
DEFAULT_HEARTBEAT_S = 15


def _int(value: str | None) -> int | None:
    return int(value) if value and value.strip().lstrip("-").isdigit() else None


class DetachedBackend:
    """Base for backends that start `wrapper.sh` detached on the host itself."""

    name: ClassVar[str] = "detached"
    start_script: ClassVar[str] = ""
    needs: ClassVar[tuple[str, ...]] = ()

    async def available(self, t: Transport) -> bool:
        res = await t.run_script(load("have.sh"), list(self.needs), timeout=30)
        return res.ok and set(self.needs) <= set(res.stdout.split())

    def start_args(self, spec: LaunchSpec, layout: RunLayout, script_path: str) -> tuple[list[str], dict[str, Any]]:
        raise NotImplementedError

    def session_args(self, handle: dict[str, Any]) -> list[str]:
        return []

    async def launch(self, t: Transport, spec: LaunchSpec, layout: RunLayout, script_path: str) -> dict[str, Any]:
        args, handle = self.start_args(spec, layout, script_path)
        res = await t.run_script(self.start_script, args, stdin=encode_env(spec.env, spec.secrets), timeout=90)
        if res.exit_status == 20:
            raise UnsupportedError(f"{t.host}: {self.name} is not available: {res.stderr.strip()}",
                                   hint="use backend='auto' to fall back to nohup/setsid")
        if not res.ok:
            raise CommandFailed(f"{t.host}: starting the job under {self.name} failed "
                                f"(exit {res.exit_status}): {' | '.join(res.tail(3)) or 'no output'}",
                                hint="read the error; the run directory is kept for inspection",
                                data={"run_dir": layout.run_dir})
        kv = parse_kv(res.stdout)
        grace = spec.options.get("grace_s", DEFAULT_GRACE_S)
        return {"backend": self.name, **handle, "pgid": _int(kv.get("pgid")), "grace_s": grace}

    async def observe(self, t: Transport, handle: dict[str, Any], layout: RunLayout) -> Observation:
        from mcp_gpu.backends import observe

        jo, v = await observe.observe_one(t, observe.target_for(self.name, handle, layout.run_dir))
        return observe.to_observation(jo, v)

    async def cancel(self, t: Transport, handle: dict[str, Any], layout: RunLayout) -> None:
        h = JobHandle.of(handle)
        grace = int(h.grace_s if h.grace_s is not None else DEFAULT_GRACE_S)
        hint = str(h.pgid or "")
        res = await t.run_script(CANCEL, [layout.run_dir, str(grace), hint, *self.session_args(handle)],
                                 timeout=grace + 60)
        if not res.ok:
            raise CommandFailed(f"{t.host}: cancelling the job failed (exit {res.exit_status}): "
                                f"{' | '.join(res.tail(3)) or 'no output'}",
                                hint="check the host; nothing else was changed")
        if parse_kv(res.stdout).get("left") == "1":
            raise CommandFailed(f"{t.host}: processes of the job's group survived SIGKILL",
                                hint="inspect the host (`ps -eo pid,pgid,stat,cmd`); a process in D state "
                                     "may be stuck on I/O")
