"""Parse the audit probe's sectioned output into typed facts (pure functions, tested on fixtures)."""

from __future__ import annotations

import base64
import binascii
import json
import re

from pydantic import BaseModel, Field

# clocks_throttle_reasons.active bits (nvidia-smi --help-query-gpu / NVML nvmlClocksThrottleReasons)
THROTTLE_BITS: dict[int, str] = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
HARMFUL_THROTTLE = {"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}


class Gpu(BaseModel):
    index: int
    name: str
    uuid: str | None = None
    bus_id: str | None = None
    driver: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    utilization_pct: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    ecc_uncorrected: int | None = None
    retired_pages_pending: bool | None = None
    remapped_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    throttle_reasons: list[str] = Field(default_factory=list)


class Disk(BaseModel):
    path: str
    profile_path: str | None = None
    mount: str
    bytes_total: int
    bytes_free: int
    inodes_total: int
    inodes_free: int

    @property
    def bytes_used_pct(self) -> float:
        return 100.0 * (self.bytes_total - self.bytes_free) / self.bytes_total if self.bytes_total else 0.0

    @property
    def inodes_used_pct(self) -> float:
        # some filesystems (btrfs, some overlays, NFS) report 0 inodes: "no fixed inode table"
        return 100.0 * (self.inodes_total - self.inodes_free) / self.inodes_total if self.inodes_total else 0.0


class Memory(BaseModel):
    cgroup_version: int = 0
    limit_bytes: int | None = None
    current_bytes: int | None = None
    oom_kills: int | None = None
    cpu_quota: float | None = None
    host_total_bytes: int | None = None
    host_available_bytes: int | None = None
    nproc: int | None = None


class PythonEnv(BaseModel):
    found: bool
    python: str | None = None
    executable: str | None = None
    torch: str | None = None
    cuda: str | None = None
    cuda_available: bool | None = None
    device_count: int | None = None
    threads: int | None = None
    error: str | None = None


SMI_CAP = 262144
"""The most bytes of nvidia-smi output the probe keeps (probes/audit.sh CAP); more means it was cut."""


def split_sections(text: str) -> dict[str, list[str]]:
    """The probe's sections: one line `@@<name> <base64 of the section's output>` each (probes/audit.sh).

    The payload is decoded here, so nothing a remote command prints (`@@meta`, CR, NUL) can start, end or
    rewrite a section: it stays data inside its own section. A name seen twice keeps its first payload; an
    undecodable payload leaves its section out (the report then says what is missing). `end` is present only
    when the probe ran to completion."""
    out: dict[str, list[str]] = {}
    for line in text.split("\n"):
        if not line.startswith("@@"):
            continue
        name, _, payload = line[2:].partition(" ")
        if name in out:
            continue
        try:
            raw = base64.b64decode(payload.strip(), validate=True)
        except (ValueError, binascii.Error):
            continue
        body = raw.decode("utf-8", "replace")
        out[name] = body.split("\n") if body else []
    return out


def kv(lines: list[str]) -> dict[str, str]:
    d: dict[str, str] = {}
    for line in lines:
        if "=" in line:
            k, v = line.split("=", 1)
            d[k.strip()] = v.strip()
    return d


def _num(v: str | None, kind: type[int] | type[float] = int) -> int | float | None:
    if v is None:
        return None
    v = v.strip()
    if not v or v.startswith("[") or v.upper() in ("N/A", "NA"):
        return None
    try:
        return kind(float(v)) if kind is int else float(v)
    except ValueError:
        return None


def _int(v: str | None) -> int | None:
    n = _num(v, int)
    return int(n) if n is not None else None


def _float(v: str | None) -> float | None:
    n = _num(v, float)
    return float(n) if n is not None else None


def _yes(v: str | None) -> bool | None:
    if v is None or v.strip().startswith("["):
        return None
    return v.strip().lower() in ("yes", "1", "true")


def throttle_names(mask: str | None) -> list[str]:
    if not mask or mask.strip().startswith("["):
        return []
    try:
        m = int(mask.strip(), 16)
    except ValueError:
        return []
    return [name for bit, name in THROTTLE_BITS.items() if m & bit]


class SmiRun(BaseModel):
    """How the probe's nvidia-smi call went: its exit status (124/137 = killed by `timeout`), the timeout it
    had, and how many bytes it printed (more than SMI_CAP = output cut)."""

    rc: int = 127
    timeout_s: int | None = None
    bytes: int = 0

    @property
    def timed_out(self) -> bool:
        return self.rc in (124, 137)

    @property
    def cut(self) -> bool:
        return self.bytes > SMI_CAP or self.rc == 141


def smi_run(lines: list[str]) -> SmiRun:
    head = kv([ln for ln in lines[:3] if ln.startswith(("rc=", "timeout_s=", "bytes="))])
    rc = _int(head.get("rc"))
    return SmiRun(rc=127 if rc is None else rc, timeout_s=_int(head.get("timeout_s")),
                  bytes=_int(head.get("bytes")) or 0)


def parse_gpus(lines: list[str]) -> tuple[int, list[Gpu], str]:
    """Return (nvidia-smi exit code, GPUs, raw error text)."""
    run = smi_run(lines)
    rc = run.rc
    rows: list[str] = []
    body = lines[3:] if lines[:1] and lines[0].startswith("rc=") else lines
    for line in body:
        if line.strip():
            rows.append(line)
    if run.cut:
        return rc if rc != 0 else 141, [], "\n".join(rows[:3])
    if rc != 0:
        return rc, [], "\n".join(rows)
    gpus: list[Gpu] = []
    for row in rows:
        f = [c.strip() for c in row.split(",")]
        if len(f) < 16 or not f[0].isdigit():
            continue
        gpus.append(Gpu(
            index=int(f[0]), name=f[1], uuid=f[2] or None, driver=f[3] or None, memory_total_mib=_int(f[4]),
            memory_used_mib=_int(f[5]), utilization_pct=_int(f[6]), temperature_c=_int(f[7]), power_w=_float(f[8]),
            power_limit_w=_float(f[9]), sm_clock_mhz=_int(f[10]), sm_clock_max_mhz=_int(f[11]),
            ecc_uncorrected=_int(f[12]), retired_pages_pending=_yes(f[13]), throttle_reasons=throttle_names(f[14]),
            bus_id=f[15] or None,
        ))
    return rc, gpus, ""


def apply_remapped(gpus: list[Gpu], lines: list[str]) -> None:
    by_bus = {(g.bus_id or "").lower(): g for g in gpus}
    for line in lines:
        f = [c.strip() for c in line.split(",")]
        if len(f) < 5:
            continue
        g = by_bus.get(f[0].lower())
        if g is None:
            continue
        g.remapped_uncorrectable = _int(f[2])
        g.remap_pending = _yes(f[3])
        g.remap_failure = _yes(f[4])


_XID = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")


def parse_xids(lines: list[str]) -> tuple[bool, list[tuple[int, str]]]:
    readable = any(line.strip() == "readable=1" for line in lines)
    xids: list[tuple[int, str]] = []
    for line in lines:
        m = _XID.search(line)
        if m:
            xids.append((int(m.group(2)), line.strip()))
    return readable, xids


def parse_disks(lines: list[str]) -> tuple[dict[str, str], list[Disk]]:
    meta = kv([ln for ln in lines if not ln.startswith("path=")])
    disks: list[Disk] = []
    seen: set[tuple[str, str | None]] = set()
    for line in lines:
        if not line.startswith("path="):
            continue
        parts = dict(p.split("=", 1) for p in line.split("\t") if "=" in p)
        b = parts.get("bytes", "").split()
        i = parts.get("inodes", "").split()
        if len(b) < 6 or len(i) < 6:
            continue
        path = parts["path"]
        key = (path, parts.get("orig"))
        if key in seen:
            continue
        seen.add(key)
        disks.append(Disk(path=path, profile_path=parts.get("orig"), mount=b[5], bytes_total=int(b[1]),
                          bytes_free=int(b[3]), inodes_total=_int(i[1]) or 0, inodes_free=_int(i[3]) or 0))
    return meta, disks


def parse_memory(cg: list[str], meminfo: list[str], nproc: str | None) -> Memory:
    d = kv(cg)
    mem = Memory(cgroup_version=_int(d.get("version")) or 0, nproc=_int(nproc))
    limit = d.get("memory_max", "")
    # v2 says "max"; v1 says a huge number (PAGE_COUNTER_MAX) when unlimited
    if limit and limit != "max":
        n = _int(limit)
        mem.limit_bytes = n if n is not None and n < (1 << 60) else None
    mem.current_bytes = _int(d.get("memory_current"))
    mem.oom_kills = _int(d.get("oom_kill"))
    cpu = d.get("cpu_max", "").split()
    if len(cpu) == 2 and cpu[0] not in ("max", "-1") and _int(cpu[0]) and _int(cpu[1]):
        mem.cpu_quota = round(int(cpu[0]) / int(cpu[1]), 2)
    for line in meminfo:
        k, _, v = line.partition(":")
        val = _int(v.replace("kB", ""))
        if val is None:
            continue
        if k == "MemTotal":
            mem.host_total_bytes = val * 1024
        elif k == "MemAvailable":
            mem.host_available_bytes = val * 1024
    return mem


def parse_python(lines: list[str]) -> PythonEnv:
    rc = next((_int(ln[3:]) for ln in lines if ln.startswith("rc=")), 127)
    for ln in lines:
        if ln.startswith("PYJSON "):
            data = json.loads(ln[7:])
            return PythonEnv(found=True, python=data.get("python"), executable=data.get("executable"),
                             torch=data.get("torch"), cuda=data.get("cuda"),
                             cuda_available=data.get("cuda_available"), device_count=data.get("device_count"),
                             threads=data.get("threads"), error=data.get("torch_error") or data.get("cuda_error"))
    if rc == 127:
        return PythonEnv(found=False, error="python not found on the host's PATH")
    if rc == 124:
        return PythonEnv(found=True, error="python/torch import timed out after 45 s")
    return PythonEnv(found=True, error=" | ".join(ln for ln in lines if ln.strip() and not ln.startswith("rc="))[-300:])
