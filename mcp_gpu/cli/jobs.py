"""`mcp-gpu jobs`, `mcp-gpu logs JOB [-n N] [-f]`, `mcp-gpu cancel JOB` (the person at the terminal confirms)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio

from mcp_gpu.app import App
from mcp_gpu.cli import emit_json, run_with_app
from mcp_gpu.errors import ConfirmationError


def add_parser(sub: Any) -> None:
    j = sub.add_parser("jobs", help="list jobs (active ones are re-checked on their hosts)")
    j.add_argument("--host", help="only jobs on this host")
    j.add_argument("--state", help="only jobs in this state (running, succeeded, failed, ...)")
    j.add_argument("--json", action="store_true", help="print the list as JSON")
    j.set_defaults(func=jobs)
    lg = sub.add_parser("logs", help="print the end of a job's log; -f follows it until the job ends")
    lg.add_argument("job", help="job id or name")
    lg.add_argument("-n", "--lines", type=int, default=50, help="how many lines from the end (default 50)")
    lg.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until the job ends")
    lg.add_argument("--interval", type=float, default=2.0, help=argparse.SUPPRESS)
    lg.set_defaults(func=logs)
    c = sub.add_parser("cancel", help="stop a job and its whole process tree (you type the confirmation phrase)")
    c.add_argument("job", help="job id or name")
    c.set_defaults(func=cancel)


def jobs(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle.jobs import job_list

    async def go(app: App) -> Any:
        return await job_list(app, host=args.host, state=args.state)

    res = run_with_app(go)
    if args.json:
        emit_json(res)
        return 0
    if not res.jobs:
        print("no jobs")
    for v in res.jobs:
        code = "" if v.exit_code is None else f" exit {v.exit_code}{' ' + v.exit_signal if v.exit_signal else ''}"
        note = " (host unreachable: last known)" if v.unreachable else ""
        print(f"{v.job_id}  {v.name:24} {v.host:14} {v.backend:6} {v.state.value:10}{code} #{v.attempt} "
              f"{v.created_at}{note}")
    return 0


def logs(args: argparse.Namespace) -> int:
    from mcp_gpu.lifecycle.jobs import clean_lines, job_logs, refresh_job
    from mcp_gpu.store import jobs as jobstore

    async def go(app: App) -> int:
        res = await job_logs(app, args.job, args.lines)
        for line in res.lines:
            print(line, flush=True)
        if not args.follow or not res.log:
            return 0
        t = await app.transport(res.host)
        st = await t.stat(res.log)
        offset = st.size if st else 0
        pending = b""
        while True:
            rec, _ = await refresh_job(app, jobstore.get(app.store, res.job_id))
            st = await t.stat(res.log)
            if st and st.size > offset:
                async for chunk in t.iter_file(res.log, offset=offset):
                    offset += len(chunk)
                    pending += chunk
                *done, pending = pending.split(b"\n")
                for raw in done:  # remote bytes: escape sequences never reach the terminal
                    print(clean_lines(raw)[0], flush=True)
            if rec.state.finished:
                if pending:
                    print(clean_lines(pending)[0], flush=True)
                print(f"-- {rec.id} {rec.state.value}"
                      f"{'' if rec.exit_code is None else f' (exit {rec.exit_code})'}", file=sys.stderr)
                return 0
            await anyio.sleep(args.interval)

    return run_with_app(go)


def cancel(args: argparse.Namespace) -> int:
    from mcp_gpu.cli._tty import Terminal
    from mcp_gpu.lifecycle import human_gate
    from mcp_gpu.lifecycle.jobs import job_cancel

    tty = Terminal()  # the phrase is read from the controlling terminal only: piped stdin is refused

    async def go(app: App) -> int:
        first = await job_cancel(app, args.job, elicitation=False)
        if not first.confirmation_required or not first.token or not first.request_id:
            print(first.message)
            return 0
        tty.say(f"This stops {first.name} ({first.job_id}) on {first.host} and every process it started.")
        tty.say(f"Type exactly `{first.phrase}` to confirm:")
        typed = await anyio.to_thread.run_sync(tty.ask, "> ")
        code = None
        if app.settings.confirm_mode == "totp":
            code = await anyio.to_thread.run_sync(tty.ask, "authenticator code: ")
        pending = app.confirmer.check(first.token, action="cancel", target=first.job_id)
        try:
            human_gate.record_terminal_approval(app, pending, typed, code)
        except ConfirmationError as err:
            print(f"not cancelled: {err.message}. Nothing was done.", file=sys.stderr)
            return 1
        done = await job_cancel(app, first.job_id, token=first.token)
        print(done.message)
        return 0 if done.cancelled else 1

    with tty:
        return run_with_app(go)
