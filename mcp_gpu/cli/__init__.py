"""The `mcp-gpu` command: `serve` for agents, one verb per tool for people.

Verbs live in the modules of this package: each defines `add_parser(subparsers)` and sets `func` on its
parser to `(args) -> int`. Everything a verb prints goes to stdout (this is the human side); errors go to
stderr with their hint. Exit codes: 0 ok, 1 the check found a problem (fail verdict), 2 an error.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio

from mcp_gpu import __version__, log
from mcp_gpu.app import App
from mcp_gpu.config import Settings
from mcp_gpu.errors import GpuError

T = TypeVar("T")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-gpu", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"mcp-gpu {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level (stderr)")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        settings = Settings.from_env()
        log.configure("debug" if args.verbose else ("warning" if args.verb != "serve" else settings.log_level))
        rc: int = args.func(args)
        return rc
    except GpuError as err:
        from mcp_gpu.lifecycle.next_step import to_cli

        print(f"error: {to_cli(err.message)}", file=sys.stderr)
        if err.hint:
            from mcp_gpu.lifecycle.next_step import to_cli

            print(f"hint: {to_cli(err.hint)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def run_with_app(fn: Callable[[App], Awaitable[T]]) -> T:
    """Open the App, run one use case in it, close it: the CLI's way into lifecycle/."""

    async def go() -> T:
        app = App.open(Settings.from_env())
        try:
            return await fn(app)
        finally:
            await app.aclose()

    return anyio.run(go)


def emit_json(model: Any) -> None:
    import json

    if hasattr(model, "model_dump_json"):
        print(model.model_dump_json(indent=2, by_alias=True))
    else:
        print(json.dumps(model, indent=2, default=str))
