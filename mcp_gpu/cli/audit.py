"""`mcp-gpu audit HOST`: phase 0 for people."""

from __future__ import annotations

import argparse
from typing import Any

from mcp_gpu.cli import emit_json, run_with_app
from mcp_gpu.lifecycle.next_step import to_cli


def add_parser(sub: Any) -> None:
    p = sub.add_parser("audit", help="audit a host in one round trip (GPUs, disks, inodes, memory, torch)")
    p.add_argument("host", help="'local', an ~/.ssh/config alias, user@host[:port], or a registered name")
    p.add_argument("--platform", help="platform profile (runpod, autodl, vastai, ...)")
    p.add_argument("--checkpoint-gb", type=float, help="size of one checkpoint in GB")
    p.add_argument("--keep", type=int, default=3, help="checkpoints kept at once (default 3)")
    p.add_argument("--scratch-gb", type=float, default=0.0, help="extra scratch space the run needs, GB (default 0)")
    p.add_argument("--run-dir", help="where checkpoints will be written")
    p.add_argument("--python", default="python3", help="interpreter the job will use")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle.audit import audit_env

    report = run_with_app(lambda app: audit_env(app, args.host, platform=args.platform,
                                                checkpoint_gb=args.checkpoint_gb, keep=args.keep,
                                                scratch_gb=args.scratch_gb, run_dir=args.run_dir, python=args.python))
    if args.json:
        emit_json(report)
    else:
        for line in report.summary:
            print(to_cli(line))
        for line in report.briefing:
            print(f"  ! {to_cli(line)}")
    return 1 if report.verdict == "fail" else 0
