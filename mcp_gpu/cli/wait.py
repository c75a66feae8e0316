"""`mcp-gpu wait [JOB ...]`: block until a job changes state or the bound passes.

Exit codes: 0 a watched job changed and none failed; 1 a watched job failed, stalled, was preempted or lost;
124 the bound passed with no change (the shell `timeout` convention); 2 an error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mcp_gpu.cli import emit_json, run_with_app


def add_parser(sub: Any) -> None:
    p = sub.add_parser("wait", help="block until a job finishes, fails, stalls, is preempted or its host stops "
                                    "answering",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("job_ids", nargs="*", metavar="JOB", help="job ids or names (default: every active job)")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="give up after S seconds with no change (default 300, max 1800)")
    p.add_argument("--interval", type=float, default=None, metavar="S",
                   help="seconds between looks (default MCP_GPU_WAIT_INTERVAL_S or 5)")
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle.wait import PROBLEM_STATES, wait
    from mcp_gpu.tools.patrol import render

    tty = sys.stderr.isatty()

    async def tell(done: float, total: float, message: str) -> None:
        if tty:  # one rewritten progress line for a person; nothing in pipes and logs
            print(f"\r{message[:100]:<100}", end="", file=sys.stderr, flush=True)

    res = run_with_app(lambda app: wait(app, args.job_ids or None, timeout_s=args.timeout,
                                        interval_s=args.interval, progress=tell))
    if tty:
        print(file=sys.stderr)
    if args.json:
        emit_json(res)
    else:
        print(f"{'changed' if res.changed else 'no change'} after {res.waited_s:.0f}s: " + (
            "; ".join(res.changes) or res.reason))
        if res.report.jobs:
            print(render(res.report).split("\n", 1)[-1])
    if not res.changed:
        return 124 if res.watched and res.reason.startswith("no change") else 0
    return 1 if any(j.state in PROBLEM_STATES for j in res.report.jobs) else 0
