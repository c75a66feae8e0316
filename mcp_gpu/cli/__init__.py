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


# `mcp-gpu --help` lists the verbs in the order of the lifecycle; verbs not named here (new ones) come last.
LIFECYCLE_ORDER = (
    "serve", "demo",  # for the agent; the whole lifecycle on this machine
    "hosts", "profiles", "audit",  # phase 0: know the machine
    "smoke",  # phase 2: the entry point runs on CPU
    "launch",  # phase 3
    "status", "patrol", "wait", "jobs", "logs", "triage", "lookup", "cancel",  # phase 4: watch, diagnose, stop a job
    "guard", "instances",  # the meter while nobody watches, and everything that bills
    "pull", "verify",  # phase 5a: results off the machine
    "teardown", "approve", "audit-log", "totp-setup",  # phase 5b: stop the meter; the human's side
)
EPILOG = """\
Verbs are listed in the order of the lifecycle: audit (phase 0) → smoke (2) → launch (3) → status/patrol (4)
→ verify (5a) → teardown (5b). `mcp-gpu VERB --help` says what each does.
Exit codes: 0 ok; 1 the check found a problem (verify not all ok, smoke failed, a job failed at launch, triage
found an error); 2 an error (bad arguments, unreachable host: the message says why and the hint what to do); 130 interrupted."""


def _order_verbs(sub: Any) -> None:
    rank = {v: i for i, v in enumerate(LIFECYCLE_ORDER)}
    # argparse prints sub-commands in the order of this list (a documented-by-use internal, stable since 3.2)
    sub._choices_actions.sort(key=lambda a: rank.get(a.dest, len(rank)))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser; with `only`, just that verb's module (the `serve` fast path: an MCP client waits on
    every module imported before the server answers)."""
    parser = argparse.ArgumentParser(prog="mcp-gpu", description=__doc__.splitlines()[0] if __doc__ else None,
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"mcp-gpu {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level (stderr)")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_") or (only is not None and info.name != only):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.add_parser(sub)
    _order_verbs(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser("serve" if args_in[:1] == ["serve"] else None)
    args = parser.parse_args(args_in)
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


async def waiting(what: str, aw: Awaitable[T], *, force: bool = False) -> T:
    """Await `aw` with a one-line `what… Ns` ticker on stderr, only when stderr is a terminal (or forced)."""
    if not (force or sys.stderr.isatty()):
        return await aw
    out: dict[str, T] = {}
    err: list[BaseException] = []

    async def body(scope: anyio.CancelScope) -> None:
        try:
            out["v"] = await aw
        except Exception as exc:  # re-raised bare below: a task group would wrap it in an ExceptionGroup
            err.append(exc)
        scope.cancel()

    t0 = anyio.current_time()
    async with anyio.create_task_group() as tg:
        tg.start_soon(body, tg.cancel_scope)
        try:
            while True:
                sys.stderr.write(f"\r{what}… {anyio.current_time() - t0:.0f}s ")
                sys.stderr.flush()
                await anyio.sleep(0.5)
        finally:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
    if err:
        raise err[0]
    return out["v"]


def emit_json(model: Any) -> None:
    import json

    if hasattr(model, "model_dump_json"):
        print(model.model_dump_json(indent=2, by_alias=True))
    else:
        print(json.dumps(model, indent=2, default=str))
