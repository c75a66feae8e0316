"""`mcp-gpu lookup TEXT|-`: which known failure explains this error line? Exit 0 with matches, 1 with none."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mcp_gpu.cli import emit_json


def add_parser(sub: Any) -> None:
    p = sub.add_parser("lookup", help="match an error line or symptom against the gotcha catalogue")
    p.add_argument("text", nargs="+", help="the error text, or '-' to read it from stdin")
    p.add_argument("-n", "--limit", type=int, default=5, help="most entries to show (default 5)")
    p.add_argument("--platform", help="profile name whose entries to favour, e.g. autodl")
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mcp_gpu.gotchas import lookup

    text = sys.stdin.read() if args.text == ["-"] else " ".join(args.text)
    result = lookup(text, limit=max(1, args.limit), platform=args.platform)
    if args.json:
        emit_json(result)
        return 0 if result.matches else 1
    if not result.matches:
        print("no known failure matches; read gpu://gotchas or describe the symptom in other words")
        return 1
    for m in result.matches:
        mark = "confident" if m.confident else "possible"
        print(f"{m.id}  [{m.severity}] {m.title}  ({mark}, {m.confidence:.2f})")
        if m.matched:
            print(f"  matched: {'; '.join(m.matched[:3])}")
        print(f"  cause:   {m.cause}")
        print(f"  fix:     {m.fix}")
    return 0
