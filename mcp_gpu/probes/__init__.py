"""The remote scripts: static shell files, checked by shellcheck, assembled by `load`.

A probe names the shared shell it needs with lines `# include: lib/<file>.sh`; `load` replaces each such line
with that file's text (each file once, nested includes resolved, a missing file an error), so the text that runs
on the host is one self-contained `bash -c` script whose job-specific values arrive only as arguments or stdin.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from collections.abc import Callable

_INCLUDE = re.compile(r"^# include: (?P<path>[A-Za-z0-9_./-]+\.sh)\s*$", re.M)


def _read(path: str) -> str:
    if ".." in path.split("/") or path.startswith("/"):
        raise ValueError(f"probe include {path!r} leaves the probes package")
    return importlib.resources.files(__name__).joinpath(path).read_text(encoding="utf-8")


def assemble(name: str, read: Callable[[str], str]) -> str:
    """`name`'s text with every include line replaced by the included file (read through `read`)."""
    done: set[str] = {name}

    def expand(path: str, stack: tuple[str, ...]) -> str:
        if path in stack:
            raise ValueError(f"probe include cycle: {' -> '.join((*stack, path))}")
        text = read(path)

        def sub(m: re.Match[str]) -> str:
            inc = m.group("path")
            if inc in stack or inc == path:
                raise ValueError(f"probe include cycle: {' -> '.join((*stack, path, inc))}")
            if inc in done:
                return f"# (included above: {inc})"
            done.add(inc)
            return expand(inc, (*stack, path)).rstrip("\n")

        return _INCLUDE.sub(sub, text)

    return expand(name, ())


@functools.cache
def load(name: str) -> str:
    """The probe `name` (a path under mcp_gpu/probes/) with its includes expanded."""
    return assemble(name, _read)
