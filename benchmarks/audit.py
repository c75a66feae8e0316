"""Audit of a host over SSH: mcp-gpu's one-probe audit against the naive way (one `ssh` per question).

    .venv/bin/python benchmarks/audit.py [--runs 5]

Starts its own OpenSSH sshd on loopback (tests/sshd.py), so it needs root or an sshd that can run as you.
Both sides answer the same questions on the same host in the same run; results go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import write_section
from mcp_gpu.app import App
from mcp_gpu.config import Settings
from mcp_gpu.lifecycle.audit import audit_env
from tests.sshd import Sshd

# The questions a shell checklist asks, one ssh call each (what the audit probe answers in one).
NAIVE_QUESTIONS = [
    "nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used,utilization.gpu,temperature.gpu,"
    "power.draw,power.limit,clocks.sm,clocks.max.sm,ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
    "clocks_throttle_reasons.active,pci.bus_id --format=csv,noheader,nounits",
    "nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.correctable,remapped_rows.uncorrectable,"
    "remapped_rows.pending,remapped_rows.failure --format=csv,noheader,nounits",
    "dmesg | grep 'NVRM: Xid' | tail -n 20",
    "df -P -B1 /", "df -P -i /", "df -P -B1 $HOME", "df -P -i $HOME", "df -P -B1 /dev/shm", "df -P -i /dev/shm",
    "cat /proc/self/cgroup", "cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null",
    "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null",
    "cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null",
    "grep -E 'MemTotal|MemAvailable' /proc/meminfo", "nproc",
    "python3 -c 'import platform; print(platform.python_version())'",
    "python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())'",
]


def naive(server: Sshd) -> tuple[float, int]:
    t0 = time.perf_counter()
    for q in NAIVE_QUESTIONS:
        subprocess.run(server.ssh_argv(q), capture_output=True, check=False)
    return time.perf_counter() - t0, len(NAIVE_QUESTIONS)


async def ours(server: Sshd, home: Path) -> tuple[float, int]:
    settings = Settings(home=home, ssh_config=(str(server.ssh_config),))
    app = App.open(settings)
    try:
        t0 = time.perf_counter()
        r = await audit_env(app, server.alias)
        return time.perf_counter() - t0, r.round_trips
    finally:
        await app.aclose()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    from mcp_gpu import log

    log.configure("warning")
    with tempfile.TemporaryDirectory() as tmp:
        server = Sshd(Path(tmp) / "sshd").start()
        try:
            ours_t, naive_t = [], []
            rounds = (0, 0)
            for i in range(args.runs):
                o, orr = anyio.run(ours, server, Path(tmp) / f"home{i}")
                n, nr = naive(server)
                ours_t.append(o)
                naive_t.append(n)
                rounds = (orr, nr)
        finally:
            server.stop()
    om, nm = statistics.median(ours_t), statistics.median(naive_t)
    body = f"""## audit

`.venv/bin/python benchmarks/audit.py --runs {args.runs}` — one host (OpenSSH sshd on loopback, fake nvidia-smi),
median of {args.runs} runs, each side in the same run. mcp-gpu's time includes opening the SSH connection.

| way | wall time (median) | SSH round trips | connections |
|---|---|---|---|
| mcp-gpu `audit_env` (one probe script) | {om:.3f} s | {rounds[0]} | 1 |
| naive: one `ssh` per question ({len(NAIVE_QUESTIONS)} questions) | {nm:.3f} s | {rounds[1]} | {rounds[1]} |
| **ratio naive / mcp-gpu** | **{nm / om:.1f}×** | **{rounds[1] / rounds[0]:.0f}×** | |
"""
    print(body)
    write_section("audit", body)


if __name__ == "__main__":
    main()
