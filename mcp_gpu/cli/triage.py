"""`mcp-gpu triage FILE|-`: classify a log and print {primary, findings} as JSON; exit 0 if healthy, 1 if not."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mcp_gpu.cli import emit_json
from mcp_gpu.errors import ConfigError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("triage", help="classify a training log (FILE, or - for stdin) into failure classes")
    p.add_argument("file", metavar="FILE|-", help="log file to read, or - for stdin")
    p.add_argument("--exit-code", type=int, default=None, help="the process exit code, if known (137, 143, ...)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mcp_gpu.triage.engine import triage_text

    if args.file == "-":
        text = sys.stdin.read()
    else:
        path = Path(args.file)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as err:
            raise ConfigError(f"cannot read {path}: {err.strerror or err}",
                              hint="give a readable log file, or - for stdin") from err
    report = triage_text(text, args.exit_code)
    emit_json(report)
    return 0 if report.primary == "healthy" else 1
