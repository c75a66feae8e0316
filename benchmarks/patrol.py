"""Patrol of 32 jobs on 8 hosts against the naive way (one `ssh` per job per question), same run.

    .venv/bin/python benchmarks/patrol.py [--hosts 8] [--jobs-per-host 4] [--delay-ms 50]

Each host is a real OpenSSH sshd on loopback behind a userspace proxy adding DELAY each way. Each job is a
real process writing training-style log lines and checkpoints in its run directory, registered as a nohup job.
Measured: wall time and SSH round trips of both ways, patrol time for 1, 2, 4, 8 hosts (flatness), and the
report size against the raw bytes an agent would otherwise read. Results go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import write_section
from mcp_gpu import log
from mcp_gpu.app import App
from mcp_gpu.config import Settings
from mcp_gpu.lifecycle.patrol import patrol
from mcp_gpu.models import JobRecord, JobState, iso
from mcp_gpu.store import jobs as jobs_repo
from mcp_gpu.tools.patrol import render
from tests.sshd import Sshd

JOB = r"""
rd=$1; mkdir -p "$rd/ckpt"; echo $$ > "$rd/pid"; ps -o pgid= -p $$ | tr -d ' ' > "$rd/pgid"
i=0
while :; do i=$((i+1)); echo "step $i/100000 loss 0.$((1000 - i % 900)) lr 3e-4" >> "$rd/out.log"
  [ $((i % 20)) = 0 ] && { head -c 4096 /dev/zero > "$rd/ckpt/ckpt_$i.pt.tmp" && mv "$rd/ckpt/ckpt_$i.pt.tmp" "$rd/ckpt/ckpt_$i.pt"; }
  touch "$rd/heartbeat"; sleep 0.2; done
"""


def naive_questions(rd: str) -> list[str]:
    """What a shell patrol asks per job, one ssh each (health_patrol.sh-style)."""
    return [f"kill -0 $(cat {rd}/pid) && echo ALIVE", f"tail -n 50 {rd}/out.log", f"stat -c %Y {rd}/out.log",
            f"ls -t {rd}/ckpt | head -n 1", f"df -h {rd}", f"df -i {rd}",
            "nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv", "cat /proc/meminfo | head -3"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--jobs-per-host", type=int, default=4)
    ap.add_argument("--delay-ms", type=float, default=50)
    args = ap.parse_args()
    log.configure("warning")
    tmp = Path(tempfile.mkdtemp(prefix="mcp-gpu-bench-"))
    servers: list[Sshd] = []
    proxy_proc: subprocess.Popen[str] | None = None
    procs: list[subprocess.Popen[bytes]] = []
    try:
        cfg_text = ""
        for h in range(args.hosts):
            servers.append(Sshd(tmp / f"sshd{h}", alias=f"bench{h}").start())
        # the proxies live in a process of their own: in this one they would share the GIL with patrol itself
        proxy_proc = subprocess.Popen([sys.executable, "-m", "tests.netproxy", str(args.delay_ms),
                                       *[str(s.port) for s in servers]], stdout=subprocess.PIPE, text=True,
                                      cwd=str(Path(__file__).resolve().parent.parent))
        assert proxy_proc.stdout is not None
        ports = [int(p) for p in proxy_proc.stdout.readline().split()[1:]]
        for s, port in zip(servers, ports, strict=True):
            pub = s.host_key.with_suffix(".pub").read_text().split()
            s.known_hosts.write_text(f"[127.0.0.1]:{port} {pub[0]} {pub[1]}\n")
            cfg_text += (s.ssh_config.read_text().replace(f"Port {s.port}", f"Port {port}"))
        cfg = tmp / "ssh_config"
        cfg.write_text(cfg_text)
        app = App.open(Settings(home=tmp / "state", ssh_config=(str(cfg),)))
        all_jobs: list[tuple[str, str]] = []
        for h in range(args.hosts):
            for k in range(args.jobs_per_host):
                rd = str(tmp / f"runs/h{h}/j{k}")
                Path(rd).mkdir(parents=True)
                procs.append(subprocess.Popen(["bash", "-c", JOB, "job", rd], start_new_session=True))
                jid = f"job_b{h}x{k}"
                now = iso()
                jobs_repo.insert(app.store, JobRecord(
                    id=jid, host=f"bench{h}", name=f"h{h}-j{k}", backend="nohup", state=JobState.running,
                    command="bench", workdir=rd, run_dir=rd, created_at=now, updated_at=now,
                    spec={"outputs": [rd + "/ckpt"]}))
                all_jobs.append((f"bench{h}", rd))
        time.sleep(2)

        async def timed(ids: list[str] | None) -> tuple[float, int, int]:
            t0 = time.perf_counter()
            r = await patrol(app, ids)
            dt = time.perf_counter() - t0
            # what the model reads is the tool's text (tools/patrol.py render); the JSON rides along as structure
            return dt, len(render(r).encode()), sum(h.round_trips for h in r.hosts)

        async def measure() -> tuple[list[tuple[int, float]], float, int, int, float]:
            # warm-up opens the pooled connections (what a long-lived server has); then measure warm patrols
            await timed(None)
            flat: list[tuple[int, float]] = []
            for n in [n for n in (1, 2, 4, 8) if n <= args.hosts]:
                ids = [f"job_b{h}x{k}" for h in range(n) for k in range(args.jobs_per_host)]
                flat.append((n, min([(await timed(ids))[0] for _ in range(3)])))
            ours_t, report_bytes, rts = await timed(None)
            t = await app.transport("bench0")
            floor = []
            for _ in range(3):
                t0 = time.perf_counter()
                await t.run(["true"])
                floor.append(time.perf_counter() - t0)
            cold_app = App.open(Settings(home=tmp / "state", ssh_config=(str(cfg),)))
            t0 = time.perf_counter()
            await patrol(cold_app, None)
            cold_t = time.perf_counter() - t0
            await cold_app.pool.aclose()
            await app.pool.aclose()
            return flat, ours_t, report_bytes, rts, cold_t, min(floor)

        flat, ours_t, report_bytes, rts, cold_t, floor_t = anyio.run(measure)

        raw = 0
        calls = 0
        t0 = time.perf_counter()
        for host, rd in all_jobs:
            for q in naive_questions(rd):
                out = subprocess.run(["ssh", "-F", str(cfg), host, q], capture_output=True, check=False)
                raw += len(out.stdout) + len(out.stderr)
                calls += 1
        naive_t = time.perf_counter() - t0
        app.store.close()
    finally:
        for pr in procs:
            with contextlib.suppress(OSError):
                os.killpg(pr.pid, signal.SIGKILL)
        if proxy_proc is not None:
            proxy_proc.kill()
        for s in servers:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    rtt = 2 * args.delay_ms / 1000
    flat_rows = "\n".join(f"| {n} | {n * args.jobs_per_host} | {t:.3f} s | {t / floor_t:.1f} |" for n, t in flat)
    body = f"""## patrol

`.venv/bin/python benchmarks/patrol.py --hosts {args.hosts} --jobs-per-host {args.jobs_per_host} --delay-ms {args.delay_ms:g}`
— {args.hosts} real sshd on loopback, each behind a proxy adding {args.delay_ms:g} ms each way (RTT {rtt * 1000:.0f} ms),
{len(all_jobs)} real jobs writing logs and checkpoints. Same run for both ways.

| way | wall time | SSH round trips | bytes the agent reads |
|---|---|---|---|
| mcp-gpu `patrol()` (pooled connections, one probe per host, hosts in parallel) | {ours_t:.3f} s | {rts} | {report_bytes} (the text the model reads) |
| mcp-gpu `patrol()` from a cold start (connections opened) | {cold_t:.3f} s | {rts} | |
| naive: one `ssh` per job per question ({len(naive_questions('x'))} questions × {len(all_jobs)} jobs) | {naive_t:.1f} s | {calls} | {raw} (raw outputs) |
| **ratio naive / mcp-gpu (warm)** | **{naive_t / ours_t:.0f}×** | **{calls / max(rts, 1):.0f}×** | **report = {report_bytes / max(raw, 1):.2f}× raw** |

Flatness (warm patrol, best of 3). The floor for ONE command on one of these links — `true` over the pooled
connection: channel open, exec, exit status, plus the remote shell's start-up — is {floor_t:.3f} s here.

| hosts | jobs | patrol time | × one bare command |
|---|---|---|---|
{flat_rows}

All 8 "hosts" and their 32 jobs share this machine's 2 cores, so each host's probe (a few forks per job)
competes for the same CPU: that, not the network, is what grows with the host count here. The probes
themselves run concurrently, one per host, over pooled connections.
"""
    print(body)
    write_section("patrol", body)


if __name__ == "__main__":
    main()
