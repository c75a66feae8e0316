"""Phase 0: audit a host in ONE probe round trip and judge it against documented thresholds.

Thresholds (docs/audit.md repeats them for users):
  inodes used ≥ 90 % warn, ≥ 98 % error          bytes used ≥ 90 % warn, ≥ 98 % error
  checkpoint budget (ckpt_gb × keep + scratch_gb) above free bytes → error; < 10 000 free inodes → error
  /dev/shm < 1 GiB warn                            host MemAvailable < 2 GiB warn
  cgroup OOM kills already recorded > 0 warn       CPU quota below nproc warn (thread oversubscription)
  no nvidia-smi: error on a remote host, info on `local`; driver failure error
  uncorrected ECC > 0, retired pages / row remap pending or failed: error
  Xid 48, 79, 95: critical; Xid 13, 31, 43, 45, 61, 62, 63, 64, 74, 92, 94, 119, 120: error; others warn
  HW / thermal / power-brake throttle active: warn; temperature ≥ 85 °C: warn
  GPU memory already in use (> 1 GiB) before launch: warn (someone else's job or zombie VRAM)
  python missing: error; torch missing: warn; torch without CUDA on a GPU host: error
"""

from __future__ import annotations

import importlib.resources
import json
import time
from typing import Any

from pydantic import BaseModel, Field

from mcp_gpu import profiles
from mcp_gpu.app import App
from mcp_gpu.errors import ConfigError
from mcp_gpu.lifecycle.audit_parse import (
    HARMFUL_THROTTLE,
    SMI_CAP,
    Disk,
    Gpu,
    Memory,
    PythonEnv,
    SmiRun,
    apply_remapped,
    kv,
    parse_disks,
    parse_gpus,
    parse_memory,
    parse_python,
    parse_xids,
    smi_run,
    split_sections,
)
from mcp_gpu.models import Finding, Severity, Verdict, finding, iso, verdict_of
from mcp_gpu.profiles import Profile
from mcp_gpu.transport import MAX_OUTPUT
from mcp_gpu.untrusted import clean_line

GiB = 1 << 30
INODE_WARN, INODE_ERR = 90.0, 98.0
BYTES_WARN, BYTES_ERR = 90.0, 98.0
SHM_MIN = 1 * GiB
MEMAVAIL_MIN = 2 * GiB
BUDGET_MIN_INODES = 10_000
XID_CRITICAL = {48, 79, 95}
XID_ERROR = {13, 31, 43, 45, 61, 62, 63, 64, 74, 92, 94, 119, 120}


class Budget(BaseModel):
    checkpoint_gb: float
    keep: int
    scratch_gb: float
    need_bytes: int
    mount: str | None
    free_bytes: int | None
    inodes_free: int | None
    ok: bool


class AuditReport(BaseModel):
    host: str
    platform: str | None
    at: str
    verdict: Verdict
    summary: list[str] = Field(description="the report in a dozen lines: read this first")
    findings: list[Finding]
    briefing: list[str] = Field(default_factory=list, description="platform danger clocks and survival (first audit)")
    gpus: list[Gpu]
    disks: list[Disk]
    memory: Memory
    python: PythonEnv
    budget: Budget | None = None
    xid_readable: bool
    round_trips: int
    duration_s: float


def probe_script() -> str:
    return importlib.resources.files("mcp_gpu.probes").joinpath("audit.sh").read_text()


def _fmt_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, size in (("TiB", 1 << 40), ("GiB", GiB), ("MiB", 1 << 20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def gpu_findings(rc: int, gpus: list[Gpu], err: str, xids: list[tuple[int, str]], *, remote: bool,
                 smi: SmiRun | None = None) -> list[Finding]:
    out: list[Finding] = []
    shown = [clean_line(x, 200) for x in err.splitlines()[:3]]
    if smi is not None and smi.timed_out:
        n = smi.timeout_s or "?"
        out.append(finding("cuda_device_error", "error", f"nvidia-smi timed out after {n} s", gotcha="U31",
                           evidence=[f"`timeout {n} nvidia-smi --query-gpu=…` was killed by timeout (exit {rc}) "
                                     f"after printing {smi.bytes} bytes", *shown],
                           remedy="a hung nvidia-smi usually means a wedged driver or a GPU that fell off the bus: "
                                  "restart or re-rent the instance before launching anything on it"))
        return out
    if smi is not None and smi.cut:
        out.append(finding("cuda_device_error", "error",
                           f"nvidia-smi printed more than {SMI_CAP // 1024} KiB: output cut, GPU state unknown",
                           gotcha="U31", evidence=[f"nvidia-smi --query-gpu printed over {smi.bytes - 1} bytes "
                                                   f"(exit {rc}); expected one short line per GPU", *shown],
                           remedy="the nvidia-smi on this box is not behaving like NVIDIA's: check which binary is "
                                  "on PATH (`command -v nvidia-smi`) before trusting this machine"))
        return out
    if rc == 127:
        out.append(finding("no_gpu", "error" if remote else "info", "nvidia-smi not found: no NVIDIA GPU visible",
                           gotcha="U31", evidence=["nvidia-smi: command not found"],
                           remedy="on a rented GPU box this means the container has no GPU: re-create it with GPUs "
                                  "attached (e.g. --gpus all) before paying for it" if remote else
                                  "fine for CPU-only work on this machine"))
        return out
    if rc != 0:
        out.append(finding("cuda_device_error", "error", f"nvidia-smi failed (exit {rc}): the driver is not usable",
                           gotcha="U31", evidence=shown,
                           remedy="the GPU/driver is broken or missing in this container: re-rent or restart the "
                                  "instance; do not launch"))
        return out
    for g in gpus:
        tag = f"GPU {g.index} ({g.name})"
        if g.ecc_uncorrected:
            out.append(finding("cuda_device_error", "error", f"{tag}: {g.ecc_uncorrected} uncorrected ECC errors",
                               gotcha="U22", evidence=[f"ecc.errors.uncorrected.volatile.total={g.ecc_uncorrected}"],
                               remedy="results on this GPU are not trustworthy: re-rent another machine"))
        if g.retired_pages_pending or g.remap_pending or g.remap_failure or g.remapped_uncorrectable:
            ev = [f"retired_pages.pending={g.retired_pages_pending}", f"remapped_rows.pending={g.remap_pending}",
                  f"remapped_rows.failure={g.remap_failure}", f"remapped_rows.uncorrectable={g.remapped_uncorrectable}"]
            out.append(finding("cuda_device_error", "error", f"{tag}: memory pages retired/remapped or pending remap",
                               gotcha="U22", evidence=ev,
                               remedy="the GPU needs a reset the tenant cannot do: re-rent another machine"))
        bad = [r for r in g.throttle_reasons if r in HARMFUL_THROTTLE]
        if bad:
            out.append(finding("gpu_throttled", "warn", f"{tag}: clocks throttled ({', '.join(bad)})", gotcha="U23",
                               evidence=[f"throttle_reasons={','.join(g.throttle_reasons)}",
                                         f"sm_clock={g.sm_clock_mhz}/{g.sm_clock_max_mhz} MHz",
                                         f"temperature={g.temperature_c} C"],
                               remedy="expect 25-40 % lower throughput; if it persists under load, re-rent"))
        elif g.temperature_c is not None and g.temperature_c >= 85:
            out.append(finding("gpu_throttled", "warn", f"{tag}: running hot ({g.temperature_c} C)", gotcha="U23",
                               evidence=[f"temperature.gpu={g.temperature_c}"],
                               remedy="watch SM clock under load; re-rent if it throttles"))
        if g.memory_used_mib and g.memory_used_mib > 1024:
            out.append(finding("gpu_busy", "warn", f"{tag}: {g.memory_used_mib} MiB already in use before launch",
                               gotcha="U11", evidence=[f"memory.used={g.memory_used_mib} MiB",
                                                       f"utilization.gpu={g.utilization_pct} %"],
                               remedy="another process or zombie VRAM holds this GPU: check "
                                      "`nvidia-smi --query-compute-apps=pid,used_memory --format=csv`"))
    for code, line in xids:
        sev: Severity = "critical" if code in XID_CRITICAL else "error" if code in XID_ERROR else "warn"
        out.append(finding("cuda_device_error", sev, f"kernel reported NVIDIA Xid {code}", gotcha="U22",
                           evidence=[line], remedy="Xid 48/79/95 mean a dead or off-the-bus GPU: re-rent now"
                           if sev == "critical" else "look the Xid up in NVIDIA's Xid catalogue; re-rent if it repeats"))
    return out


def disk_findings(disks: list[Disk], run_probe: str | None) -> list[Finding]:
    out: list[Finding] = []
    seen_mounts: set[str] = set()
    for d in disks:
        if d.mount in seen_mounts:
            continue
        seen_mounts.add(d.mount)
        ev = [f"{d.path} on {d.mount}: {_fmt_bytes(d.bytes_free)} free of {_fmt_bytes(d.bytes_total)}, "
              f"inodes {d.inodes_total - d.inodes_free}/{d.inodes_total} used ({d.inodes_used_pct:.0f} %)"]
        if d.inodes_used_pct >= INODE_WARN:
            sev: Severity = "error" if d.inodes_used_pct >= INODE_ERR else "warn"
            out.append(finding("inode_exhausted", sev, f"{d.mount}: inodes {d.inodes_used_pct:.0f} % used",
                               gotcha="U7", evidence=ev,
                               remedy="writes will fail with 'No space left on device' while df -h looks fine: "
                                      "delete or tar small files, cap per-step outputs"))
        if d.bytes_used_pct >= BYTES_WARN and d.mount != "/dev/shm":
            bsev: Severity = "error" if d.bytes_used_pct >= BYTES_ERR else "warn"
            out.append(finding("disk_full", bsev, f"{d.mount}: {d.bytes_used_pct:.0f} % full", gotcha="U6",
                               evidence=ev, remedy="free space or grow the disk before launching: torch.save on a "
                                                  "full disk leaves truncated checkpoints"))
        if d.path == "/dev/shm" and d.bytes_total < SHM_MIN:
            out.append(finding("dataloader_error", "warn", f"/dev/shm is only {_fmt_bytes(d.bytes_total)}",
                               gotcha="train.DP15", evidence=ev,
                               remedy="DataLoader workers will die with 'Bus error': use num_workers=0, "
                                      "torch.multiprocessing.set_sharing_strategy('file_system'), or a bigger --shm-size"))
    return out


def memory_findings(m: Memory, py: PythonEnv) -> list[Finding]:
    out: list[Finding] = []
    if m.oom_kills:
        out.append(finding("host_oom_killed", "warn", f"this container has already had {m.oom_kills} OOM kill(s)",
                           gotcha="U9", evidence=[f"cgroup v{m.cgroup_version} oom_kill={m.oom_kills}",
                                                  f"memory limit={_fmt_bytes(m.limit_bytes)}"],
                           remedy="size DataLoader workers and caches to the cgroup limit, not the host's RAM"))
    if m.host_available_bytes is not None and m.host_available_bytes < MEMAVAIL_MIN:
        out.append(finding("host_oom_killed", "warn", f"only {_fmt_bytes(m.host_available_bytes)} RAM available",
                           gotcha="U9", evidence=[f"MemAvailable={_fmt_bytes(m.host_available_bytes)}"],
                           remedy="stop other processes or rent more RAM before launching"))
    if m.cpu_quota is not None and m.nproc and m.cpu_quota + 0.5 < m.nproc:
        out.append(finding("cpu_oversubscribed", "warn",
                           f"CPU quota is {m.cpu_quota:g} CPUs but {m.nproc} are visible", gotcha="U40",
                           evidence=[f"cpu quota={m.cpu_quota:g}", f"nproc={m.nproc}", f"torch threads={py.threads}"],
                           remedy=f"export OMP_NUM_THREADS={max(1, int(m.cpu_quota))} and size num_workers to the quota"))
    return out


def python_findings(py: PythonEnv, *, has_gpu: bool) -> list[Finding]:
    if not py.found:
        return [finding("import_or_config_error", "error", "python not found", gotcha="U5", evidence=[py.error or ""],
                        remedy="pass the job's interpreter (e.g. python=/root/miniconda3/bin/python)")]
    if py.torch is None:
        return [finding("import_or_config_error", "warn" if has_gpu else "info", "torch is not importable by this python",
                        gotcha="U28", evidence=[py.error or "ImportError"],
                        remedy="use the image's preinstalled env; do not pip-install torch over it (CUDA triangle)")]
    if has_gpu and py.cuda_available is False:
        return [finding("cuda_device_error", "error", f"torch {py.torch} cannot use the GPU", gotcha="U28",
                        evidence=[f"torch.version.cuda={py.cuda}", f"cuda_available=False {py.error or ''}".strip()],
                        remedy="torch's CUDA build does not match the driver: use the image's torch or the wheel "
                               "for the driver's CUDA version")]
    return []


def budget_check(disks: list[Disk], run_probe: str | None, checkpoint_gb: float | None, keep: int,
                 scratch_gb: float) -> tuple[Budget | None, list[Finding]]:
    if checkpoint_gb is None:
        return None, []
    need = int((checkpoint_gb * keep + scratch_gb) * GiB)
    d = next((x for x in disks if x.path == run_probe), None) or next((x for x in disks if x.path == "/"), None)
    ok = d is not None and d.bytes_free >= need and (d.inodes_total == 0 or d.inodes_free >= BUDGET_MIN_INODES)
    b = Budget(checkpoint_gb=checkpoint_gb, keep=keep, scratch_gb=scratch_gb, need_bytes=need,
               mount=d.mount if d else None, free_bytes=d.bytes_free if d else None,
               inodes_free=d.inodes_free if d else None, ok=ok)
    if ok:
        return b, []
    ev = [f"need {checkpoint_gb:g} GB × {keep} + {scratch_gb:g} GB = {_fmt_bytes(need)}",
          f"free on {b.mount}: {_fmt_bytes(b.free_bytes)}, inodes free: {b.inodes_free}"]
    return b, [finding("disk_budget", "error", "checkpoint budget does not fit the checkpoint mount", gotcha="U6",
                       evidence=ev, remedy="free space, lower keep (save_top_k), or ask the user to grow the disk "
                                           "before launching; never shrink the experiment silently")]


def _profile_extras(prof: Profile | None, disks: list[Disk], first: bool) -> tuple[list[str], list[Finding]]:
    """Platform knowledge from profiles/ (danger clocks, survival, caps)."""
    if prof is None:
        return [], []
    table = {d.profile_path: (d.bytes_free, d.inodes_total - d.inodes_free, d.inodes_total)
             for d in disks if d.profile_path}
    checks: list[Finding] = list(profiles.profile_checks(prof, table))
    brief: list[str] = list(profiles.platform_briefing(prof)) if first else []
    return brief, checks


async def audit_env(app: App, host: str, platform: str | None = None, checkpoint_gb: float | None = None,
                    keep: int = 3, scratch_gb: float = 0, run_dir: str | None = None,
                    python: str = "python3", smi_timeout_s: int = 20) -> AuditReport:
    """Audit `host` with one probe and record the report in the registry. `smi_timeout_s` bounds each
    nvidia-smi call (a hung one is reported as timed out, not as a broken driver)."""
    if checkpoint_gb is not None and checkpoint_gb < 0:
        raise ConfigError("checkpoint_gb must be ≥ 0", hint="pass the size of one checkpoint in GB, e.g. 2.5")
    if keep < 1 or scratch_gb < 0:
        raise ConfigError("keep must be ≥ 1 and scratch_gb ≥ 0", hint="e.g. keep=3 scratch_gb=10")
    from mcp_gpu.store import hosts as hosts_repo

    rec = hosts_repo.find(app.store, host)
    platform = platform or (rec.platform if rec else None) or ("local" if host == "local" else None)
    prof = profiles.load_profile(platform) if platform else None
    from mcp_gpu.lifecycle.launch import for_agent_program

    # `python` names a program the agent chose: on this machine it must not run with the keys or the state dir
    t = for_agent_program(app, await app.transport(host), [run_dir] if run_dir else [])
    t0 = time.monotonic()
    extra = prof.probe_paths() if prof else []
    res = await t.run_script(probe_script(), [run_dir or "", python, str(int(max(1, smi_timeout_s))), *extra],
                             timeout=app.settings.command_timeout + 2 * smi_timeout_s + 30)
    duration = time.monotonic() - t0
    sec = split_sections(res.stdout)
    meta = {k: clean_line(v, 200) for k, v in kv(sec.get("meta", [])).items()}
    smi = smi_run(sec.get("nvidia", []))
    rc, gpus, gpu_err = parse_gpus(sec.get("nvidia", []))
    apply_remapped(gpus, sec.get("remapped", []))
    xid_readable, xids = parse_xids(sec.get("xid", []))
    dmeta, disks = parse_disks(sec.get("df", []))
    mem = parse_memory(sec.get("cgroup", []), sec.get("meminfo", []), meta.get("nproc"))
    py = parse_python(sec.get("python", []))
    remote = t.kind != "local"

    findings = gpu_findings(rc, gpus, gpu_err, xids, remote=remote, smi=smi)
    if res.truncated or "end" not in sec:
        why = (f"the probe printed more than {MAX_OUTPUT >> 20} MiB and was stopped" if res.truncated
               else f"the probe stopped early (exit {res.exit_status}; sections: {', '.join(sorted(sec)) or 'none'})")
        findings.append(finding("audit_incomplete", "error", "the audit probe's output is incomplete", evidence=[why],
                                remedy="some facts above are missing: run audit_env again, and look at the box by "
                                       "hand if it repeats"))
    findings += disk_findings(disks, dmeta.get("run_probe"))
    findings += memory_findings(mem, py)
    findings += python_findings(py, has_gpu=bool(gpus))
    budget, bf = budget_check(disks, dmeta.get("run_probe"), checkpoint_gb, keep, scratch_gb)
    findings += bf
    first = not app.store.query("SELECT 1 FROM audits WHERE platform IS ? LIMIT 1", (platform,))
    briefing, pf = _profile_extras(prof, [d for d in disks], first)
    findings += pf
    if not xid_readable and gpus:
        findings.append(finding("xid_unreadable", "info", "kernel log not readable: Xid errors cannot be checked",
                                evidence=["dmesg: permission denied"], remedy="nothing to do; patrol watches GPU health"))
    verdict = verdict_of(findings)
    report = AuditReport(host=host, platform=platform, at=iso(), verdict=verdict, summary=[], findings=findings,
                         briefing=briefing, gpus=gpus, disks=disks, memory=mem, python=py, budget=budget,
                         xid_readable=xid_readable, round_trips=1, duration_s=round(duration, 3))
    report.summary = summarize(report, meta)
    app.store.execute("INSERT INTO audits(host, platform, at, verdict, report_json) VALUES (?,?,?,?,?)",
                      (host, platform, report.at, verdict, report.model_dump_json(by_alias=True)))
    return report


def summarize(r: AuditReport, meta: dict[str, Any]) -> list[str]:
    lines = [f"{r.host} ({meta.get('hostname', '?')}, {r.platform or 'unknown platform'}): {r.verdict.upper()} "
             f"in {r.duration_s:.2f}s, {r.round_trips} round trip"]
    if r.gpus:
        names: dict[str, int] = {}
        for g in r.gpus:
            names[g.name] = names.get(g.name, 0) + 1
        used = sum(g.memory_used_mib or 0 for g in r.gpus)
        lines.append("GPUs: " + ", ".join(f"{n}× {k}" for k, n in names.items()) +
                     f"; driver {r.gpus[0].driver}; {used} MiB in use; max {max(g.temperature_c or 0 for g in r.gpus)} C")
    else:
        lines.append("GPUs: none visible")
    shown: set[str] = set()
    for d in r.disks:
        if d.path in shown:
            continue
        shown.add(d.path)
        lines.append(f"disk {d.path} ({d.mount}): {_fmt_bytes(d.bytes_free)} free of {_fmt_bytes(d.bytes_total)}, "
                     f"inodes {d.inodes_used_pct:.0f} % used")
    m = r.memory
    lines.append(f"memory: cgroup limit {_fmt_bytes(m.limit_bytes) if m.limit_bytes else 'none'}, "
                 f"available {_fmt_bytes(m.host_available_bytes)}, OOM kills {m.oom_kills or 0}, "
                 f"CPUs {m.cpu_quota or m.nproc}")
    p = r.python
    lines.append(f"python {p.python or 'missing'}; torch {p.torch or 'missing'}"
                 + (f" (CUDA {p.cuda}, available={p.cuda_available})" if p.torch else ""))
    if r.budget:
        lines.append(f"checkpoint budget: need {_fmt_bytes(r.budget.need_bytes)}, free "
                     f"{_fmt_bytes(r.budget.free_bytes)} on {r.budget.mount}: {'OK' if r.budget.ok else 'DOES NOT FIT'}")
    for f in r.findings:
        if f.severity != "info":
            lines.append(f"[{f.severity}] {f.title}" + (f" ({f.gotcha})" if f.gotcha else "") + f" → {f.remedy}")
    return lines


def audit_json(r: AuditReport) -> str:
    return json.dumps(r.model_dump(by_alias=True), indent=2)
