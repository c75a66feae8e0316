"""The backend registry: name → Backend, and how `auto` picks one.

Other backends join by defining a module-level `BACKEND` instance in a module of this package (it is
imported on first lookup), or by calling `register(...)`.
"""

from __future__ import annotations

import importlib
import pkgutil

from mcp_gpu import backends as _pkg
from mcp_gpu import log
from mcp_gpu.backends import Backend, Observation
from mcp_gpu.backends.nohup import NohupBackend
from mcp_gpu.backends.tmux import TmuxBackend
from mcp_gpu.errors import ConfigError, UnsupportedError
from mcp_gpu.models import JobState
from mcp_gpu.probes import load
from mcp_gpu.transport import Transport

_log = log.get("mcp_gpu.backends")
BACKENDS: dict[str, Backend] = {}
_SKIP = frozenset({"registry", "wrapper", "tmux", "nohup"})
_discovered = False


def register(backend: Backend) -> Backend:
    BACKENDS[backend.name] = backend
    return backend


register(TmuxBackend())
register(NohupBackend())


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
    for info in pkgutil.iter_modules(_pkg.__path__):
        if info.name.startswith("_") or info.name in _SKIP:
            continue
        try:
            module = importlib.import_module(f"{_pkg.__name__}.{info.name}")
        except ImportError as exc:  # an optional backend whose dependency is missing
            _log.warning("backend_unavailable", module=info.name, error=str(exc))
            continue
        inst = getattr(module, "BACKEND", None)
        if inst is not None and getattr(inst, "name", None):
            BACKENDS.setdefault(inst.name, inst)


def names() -> list[str]:
    _discover()
    return sorted(BACKENDS)


def get_backend(name: str) -> Backend:
    _discover()
    b = BACKENDS.get(name)
    if b is None:
        raise ConfigError(f"unknown backend {name!r}", hint=f"use auto or one of: {', '.join(sorted(BACKENDS))}")
    return b


async def choose_backend(t: Transport, requested: str | None = "auto", profile_default: str | None = None) -> Backend:
    """An explicit backend is used as asked (and must be present); `auto` takes the profile's default,
    else tmux where present, else nohup/setsid."""
    want = (requested or "auto").strip()
    if want == "auto" and profile_default and profile_default != "auto":
        want = profile_default
    if want != "auto":
        b = get_backend(want)
        if not await b.available(t):
            raise UnsupportedError(f"{t.host}: backend {want!r} is not available there",
                                   hint="use backend='auto' to pick what the host has")
        return b
    # one round trip for both candidates: which of their commands does the host have?
    res = await t.run_script(load("have.sh"), sorted(set(TmuxBackend.needs) | set(NohupBackend.needs)), timeout=30)
    have = set(res.stdout.split())
    for candidate in ("tmux", "nohup"):
        b = get_backend(candidate)
        needs = getattr(b, "needs", ())
        if needs and set(needs) <= have:
            return b
    raise UnsupportedError(f"{t.host}: neither tmux nor setsid/nohup is available",
                           hint="install tmux (apt-get install tmux) or util-linux's setsid")


def scheduler_verdict(name: str, obs: Observation) -> JobState | None:
    """What a scheduler backend (Slurm, Kubernetes) says an observation means; None for tmux/nohup, whose
    verdict is the wrapper's exit file."""
    state_of = getattr(get_backend(name), "state_of", None)
    if state_of is None or not obs.scheduler_state:
        return None
    verdict: JobState | None = state_of(obs)
    return verdict
