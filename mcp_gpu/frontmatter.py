"""Markdown files with a TOML head between `+++` lines (profiles/*.md, prompts/*.md), and where they live.

    +++
    key = "value"
    +++
    # Markdown body

The data directories are found in this order: an explicit environment override, the repository's own
directory (a source checkout), then the copy the wheel bundles under `mcp_gpu/_bundled/`.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from mcp_gpu.errors import ConfigError

_FENCE = "+++"
_SECTION_RE = re.compile(r"^##\s+(.+?)\s*$", re.MULTILINE)


def data_dir(kind: str, env_var: str) -> Path:
    """The directory holding `kind` files ("profiles", "prompts")."""
    override = os.environ.get(env_var)
    if override:
        return Path(override).expanduser()
    package = Path(__file__).resolve().parent
    repo = package.parent / kind
    if repo.is_dir():
        return repo
    return package / "_bundled" / kind


def split(text: str, source: str) -> tuple[dict[str, Any], str]:
    """Return (head, body). Raises ConfigError naming `source` when the head is missing or not TOML."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != _FENCE:
        raise ConfigError(f"{source}: no TOML head: the file must start with a '+++' line",
                          hint="put the machine-readable head between two '+++' lines at the top",
                          data={"file": source, "field": "<head>"})
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == _FENCE:
            head_text = "".join(lines[1:i])
            body = "".join(lines[i + 1:])
            break
    else:
        raise ConfigError(f"{source}: the TOML head is not closed by a second '+++' line",
                          hint="close the head with '+++' on its own line", data={"file": source, "field": "<head>"})
    try:
        head = tomllib.loads(head_text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: the TOML head does not parse: {exc}", hint="fix the TOML syntax in the head",
                          data={"file": source, "field": "<head>"}) from None
    return head, body.lstrip("\n")


def sections(body: str) -> list[str]:
    """The `## ` headings of a Markdown body, in order."""
    return [m.group(1) for m in _SECTION_RE.finditer(body)]


def field_path(loc: tuple[int | str, ...]) -> str:
    """pydantic's error location as a dotted path: ('storage', 'tiers', 2, 'path') → storage.tiers[2].path."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out or "<head>"
