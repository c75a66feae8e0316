"""`mcp-gpu smoke [--cwd D] [--timeout S] [--env K=V]... -- COMMAND...`: phase 2 for people."""

from __future__ import annotations

import argparse
from typing import Any

import anyio

from mcp_gpu.cli import emit_json
from mcp_gpu.errors import ConfigError
from mcp_gpu.lifecycle.next_step import to_cli


def add_parser(sub: Any) -> None:
    p = sub.add_parser("smoke", help="run the entry point for 1-2 batches on CPU (GPUs hidden, loggers off)",
                       description="Run COMMAND locally on CPU with GPUs hidden and experiment loggers off; kill it "
                                   "and its children at the time limit; triage the output. Put -- before COMMAND.")
    p.add_argument("--cwd", default=".", help="directory to run in (default: here)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds before the whole process tree is killed")
    p.add_argument("--env", action="append", default=[], metavar="K=V", help="extra environment variable (repeatable)")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    p.set_defaults(func=run)


def _env(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"--env {pair!r}: expected K=V", hint="e.g. --env DATA_DIR=./data")
        out[name] = value
    return out


def run(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle.smoke import smoke_cpu

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise ConfigError("no command given", hint="mcp-gpu smoke -- python train.py --max-steps 2")
    env = _env(args.env)
    report = anyio.run(lambda: smoke_cpu(command, args.cwd, timeout_s=args.timeout, env=env))
    if args.json:
        emit_json(report)
    else:
        how = "timed out" if report.timed_out else f"exit {report.exit_code}"
        print(f"smoke {report.verdict.upper()}: {how} after {report.duration_s:.1f}s ({report.primary})")
        for line in report.tail[-10:]:
            print(f"  | {line}")
        for f in report.findings:
            print(f"  [{f.severity}] {f.title}")
            if f.remedy:
                print(f"      fix: {to_cli(f.remedy)}")
    return 1 if report.verdict == "fail" else 0
