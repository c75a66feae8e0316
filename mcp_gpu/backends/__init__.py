"""How a job is detached and observed on a host: tmux, nohup/setsid, Slurm, Kubernetes.

A backend receives a Transport and never imports asyncssh. Every backend launches the same wrapper
(see `wrapper.py`), which records pid, heartbeat and the exit status atomically in the run directory, so
the outcome is known even when tmux, the scheduler's memory or the connection is gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from mcp_gpu.models import JobState
from mcp_gpu.transport import Transport


@dataclass(frozen=True)
class RunLayout:
    """The remote run directory of one job (ARCHITECTURE.md 'Contracts')."""

    run_dir: str

    @property
    def log(self) -> str:
        return f"{self.run_dir}/out.log"

    @property
    def pid(self) -> str:
        return f"{self.run_dir}/pid"

    @property
    def exit_code(self) -> str:
        return f"{self.run_dir}/exit_code"

    @property
    def heartbeat(self) -> str:
        return f"{self.run_dir}/heartbeat"

    @property
    def meta(self) -> str:
        return f"{self.run_dir}/meta.json"

    @property
    def pgid(self) -> str:
        return f"{self.run_dir}/pgid"

    @property
    def wrapper(self) -> str:
        return f"{self.run_dir}/wrapper.sh"

    @property
    def cancelled(self) -> str:
        return f"{self.run_dir}/cancelled"

    def script(self, sha: str) -> str:
        return f"{self.run_dir}/run-{sha[:12]}.sh"


@dataclass
class LaunchSpec:
    """What launch was asked. `secrets` holds values only in memory, for stdin; never stored or logged."""

    job_id: str
    name: str
    command: str
    workdir: str
    env: dict[str, str] = field(default_factory=dict)  # non-secret, recorded
    secrets: dict[str, str] = field(default_factory=dict)  # NAME -> value, sent over stdin only
    options: dict[str, Any] = field(default_factory=dict)  # backend-specific (partition, gpus, image, ...)
    # argv put before the wrapper (a local job: the mount namespace that hides the server's state dir and key files)
    sandbox: tuple[str, ...] = ()


@dataclass(frozen=True)
class Observation:
    """What a backend can see of a job right now. `alive=None` means it cannot tell."""

    alive: bool | None
    exit_code: int | None = None
    exit_signal: str | None = None
    scheduler_state: str | None = None
    detail: str = ""
    heartbeat_age: float | None = None  # seconds since the wrapper's heartbeat, where the backend has one
    cancelled: str | None = None  # the run dir's `cancelled` record (`<iso time> TERM|KILL|gone|session`)
    state: JobState | None = None  # the registry state `observe.verdict` decided, when it made this observation


class Backend(Protocol):
    name: ClassVar[str]

    async def available(self, t: Transport) -> bool: ...

    async def launch(self, t: Transport, spec: LaunchSpec, layout: RunLayout, script_path: str) -> dict[str, Any]:
        """Start the wrapper detached; return the handle to store (session, pid, slurm id, k8s name...)."""
        ...

    async def observe(self, t: Transport, handle: dict[str, Any], layout: RunLayout) -> Observation:
        """One job through the one observation path (`backends.observe`)."""
        ...

    async def cancel(self, t: Transport, handle: dict[str, Any], layout: RunLayout) -> None: ...
