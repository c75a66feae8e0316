"""`mcp-gpu profiles [NAME] [--stale] [--json]`: platform facts; --stale lists facts over a year old (exit 1)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from mcp_gpu.cli import emit_json
from mcp_gpu.errors import ConfigError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("profiles", help="list platform profiles, show one, or list stale facts")
    p.add_argument("name", nargs="?", help="profile to show (e.g. runpod)")
    p.add_argument("--stale", action="store_true", help="list fact groups verified longer ago than --max-age-days")
    p.add_argument("--max-age-days", type=int, default=365, help="with --stale: the age that counts as stale (default 365)")
    p.add_argument("--now", help="judge staleness as of this date (YYYY-MM-DD); default today")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _now(raw: str | None) -> datetime:
    if not raw:
        return datetime.now(UTC)
    try:
        return datetime.strptime(raw, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise ConfigError(f"--now {raw!r}: expected YYYY-MM-DD", hint="e.g. --now 2027-07-01") from None


def run(args: argparse.Namespace) -> int:
    from mcp_gpu import profiles
    from mcp_gpu.resources.profiles import index

    if args.stale:
        chosen = [profiles.load_profile(args.name)] if args.name else profiles.all_profiles()
        stale = [s for p in chosen for s in profiles.profile_stale_facts(p, _now(args.now), args.max_age_days)]
        if args.json:
            emit_json([s.model_dump() for s in stale])
        elif not stale:
            print(f"no fact older than {args.max_age_days} days")
        for s in [] if args.json else stale:
            print(f"{s.profile:<14} {s.group:<12} verified {s.verified} ({s.age_days} days ago)")
        return 1 if stale else 0
    if args.name:
        p = profiles.load_profile(args.name)
        if args.json:
            emit_json({"head": p.head.model_dump(mode="json"), "body": p.body})
            return 0
        for line in profiles.platform_briefing(p):
            print(line)
        print()
        print(p.body.rstrip())
        return 0
    rows = index()
    if args.json:
        emit_json(rows)
        return 0
    print(f"{'name':<14} {'kind':<12} {'teardown':<9} {'spot':<5} {'verified':<9} meter stop")
    for r in rows:
        verb = f"{r['meter_stop']}{' (irreversible)' if r['irreversible'] else ''}"
        print(f"{r['name']:<14} {r['kind']:<12} {r['teardown']:<9} {'yes' if r['spot'] else 'no':<5} {r['verified']:<9} {verb}")
    return 0
