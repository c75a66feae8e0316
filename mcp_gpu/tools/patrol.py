"""`patrol`: phase 4, every job on every host in one call; always a report."""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from mcp_gpu.lifecycle.patrol import PatrolReport, patrol
from mcp_gpu.tools._base import ACTS, app_of, gpu_tool
from mcp_gpu.untrusted import clean_line, fence

DETAIL_CAP = 10  # jobs whose findings are spelled out in the text; the rest are counted


def render(report: PatrolReport) -> str:
    """What the model reads: one line per job, detail only where something is wrong, and `next`.
    The full report rides along as structured content for clients that want it."""
    counts = ", ".join(f"{n} {st}" for st, n in sorted(report.counts.items()))
    out = [f"patrol {report.at}: {report.jobs_total} job(s) on {len(report.hosts)} host(s) in "
           f"{report.duration_s:.2f}s" + (f" ({counts})" if counts else "")]
    out += report.summary
    shown = 0
    with_findings = [j for j in report.jobs if any(f.severity in ("error", "critical") for f in j.findings)]
    for j in with_findings[:DETAIL_CAP]:
        for f in j.findings:
            if f.severity in ("error", "critical"):
                # titles and evidence quote the job's log: remote text, fenced as such
                out.append(f"  {j.name}: [{f.severity}] {f.cls} ({f.gotcha or '-'}): {clean_line(f.title, 200)}")
                if f.evidence:
                    out.append(fence("\n".join(clean_line(e, 300) for e in f.evidence[:3]), f"{j.host} log of {j.name}"))
                out.append(f"    → {f.remedy}")
        shown += 1
    if len(with_findings) > shown:
        out.append(f"  (+{len(with_findings) - shown} more job(s) with findings: patrol them by id)")
    for h in report.hosts:
        out += [f"  {h.host} bills: {h.billing}"] if h.billing else []
        out += [f"  {h.guard}"] if h.guard else []
    if report.changed:
        out.append("changed: " + "; ".join(report.changed))
    out.append("next: " + report.next)
    return "\n".join(out)


def register(server: MCPServer) -> None:
    @server.tool(name="patrol", title="Patrol running jobs (phase 4)", annotations=ACTS)
    @gpu_tool
    async def patrol_tool(
        ctx: Context[Any, Any],
        job_ids: Annotated[list[str] | None, Field(description="jobs to look at; default: every job not yet "
                                                               "reported finished")] = None,
    ) -> Annotated[CallToolResult, PatrolReport]:
        """Look at every job on every host (one probe per host, all hosts at once): alive, progress, stall, GPU,
        disk, newest checkpoint, and the log lines new since the last patrol, triaged into fixed classes with
        their remedy. `unreachable` means the host did not answer — it is NOT a failure: never cancel or tear down
        because of it. Read the summary lines and `next`; details appear only for jobs with findings."""
        report = (await patrol(app_of(ctx), job_ids)).bounded()
        return CallToolResult(content=[TextContent(type="text", text=render(report))],
                              structured_content=report.model_dump(mode="json", by_alias=True))
