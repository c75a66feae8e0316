"""`mcp-gpu pull` and `mcp-gpu verify`: phase 5a for people, with a progress bar on stderr."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from mcp_gpu.cli import emit_json, run_with_app

PULL_DOC = ("Copy a job's outputs (or --host/--path files) here: resumable, SHA-256 checked end to end, with "
            "MANIFEST.json written at the destination. No load checks: a pull proves the bytes arrived, not that "
            "the checkpoints load, so it is NOT teardown evidence (use verify for that).")
VERIFY_DOC = ("Pull a job's outputs like `pull`, then load-check every checkpoint (safetensors, torch, numpy, "
              "json, csv) and record the verdict the teardown gate reads. A second run skips files already "
              "verified. Exit 0 when all is ok, 1 when not.")


def add_parser(sub: Any) -> None:
    for verb, help_, doc in (("pull", "copy a job's outputs here (resumable, SHA-256 checked); no load checks",
                              PULL_DOC),
                             ("verify", "pull + load-check a job's outputs: the evidence the teardown gate needs",
                              VERIFY_DOC)):
        p = sub.add_parser(verb, help=help_, description=doc)
        p.add_argument("job", nargs="?", help="job id or name (its declared outputs are pulled)")
        p.add_argument("--host", help="host to pull from when there is no job (needs --path)")
        p.add_argument("--path", action="append", dest="paths", metavar="P",
                       help="remote file or directory (repeat); with a job, replaces its declared outputs")
        p.add_argument("--dest", help="local folder (default: <state dir>/artifacts/<job or host>)")
        p.add_argument("--remote-check", action="store_true", help="also check checkpoints with the remote's python3")
        p.add_argument("--json", action="store_true", help="print the full report as JSON")
        p.add_argument("--progress", action="store_true", help="show the progress bar even when stderr is not a tty")
        p.set_defaults(func=run, load_checks=verb == "verify")


class Bar:
    """A one-line progress bar on stderr (only when stderr is a terminal, or forced)."""

    def __init__(self, force: bool = False) -> None:
        self.on = force or sys.stderr.isatty()
        self.t0 = time.monotonic()

    async def __call__(self, done: int, total: int, msg: str) -> None:
        if not self.on:
            return
        frac = done / total if total else 1.0
        width = 30
        fill = int(frac * width)
        rate = done / max(time.monotonic() - self.t0, 1e-6) / 2**20
        sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {frac * 100:5.1f}% "
                         f"{done / 2**20:8.1f}/{total / 2**20:.1f} MiB {rate:6.1f} MiB/s")
        sys.stderr.flush()

    def end(self) -> None:
        if self.on:
            sys.stderr.write("\n")


def run(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle.verify import verify_artifacts

    bar = Bar(force=bool(getattr(args, "progress", False)))
    try:
        report = run_with_app(lambda app: verify_artifacts(app, job_id=args.job, host=args.host, paths=args.paths,
                                                           dest=args.dest, remote_check=args.remote_check,
                                                           progress=bar, load_checks=args.load_checks))
    finally:
        bar.end()
    if args.json:
        emit_json(report)
    else:
        print(report.summary)
        print(f"manifest: {report.manifest}")
        for f in report.findings:
            print(f"  [{f.severity}] {f.cls}: {f.title}")
        print(f"next: {next_after(report, args)}")
    return 0 if report.all_ok else 1


def next_after(report: Any, args: argparse.Namespace) -> str:
    """The CLI's next step after a pull or verify, in CLI verbs."""
    missing = [f for f in report.findings if f.cls == "artifact_missing"]
    if report.all_ok and missing and args.job:
        # a job that declared no outputs: its default checkpoint dir is not there (issue 13 item 1: no loop)
        return (f"{missing[0].title}: if {args.job} wrote its results elsewhere, name them: mcp-gpu verify "
                f"{args.job} --path P (repeat --path per directory); if it keeps nothing, `mcp-gpu teardown "
                f"{report.host}` asks you to accept that it keeps nothing")
    if report.all_ok:
        if not args.load_checks:
            return (f"the bytes are safe in {report.dest}; the teardown gate needs load checks too: "
                    f"mcp-gpu verify {args.job or '--host ' + report.host}")
        return (f"results verified in {report.dest}; when every job on {report.host} is verified: "
                f"mcp-gpu teardown {report.host}")
    if any(f.cls == "artifact_missing" for f in report.findings):
        target = args.job or f"--host {report.host}"
        return (f"a path to verify does not exist on {report.host}: name where the job really wrote its results: "
                f"mcp-gpu {'verify' if args.load_checks else 'pull'} {target} --path P (repeat --path per directory)")
    return "fix what the findings say, then run the same command again (finished files are not pulled again)"

