"""Settings from the environment, and the state directory every local file lives under."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

# What a copied example or a half-edited config puts where a key belongs. Only whole-value shapes and words no
# random key contains: a real key is never called a placeholder (a run of 6+ x's is ~1e-7 likely at random).
_PLACEHOLDER_WORDS = re.compile(
    r"your[-_ ]?(api[-_ ]?)?(key|token|secret)|(key|token)[-_ ]?here|change[-_ ]?me|replace[-_ ]?me|placeholder|"
    r"set[-_ ]in[-_ ]your[-_ ]environment|not[-_ ]here|insert[-_ ]|paste[-_ ]|xxxxxx|\.\.\.|\*\*\*", re.I)
_PLACEHOLDER_WHOLE = re.compile(r"(x+|\*+|-+|_+|0+|todo|tbd|none|null|key|token|secret|example|test|dummy|fake)", re.I)


def _default_home() -> Path:
    # Platform user-state dir: $XDG_STATE_HOME/mcp-gpu, else ~/.local/state/mcp-gpu (macOS: ~/Library/Application Support).
    if os.environ.get("MCP_GPU_HOME"):
        return Path(os.environ["MCP_GPU_HOME"]).expanduser()
    if os.uname().sysname == "Darwin":
        return Path.home() / "Library" / "Application Support" / "mcp-gpu"
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "mcp-gpu"


def _floats(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        from mcp_gpu.errors import ConfigError

        raise ConfigError(f"{name}={raw!r} is not a number", hint=f"unset {name} or set it to seconds, e.g. 30") from None


def placeholder_reason(value: str) -> str | None:
    """Why `value` looks like a placeholder rather than a real secret, or None. Never echoes the value."""
    v = value.strip()
    if not v:
        return "it is empty"
    if "<" in v or ">" in v or "{" in v or "}" in v:
        return "it contains <...> or {...} (a template left unfilled)"
    if any(c.isspace() for c in v):
        return "it contains spaces (keys never do)"
    if _PLACEHOLDER_WHOLE.fullmatch(v):
        return "it is a stand-in word, not a key"
    m = _PLACEHOLDER_WORDS.search(v)
    if m:
        return f"it contains {m.group(0)!r}, the wording of an example"
    return None


def check_secret_env(names: Iterable[str], env: Mapping[str, str] | None = None) -> None:
    """Refuse placeholder-looking values in the named env vars that are set (unset ones are not checked: a
    provider that is used without its key says so itself). Raises ConfigError naming the variable."""
    env = os.environ if env is None else env
    for name in names:
        if name in env:
            why = placeholder_reason(env[name])
            if why:
                from mcp_gpu.errors import ConfigError

                raise ConfigError(f"{name} looks like a placeholder, not a real key: {why}",
                                  hint=f"set {name} to the real key in the environment that starts mcp-gpu (an MCP "
                                       f"client's server 'env' block), or remove it if you do not use that platform")


@dataclass(frozen=True)
class Settings:
    """Everything tunable, read once from the environment.

    MCP_GPU_HOME            state dir (registry, tokens secret, artifacts, audit log)
    MCP_GPU_SSH_CONFIG      ssh_config file(s) to read, ':'-separated (default ~/.ssh/config)
    MCP_GPU_CONNECT_TIMEOUT seconds to open an SSH connection (default 15)
    MCP_GPU_COMMAND_TIMEOUT default seconds for one remote command (default 60)
    MCP_GPU_KEEPALIVE       SSH keepalive interval in seconds (default 15; 3 missed = connection lost)
    MCP_GPU_CONFIRM         'human' (default; 'token' is its old name) or 'totp' (a human channel AND an
                            authenticator code); case-insensitive; anything else stops the server at start-up
    MCP_GPU_UNATTENDED      unset, or exactly `i-accept-that-an-agent-can-destroy-machines`: the agent may then
                            complete destructive acts on its second call without a human (CI); any other value
                            is a start-up error
    MCP_GPU_LOG_LEVEL       debug/info/warning (default info)
    """

    home: Path = field(default_factory=_default_home)
    ssh_config: tuple[str, ...] = ()
    connect_timeout: float = 15.0
    command_timeout: float = 60.0
    keepalive: float = 15.0
    confirm_mode: str = "human"
    log_level: str = "info"
    unattended: bool = False

    @classmethod
    def from_env(cls) -> Settings:
        cfg = os.environ.get("MCP_GPU_SSH_CONFIG", "")
        return cls(
            home=_default_home(),
            ssh_config=tuple(p for p in cfg.split(":") if p),
            connect_timeout=_floats("MCP_GPU_CONNECT_TIMEOUT", 15.0),
            command_timeout=_floats("MCP_GPU_COMMAND_TIMEOUT", 60.0),
            keepalive=_floats("MCP_GPU_KEEPALIVE", 15.0),
            confirm_mode=parse_confirm_mode(os.environ.get("MCP_GPU_CONFIRM", "")),
            log_level=os.environ.get("MCP_GPU_LOG_LEVEL", "info"),
            unattended=parse_unattended(os.environ.get("MCP_GPU_UNATTENDED", "")),
        )

    def ensure_home(self) -> Path:
        """Create the state dir 0700, or tighten an existing looser one; refuse one another user owns.
        The dir holds the TOTP secret, the HTTP bearer token and the registry: nobody else may list or read it."""
        from mcp_gpu.errors import ConfigError

        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = self.home.stat()
        if st.st_uid != os.geteuid():
            raise ConfigError(f"the state dir {self.home} belongs to uid {st.st_uid}, not to you",
                              hint="point MCP_GPU_HOME at a directory you own (it holds keys)")
        if st.st_mode & 0o077:
            os.chmod(self.home, 0o700)
        return self.home

    @property
    def db_path(self) -> Path:
        return self.home / "registry.sqlite3"

    @property
    def artifacts_dir(self) -> Path:
        return self.home / "artifacts"


CONFIRM_MODES = {"human": "human", "token": "human", "totp": "totp"}
UNATTENDED_PHRASE = "i-accept-that-an-agent-can-destroy-machines"


def parse_confirm_mode(raw: str) -> str:
    """Strict: a typo must not silently weaken the confirmation (issue 10, attack 5)."""
    from mcp_gpu.errors import ConfigError

    key = raw.strip().lower() or "human"
    if key not in CONFIRM_MODES:
        raise ConfigError(f"MCP_GPU_CONFIRM={raw!r} is not a confirmation mode",
                          hint="use 'human' (default) or 'totp' (also needs `mcp-gpu totp-setup`); unset it for the "
                               "default")
    return CONFIRM_MODES[key]


def parse_unattended(raw: str) -> bool:
    from mcp_gpu.errors import ConfigError

    if not raw.strip():
        return False
    if raw.strip() != UNATTENDED_PHRASE:
        raise ConfigError(f"MCP_GPU_UNATTENDED={raw!r} is not the accepted value",
                          hint=f"unset it (a human confirms every destructive act), or set it to exactly "
                               f"{UNATTENDED_PHRASE} to let an agent stop machines and cancel jobs on its own")
    return True
