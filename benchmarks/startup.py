"""Start to `tools/list`: `mcp-gpu serve` against a minimal MCP server on the same SDK, same run, same client.

Each run spawns the server over stdio with the SDK's own client, initializes, and lists the tools; the time is
from spawn to the tools/list answer. Runs alternate between the two servers (N each) and the medians are
compared. Also measured: the size of the `tools/list` JSON (total, and the part that is output schemas), and
the import time of the server module alone.

    .venv/bin/python benchmarks/startup.py [--runs 15] [--before SRC]
    (SRC: e.g. `mkdir /tmp/before && git archive <commit> | tar -x -C /tmp/before`)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section

MINIMAL = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("minimal")


@server.tool()
def ping(text: str) -> str:
    """Echo the text."""
    return text


server.run()
'''


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(command: list[str], env: dict[str, str], cwd: str | None = None) -> tuple[float, float, dict[str, object]]:
    """(wall seconds to the tools/list answer, CPU seconds the server used in all, the listing)."""
    c0 = _child_cpu()
    dt, listing = anyio.run(_once, command, env, cwd)
    return dt, _child_cpu() - c0, listing


async def _once(command: list[str], env: dict[str, str], cwd: str | None) -> tuple[float, dict[str, object]]:
    from mcp import Client, StdioServerParameters

    # `python -m mcp_gpu` loads the package in its cwd first: away from any checkout unless one is asked for
    params = StdioServerParameters(command=command[0], args=command[1:], env=env,
                                   cwd=cwd or str(Path(env["MCP_GPU_HOME"]).parent))
    t0 = time.perf_counter()
    with open(os.devnull, "w") as errlog:
        from mcp.client.stdio import stdio_client

        async with Client(stdio_client(params, errlog=errlog)) as c:
            res = await c.list_tools()
            dt = time.perf_counter() - t0
    return dt, res.model_dump(mode="json", by_alias=True, exclude_none=True)


def _sizes(listing: dict[str, object]) -> dict[str, int]:
    tools = listing["tools"]
    assert isinstance(tools, list)
    total = len(json.dumps(listing, separators=(",", ":")))
    schemas = sum(len(json.dumps(t.get("outputSchema", {}), separators=(",", ":"))) for t in tools)
    descs = sum(len(t.get("description", "")) for t in tools)
    return {"tools": len(tools), "total": total, "output_schemas": schemas, "descriptions": descs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--runs", type=int, default=15, help="spawns per server (default 15)")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    ap.add_argument("--before", metavar="SRC",
                    help="also run the mcp_gpu package in the directory SRC (e.g. `git archive` of the previous "
                         "version, unpacked), with this interpreter and SDK")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        minimal = Path(tmp) / "minimal_server.py"
        minimal.write_text(MINIMAL)
        env = {**os.environ, "MCP_GPU_HOME": str(Path(tmp) / "state"), "MCP_GPU_LOG_LEVEL": "warning",
               # as on a user's machine: compiled bytecode is cached after the first start (kept in tmp here, so
               # no checkout is written to; PYTHONDONTWRITEBYTECODE would recompile every module on every start)
               "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        ours_cmd = [sys.executable, "-m", "mcp_gpu", "serve"]
        base_cmd = [sys.executable, str(minimal)]
        before_cmd = [sys.executable, "-m", "mcp_gpu", "serve"] if args.before else None
        before_cwd = str(Path(args.before).resolve()) if args.before else None
        ours: list[float] = []
        base: list[float] = []
        old: list[float] = []
        cpu: dict[str, list[float]] = {"ours": [], "base": [], "old": []}
        listing: dict[str, object] = {}
        old_listing: dict[str, object] = {}
        _run(ours_cmd, env)  # warm the caches (files, bytecode) and the state dir
        _run(base_cmd, env)
        if before_cmd is not None:
            _run(before_cmd, env, before_cwd)
        for _ in range(args.runs):
            dt, c, listing = _run(ours_cmd, env)
            ours.append(dt)
            cpu["ours"].append(c)
            dt, c, _ = _run(base_cmd, env)
            base.append(dt)
            cpu["base"].append(c)
            if before_cmd is not None:
                dt, c, old_listing = _run(before_cmd, env, before_cwd)
                old.append(dt)
                cpu["old"].append(c)
    mo, mb = statistics.median(ours), statistics.median(base)
    co, cb = statistics.median(cpu["ours"]), statistics.median(cpu["base"])
    sizes = _sizes(listing)
    before_row = ""
    if old:
        ob, osz = statistics.median(old), _sizes(old_listing)
        before_row = (f"| `mcp-gpu serve` before (`{args.before}`) | {ob:.3f} s | {min(old):.3f} s | {max(old):.3f} s | "
                      f"{statistics.median(cpu['old']):.3f} s |\n")
        sizes_before = (f"\nBefore: {osz['tools']} tools, {osz['total']:,} characters, output schemas "
                        f"{osz['output_schemas']:,}, descriptions {osz['descriptions']:,} "
                        f"(now {sizes['total'] / osz['total']:.2f}× the size).\n")
    else:
        sizes_before = ""
    body = f"""## Start to tools/list (`benchmarks/startup.py`)

Spawn over stdio with the SDK's client, initialize, `tools/list`; {args.runs} runs each, alternating, median.
Machine: {os.cpu_count()} CPUs, shared; Python {sys.version.split()[0]}.

| server | wall, median | min | max | CPU of the server, median |
|---|---|---|---|---|
| minimal MCPServer, one tool (same SDK) | {mb:.3f} s | {min(base):.3f} s | {max(base):.3f} s | {cb:.3f} s |
{before_row}| `mcp-gpu serve` | {mo:.3f} s | {min(ours):.3f} s | {max(ours):.3f} s | {co:.3f} s |
| **ratio to the minimal server** | **{mo / mb:.2f}×** wall | | | **{co / cb:.2f}×** CPU ({co - cb:+.3f} s) |

CPU is the server process's user+system time for the whole run (start, answer, exit): it does not depend on how
busy the machine is, wall time does.

`tools/list`: {sizes['tools']} tools, {sizes['total']:,} characters of JSON, of which output schemas
{sizes['output_schemas']:,} and descriptions {sizes['descriptions']:,}.
{sizes_before}
What the start-up pays for: the SDK itself (the minimal server's row: importing `mcp` and its
protocol types is most of it), then registering 15 tools (the SDK builds a pydantic argument model
and an output schema per tool, and the tool modules import their lifecycle modules for those types).
Deferred until first needed: asyncssh (the first SSH host), the provider modules (the first teardown),
the profile and gotcha files (read on first use), the whole CLI parser (`serve` builds only its own verb).
The list shrank by publishing shallow output schemas (top-level fields with types and descriptions;
the structured content and its validation are unchanged), no per-field titles, dedented descriptions.
On this shared 2-CPU VM wall times swing by 2-3x with other load; the CPU column is the steadier one.

Reproduce: `.venv/bin/python benchmarks/startup.py --runs 15 --before SRC` (SRC: the previous version, e.g.
`git archive b0f730a | tar -x -C SRC`).
"""
    print(body)
    if not args.no_write:
        print("written to", write_section("startup", body))


if __name__ == "__main__":
    main()
