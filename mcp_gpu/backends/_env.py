"""Environment variables a launch hands to a job: names checked, values only ever sent over stdin.

Two rules live here, shared by launch, the local backends and `smoke_cpu`:
- `check_job_env_name`: names a job's `env`/`secret_env` may NOT set: the wrapper's own shell variables (a job
  could otherwise swap the script the wrapper runs for another than the one recorded, attack 10) and the
  variables that make bash, the dynamic loader or the wrapper run other code before the recorded script.
- `allowed_env`: what a command the server runs on THIS machine (a local job, a smoke) inherits from the
  server's environment: an allow-list, so no provider key, token or MCP_GPU_* setting leaks to it unnamed.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Mapping

from mcp_gpu.errors import ConfigError

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def check_env_name(name: str) -> str:
    if not _ENV_NAME.fullmatch(name or ""):
        raise ConfigError(f"invalid environment variable name {name!r}",
                          hint="use letters, digits and _ only, not starting with a digit (e.g. HF_TOKEN)")
    return name


# The wrapper's shell variables (backends/wrapper.py WRAPPER and the start scripts). The wrapper exports each env
# line by name, so a job env named like one of them would replace it (e.g. `script` → another script runs).
WRAPPER_VARS = frozenset({"rd", "script", "wd", "src", "hb", "got", "line", "name", "val", "pg", "st", "me",
                          "hbpid", "rc", "sig", "fifo", "sock", "sess", "i", "f", "p", "root", "job", "sha", "meta",
                          "wrapper", "kv", "w"})
# Variables that run code or change how the wrapper's own shell parses and starts the recorded script.
# PATH, LD_LIBRARY_PATH and PYTHONPATH stay allowed: jobs legitimately need them, and the wrapper starts the
# recorded script with its own absolute $BASH. (PATH does steer the wrapper's helpers — mv, touch, sleep — to a
# program already on the machine: that is code a job on that machine could run anyway; the names are recorded.)
DANGEROUS_VARS = frozenset({"BASH", "BASH_ENV", "ENV", "BASHOPTS", "SHELLOPTS", "IFS", "PS4", "PROMPT_COMMAND",
                            "BASH_XTRACEFD", "CDPATH", "GLOBIGNORE", "LD_PRELOAD", "LD_AUDIT", "BASHPID", "PPID",
                            "UID", "EUID", "SHLVL"})
RESERVED_PREFIXES = ("MCP_GPU_", "BASH_FUNC_")


def check_job_env_name(name: str) -> str:
    """A name a job's env or secret_env may set (attack 10: the wrapper's own variables cannot be overridden)."""
    check_env_name(name)
    if name in WRAPPER_VARS or name in DANGEROUS_VARS or name.startswith(RESERVED_PREFIXES):
        raise ConfigError(f"environment variable {name!r} is reserved: it would change what the job wrapper runs "
                          "(its own variables, the shell's start-up hooks, the loader, or mcp-gpu's settings)",
                          hint="rename it (e.g. MY_" + name.upper() + "); set shell or loader behaviour inside the "
                               "command itself, where it is recorded with the script")
    return name


# What a command run on this machine may inherit from the server's environment (by name, or by prefix).
ALLOWED_NAMES = frozenset({"PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR",
                           "TMUX_TMPDIR", "PYTHONPATH", "PYTHONHOME", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
                           "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONHASHSEED", "PYTHONWARNINGS", "VIRTUAL_ENV",
                           "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
                           "OMP_NUM_THREADS", "MKL_NUM_THREADS", "HF_HOME", "HF_ENDPOINT", "HF_HUB_OFFLINE",
                           "TRANSFORMERS_CACHE", "TORCH_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                           "XDG_RUNTIME_DIR", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "UV_INDEX_URL", "SSL_CERT_FILE",
                           "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
                           "KUBECONFIG", "SLURM_CONF",
                           "http_proxy", "https_proxy", "no_proxy"})
ALLOWED_PREFIXES = ("LC_", "CONDA_")
_SECRETISH = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|_KEY$|CREDENTIAL|AUTH|COOKIE|PRIVATE", re.I)


def allowed_env(source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed part of `source` (default: the server's environment). A URL with credentials in it
    (user:password@host) or anything whose name looks secret is dropped even when its name is allowed."""
    src = os.environ if source is None else source
    out: dict[str, str] = {}
    for k, v in src.items():
        if (k in ALLOWED_NAMES or k.startswith(ALLOWED_PREFIXES)) and not _SECRETISH.search(k):
            if "://" in v and "@" in v:
                continue  # https://user:token@proxy-or-index
            out[k] = v
    return out


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
