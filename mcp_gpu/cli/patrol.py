"""`mcp-gpu status` (one table of all jobs) and `mcp-gpu patrol [--every 30m]`."""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any

from mcp_gpu.cli import emit_json, run_with_app, waiting
from mcp_gpu.errors import ConfigError
from mcp_gpu.untrusted import clean_line


def add_parser(sub: Any) -> None:
    s = sub.add_parser("status", help="patrol once and print one table of all jobs")
    s.add_argument("--json", action="store_true", help="print the full patrol report as JSON")
    s.add_argument("--all", action="store_true", help="include jobs already reported finished")
    s.set_defaults(func=run_status)
    p = sub.add_parser("patrol", help="patrol jobs once, or every N minutes with --every")
    p.add_argument("job_ids", nargs="*", metavar="JOB_ID",
                   help="job ids to look at (default: every job not yet reported finished)")
    p.add_argument("--every", help="repeat, e.g. 30m, 90s, 1h (Ctrl-C stops)")
    p.add_argument("--json", action="store_true", help="print each report as JSON")
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


_COLOURS = {"running": "32", "succeeded": "32", "launching": "33", "stalled": "33", "unreachable": "33",
            "failed": "31", "lost": "31", "preempted": "31", "cancelled": "2"}


def use_colour(stream: Any = None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    import os

    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)()) and not os.environ.get("NO_COLOR") \
        and os.environ.get("TERM") != "dumb"


def table(report: Any, colour: bool = False) -> list[str]:
    """One row per job under a header; with `colour`, the STATE cell is coloured (padding stays exact)."""
    rows = [("JOB", "HOST", "STATE", "PROGRESS", "LOSS", "CKPT AGE", "FINDING")]
    for j in report.jobs:
        p = j.progress
        prog = "-" if p is None or p.step is None else f"{p.step}" + (f"/{p.total}" if p.total else "")
        loss = "-" if p is None or p.loss is None else f"{p.loss:.4g}"
        bad = next((f for f in j.findings if f.severity in ("error", "critical", "warn")), None)
        rows.append((j.name, j.host, j.state, prog, loss, _age(j.checkpoint.age_s if j.checkpoint else None),
                     clean_line(f"{bad.cls}: {bad.title[:50]}") if bad else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for n, r in enumerate(rows):
        cells = [c.ljust(w) for c, w in zip(r, widths, strict=True)]
        if colour:
            code = "1" if n == 0 else _COLOURS.get(r[2])
            if n == 0:
                cells = [f"\x1b[{code}m{c}\x1b[0m" for c in cells]
            elif code:
                cells[2] = f"\x1b[{code}m{cells[2]}\x1b[0m"
        out.append("  ".join(cells).rstrip())
    return out


def run_status(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle import next_step
    from mcp_gpu.lifecycle.patrol import patrol
    from mcp_gpu.store import jobs as jobs_repo

    async def go(app: Any) -> Any:
        ids = [j.id for j in jobs_repo.list_jobs(app.store)] if args.all else None
        rep = await waiting("patrolling", patrol(app, ids or None))
        return rep, next_step.patrol_next(app.store, rep.jobs, "cli")

    report, cli_next = run_with_app(go)
    if args.json:
        emit_json(report)
        return 0
    colour = use_colour()
    for line in table(report, colour=colour):
        print(line if colour else clean_line(line, 1000))  # remote text was cleaned at the source; colour is ours
    if not report.jobs:
        print("no jobs to patrol")
    print(f"next: {cli_next}")
    return 0


def run_patrol(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle import next_step
    from mcp_gpu.lifecycle.patrol import patrol

    async def go(app: Any) -> Any:
        rep = await patrol(app, args.job_ids or None)
        return rep, next_step.patrol_next(app.store, rep.jobs, "cli")

    every = parse_every(args.every) if args.every else None
    while True:
        report, cli_next = run_with_app(go)
        if args.json:
            emit_json(report)
        else:
            print(f"[{report.at}] patrol of {len(report.jobs)} job(s) in {report.duration_s:.2f}s")
            for line in report.summary:
                print("  " + clean_line(line, 400))
            for c in report.changed:
                print("  changed: " + clean_line(c, 400))
            print("  next: " + cli_next)
        sys.stdout.flush()
        if every is None:
            return 0
        countdown(every)


def countdown(seconds: float) -> None:
    """Sleep until the next patrol; on a terminal, say on stderr when it comes."""
    end = time.monotonic() + seconds
    tty = sys.stderr.isatty()
    while (left := end - time.monotonic()) > 0:
        if tty:
            sys.stderr.write(f"\rnext patrol in {left:4.0f}s (Ctrl-C stops) ")
            sys.stderr.flush()
        time.sleep(min(1.0, left))
    if tty:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()
