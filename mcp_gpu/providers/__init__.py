"""The meter-stop verbs of each platform behind one small interface: call the API, then poll until it is true.

Only this package speaks HTTP (httpx2). A provider never runs remote commands. Every HTTP provider:

- reads its key from the env var the platform names (missing → ConfigError naming it), registers it as a secret;
- sends the documented verb, then polls the instance until the platform reports it gone (or stopped, for stop),
  bounded by `poll_timeout`; 429/5xx are retried with backoff and Retry-After honoured;
- returns a `ProviderResult` and never claims `done` without the platform saying so: `timed_out` otherwise.

Platforms with no public API (AutoDL, the Chinese rentals, bare SSH) answer `manual` with the console steps.

    await get_provider("runpod").act("terminate", "abc123")  → ProviderResult(status="done", ...)
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from mcp_gpu.config import check_secret_env
from mcp_gpu.errors import ConfigError

ActionStatus = Literal["done", "manual", "nothing_to_do", "timed_out"]
Sleep = Callable[[float], Awaitable[None]]


class HttpCall(BaseModel):
    """One HTTP exchange, as much as is safe to show: never headers, never bodies."""

    method: str
    path: str
    status: int | None = Field(description="HTTP status; None when no answer came (timeout, connection error)")
    note: str | None = None


class ProviderResult(BaseModel):
    """What a meter-stop call did, as the platform itself reported it."""

    provider: str
    action: str
    instance_id: str
    status: ActionStatus
    final_state: str | None = Field(default=None, description="normalised: gone, stopped, stopping, running, ...")
    vendor_state: str | None = Field(default=None, description="the platform's own word for the last state seen")
    polls: int = 0
    http_calls: list[HttpCall] = Field(default_factory=list)
    elapsed_s: float = 0.0
    message: str
    hint: str | None = None
    steps: list[str] = Field(default_factory=list, description="console steps a human must do (status=manual)")


class InstanceInfo(BaseModel):
    """One instance as the platform's own listing reports it. Cost is an estimate: hourly price × time since
    the platform says it last started (what the platform bills may differ by storage and bandwidth)."""

    provider: str
    instance_id: str
    name: str | None = None
    state: str = Field(description="normalised: running, starting, stopping, stopped, terminating, unknown")
    vendor_state: str | None = Field(default=None, description="the platform's own word")
    hourly_usd: float | None = Field(default=None, description="the platform's current price per hour, if it says")
    running_s: float | None = Field(default=None, description="seconds since the platform last started it, if known")
    cost_so_far_usd: float | None = Field(default=None, description="hourly × running time (estimate)")
    public_ip: str | None = None
    ssh_host: str | None = None
    ssh_port: int | None = None


@runtime_checkable
class Provider(Protocol):
    """A platform's meter-stop verbs. `unsupported` maps an action to a sentence the model can repeat."""

    name: str
    actions: frozenset[str]
    unsupported: Mapping[str, str]

    async def act(self, action: str, instance_id: str) -> ProviderResult: ...


@runtime_checkable
class Lister(Protocol):
    """A platform whose API lists the account's instances (the HTTP providers)."""

    async def list_instances(self) -> list[InstanceInfo]: ...


async def list_instances(name: str, *, env: Mapping[str, str] = os.environ, max_retries: int = 4) -> list[InstanceInfo]:
    """Every instance the platform lists for the account whose key is in `env`.

    Raises:
        ConfigError: unknown platform, no key, or a platform with no listing API.
        ProviderError: see HttpProvider.list_instances.
    """
    p = get_provider(name, env=env, max_retries=max_retries)
    if not isinstance(p, Lister):
        raise ConfigError(f"{name} has no API that lists instances", hint="check its console by hand")
    return await p.list_instances()


# id → (module, class). Imported lazily so a broken or slow provider module never breaks the others.
_HTTP: dict[str, tuple[str, str]] = {
    "runpod": ("mcp_gpu.providers.runpod", "RunPodProvider"),
    "vastai": ("mcp_gpu.providers.vastai", "VastAIProvider"),
    "lambda": ("mcp_gpu.providers.lambda_labs", "LambdaProvider"),
    "paperspace": ("mcp_gpu.providers.paperspace", "PaperspaceProvider"),
}
MANUAL = ("autodl", "hengyuan", "gpushare", "matpool", "featurize", "lanrui", "china", "generic-ssh", "ssh")
_ALIASES = {"vast": "vastai", "vast.ai": "vastai", "lambda_labs": "lambda", "lambdalabs": "lambda", "bare-ssh": "ssh"}
PROVIDERS: tuple[str, ...] = (*_HTTP, *MANUAL, "local")

API_KEY_ENV: dict[str, str] = {
    "runpod": "RUNPOD_API_KEY",
    "vastai": "VAST_API_KEY",
    "lambda": "LAMBDA_API_KEY",
    "paperspace": "PAPERSPACE_API_KEY",
}


def base_url_env(name: str) -> str:
    """The env var that overrides a provider's API base URL, e.g. MCP_GPU_RUNPOD_BASE_URL."""
    return f"MCP_GPU_{name.upper().replace('-', '_')}_BASE_URL"


def get_provider(
    name: str,
    *,
    env: Mapping[str, str] = os.environ,
    base_url: str | None = None,
    http_timeout: float = 30.0,
    poll_interval: float = 5.0,
    poll_timeout: float = 600.0,
    max_retries: int = 4,
    manual_steps: Sequence[str] = (),
    sleep: Sleep | None = None,
) -> Provider:
    """The provider for a platform id (a profile name: runpod, vastai, lambda, paperspace, autodl, ..., local).

    Raises:
        ConfigError: unknown platform, or its API key env var is unset.
    """
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    if key in _HTTP:
        import importlib

        module, cls_name = _HTTP[key]
        cls = getattr(importlib.import_module(module), cls_name)
        var = API_KEY_ENV[key]
        api_key = (env.get(var) or "").strip()
        if not api_key:
            raise ConfigError(
                f"{var} is not set: mcp-gpu needs it to call the {cls.label} API",
                hint=f"create an API key in the {cls.label} console ({cls.key_url}) and export {var}=<key> in the "
                     f"environment of the MCP server or CLI (for an MCP client, its server 'env' block)",
            )
        check_secret_env([var], {var: api_key})  # a placeholder is never sent as a key
        provider: Provider = cls(
            api_key,
            base_url=base_url or env.get(base_url_env(key)) or None,
            http_timeout=http_timeout,
            poll_interval=poll_interval,
            poll_timeout=poll_timeout,
            max_retries=max_retries,
            sleep=sleep,
        )
        return provider
    if key in MANUAL:
        from mcp_gpu.providers.manual import ManualProvider

        return ManualProvider(key, steps=manual_steps)
    if key == "local":
        from mcp_gpu.providers.manual import LocalProvider

        return LocalProvider()
    raise ConfigError(f"unknown platform {name!r} for teardown",
                      hint=f"use one of: {', '.join(PROVIDERS)}")


__all__ = ["API_KEY_ENV", "MANUAL", "PROVIDERS", "ActionStatus", "HttpCall", "InstanceInfo", "Lister", "Provider",
           "ProviderResult", "base_url_env", "get_provider", "list_instances"]
