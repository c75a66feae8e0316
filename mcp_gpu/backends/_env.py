"""Environment variables a launch hands to a job: names checked, values only ever sent over stdin."""

from __future__ import annotations

import re
import signal

from mcp_gpu.errors import ConfigError

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def check_env_name(name: str) -> str:
    if not _ENV_NAME.match(name or ""):
        raise ConfigError(f"invalid environment variable name {name!r}",
                          hint="use letters, digits and _ only, not starting with a digit (e.g. HF_TOKEN)")
    return name


def nul_records(*envs: dict[str, str]) -> bytes:
    """NAME=value records, NUL-terminated, for a shell that `read -d ''`s them: any value survives, newlines too."""
    out = bytearray()
    for env in envs:
        for name, value in env.items():
            check_env_name(name)
            if "\0" in value:
                raise ConfigError(f"the value of {name} contains a NUL byte", hint="environment values cannot hold NUL")
            out += f"{name}={value}".encode() + b"\0"
    return bytes(out)


def signal_name(number: int) -> str | None:
    try:
        return signal.Signals(number).name.removeprefix("SIG")
    except ValueError:
        return None


def exit_signal_of(code: int | None) -> str | None:
    """A shell reports death by signal N as 128+N (137 = KILL, 143 = TERM)."""
    if code is not None and 128 < code < 128 + 65:
        return signal_name(code - 128)
    return None
