"""`mcp-gpu status` (one table of all jobs) and `mcp-gpu patrol [--every 30m]`."""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any

from mcp_gpu.cli import emit_json, run_with_app
from mcp_gpu.errors import ConfigError
from mcp_gpu.untrusted import clean_line


def add_parser(sub: Any) -> None:
    s = sub.add_parser("status", help="patrol once and print one table of all jobs")
    s.add_argument("--json", action="store_true")
    s.add_argument("--all", action="store_true", help="include jobs already reported finished")
    s.set_defaults(func=run_status)
    p = sub.add_parser("patrol", help="patrol jobs once, or every N minutes with --every")
    p.add_argument("job_ids", nargs="*")
    p.add_argument("--every", help="repeat, e.g. 30m, 90s, 1h (Ctrl-C stops)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_patrol)


def parse_every(text: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m:
        raise ConfigError(f"--every {text!r}: expected a duration like 30m, 90s or 1h", hint="e.g. --every 30m")
    return float(m.group(1)) * {"": 60, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _age(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m" if s < 7200 else f"{s / 3600:.1f}h"


def table(report: Any) -> list[str]:
    rows = [("JOB", "HOST", "STATE", "PROGRESS", "LOSS", "CKPT AGE", "FINDING")]
    for j in report.jobs:
        p = j.progress
        prog = "-" if p is None or p.step is None else f"{p.step}" + (f"/{p.total}" if p.total else "")
        loss = "-" if p is None or p.loss is None else f"{p.loss:.4g}"
        bad = next((f for f in j.findings if f.severity in ("error", "critical", "warn")), None)
        rows.append((j.name, j.host, j.state, prog, loss, _age(j.checkpoint.age_s if j.checkpoint else None),
                     clean_line(f"{bad.cls}: {bad.title[:50]}") if bad else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def run_status(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle.patrol import patrol
    from mcp_gpu.store import jobs as jobs_repo

    def go(app: Any) -> Any:
        ids = [j.id for j in jobs_repo.list_jobs(app.store)] if args.all else None
        return patrol(app, ids or None)

    report = run_with_app(go)
    if args.json:
        emit_json(report)
        return 0
    for line in table(report):
        print(clean_line(line, 1000))
    if not report.jobs:
        print("no jobs to patrol")
    print(f"next: {report.next}")
    return 0


def run_patrol(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle.patrol import patrol

    every = parse_every(args.every) if args.every else None
    while True:
        report = run_with_app(lambda app: patrol(app, args.job_ids or None))
        if args.json:
            emit_json(report)
        else:
            print(f"[{report.at}] patrol of {len(report.jobs)} job(s) in {report.duration_s:.2f}s")
            for line in report.summary:
                print("  " + clean_line(line, 400))
            for c in report.changed:
                print("  changed: " + clean_line(c, 400))
            print("  next: " + report.next)
        sys.stdout.flush()
        if every is None:
            return 0
        time.sleep(every)
