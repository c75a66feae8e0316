"""`mcp-gpu instances`: every instance the providers bill for, marked against the registry."""

from __future__ import annotations

import argparse
from typing import Any

from mcp_gpu.cli import emit_json, run_with_app


def add_parser(sub: Any) -> None:
    p = sub.add_parser("instances", help="list every instance the providers bill for, marked against the registry")
    p.add_argument("--provider", action="append", dest="providers", metavar="NAME",
                   help="only this provider (repeatable): runpod, vastai, lambda, paperspace; default: every "
                        "provider whose API key is set")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle.instances import reconcile

    report = run_with_app(lambda app: reconcile(app, args.providers))
    if args.json:
        emit_json(report)
    else:
        print("\n".join([*report.summary, "next: " + report.next]))
    bad = any(r.mark in ("torn_down_still_present", "unknown") for r in report.instances)
    return 1 if bad or any(not p.ok for p in report.providers) else 0
