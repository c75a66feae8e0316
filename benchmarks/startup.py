"""Start to `tools/list`: `mcp-gpu serve` against a minimal MCP server on the same SDK, same run, same client.

Each run spawns the server over stdio with the SDK's own client, initializes, and lists the tools; the time is
from spawn to the tools/list answer. Runs alternate between the two servers (N each) and the medians are
compared. Also measured: the size of the `tools/list` JSON (total, and the part that is output schemas), and
the import time of the server module alone.

    .venv/bin/python benchmarks/startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
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


async def _once(command: list[str], env: dict[str, str]) -> tuple[float, dict[str, object]]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
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


def _import_s() -> float:
    code = "import time; t=time.perf_counter(); import mcp_gpu.server; print(time.perf_counter()-t)"
    vals = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
            for _ in range(5)]
    return statistics.median(vals)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--runs", type=int, default=15, help="spawns per server (default 15)")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        minimal = Path(tmp) / "minimal_server.py"
        minimal.write_text(MINIMAL)
        env = {**os.environ, "MCP_GPU_HOME": str(Path(tmp) / "state"), "MCP_GPU_LOG_LEVEL": "warning"}
        ours_cmd = [sys.executable, "-m", "mcp_gpu", "serve"]
        base_cmd = [sys.executable, str(minimal)]
        ours: list[float] = []
        base: list[float] = []
        listing: dict[str, object] = {}
        anyio.run(_once, ours_cmd, env)  # warm the file cache and create the state dir once
        for _ in range(args.runs):
            dt, listing = anyio.run(_once, ours_cmd, env)
            ours.append(dt)
            base.append(anyio.run(_once, base_cmd, env)[0])
    mo, mb = statistics.median(ours), statistics.median(base)
    sizes = _sizes(listing)
    imp = _import_s()
    body = f"""## Start to tools/list (`benchmarks/startup.py`)

Spawn over stdio with the SDK's client, initialize, `tools/list`; {args.runs} runs each, alternating, median.
Machine: {os.cpu_count()} CPUs, shared; Python {sys.version.split()[0]}.

| server | median | min | max |
|---|---|---|---|
| minimal MCPServer, one tool (same SDK) | {mb:.3f} s | {min(base):.3f} s | {max(base):.3f} s |
| `mcp-gpu serve` | {mo:.3f} s | {min(ours):.3f} s | {max(ours):.3f} s |
| **ratio** | **{mo / mb:.2f}×** (mcp-gpu costs {mo - mb:+.3f} s over the SDK's own floor) | | |

`import mcp_gpu.server` alone: {imp:.3f} s (median of 5).

`tools/list`: {sizes['tools']} tools, {sizes['total']:,} characters of JSON, of which output schemas
{sizes['output_schemas']:,} and descriptions {sizes['descriptions']:,}.
"""
    print(body)
    if not args.no_write:
        print("written to", write_section("startup", body))


if __name__ == "__main__":
    main()
