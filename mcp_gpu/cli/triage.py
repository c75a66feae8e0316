"""`mcp-gpu triage FILE|-`: classify a training log; plain text for people, JSON with --json.

Exit codes: 0 the log looks healthy, 1 a problem was found, 2 usage error (unreadable file, bad arguments).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mcp_gpu.cli import emit_json
from mcp_gpu.errors import ConfigError

EPILOG = """\
exit codes:
  0  the log looks healthy (errors it survived may still be listed as info)
  1  a problem was found: the primary class names its root cause
  2  usage error: the file cannot be read, or the arguments are wrong
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("triage", help="classify a training log (FILE, or - for stdin) into failure classes",
                       description="Classify a training log: the root-cause class (or healthy), how sure, the "
                                   "evidence lines and the next step.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE|-", help="log file to read, or - for stdin")
    p.add_argument("--exit-code", type=int, default=None, help="the process exit code, if known (137, 143, ...)")
    p.add_argument("--json", action="store_true", help="print {primary, confidence, findings} as JSON")
    p.set_defaults(func=run)


def render(report: Any) -> str:
    """The report as plain text: primary class and confidence, each finding's evidence fenced, its remedy."""
    from mcp_gpu.untrusted import clean_line

    if report.primary == "healthy":
        head = ["healthy: no sign that the run failed"]
    else:
        head = [f"{report.primary}  (confidence {report.confidence:.2f})"]
    out = head
    for i, f in enumerate(report.findings):
        label = "cause" if i == 0 and report.primary != "healthy" else "also"
        gotcha = f"  [gotcha {f.gotcha}]" if f.gotcha else ""
        out.append("")
        out.append(f"{label}: {f.cls} [{f.severity}] {f.title}{gotcha}")
        if f.evidence:
            out.append("  evidence:")
            out.append("  ```")
            out.extend(f"  {clean_line(e)}" for e in f.evidence)
            out.append("  ```")
        if f.remedy:
            out.append(f"  next step: {f.remedy}")
    return "\n".join(out)


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
    if args.json:
        emit_json(report)
    else:
        print(render(report))
    return 0 if report.primary == "healthy" else 1
