"""Patrol of 2,000 jobs on ONE host: the one observation probe against one exec per job, same run.

    .venv/bin/python benchmarks/patrol_scale.py [--jobs 2000] [--naive 100]

The host is a real OpenSSH sshd on loopback. Each job is a real run directory (out.log with training-style lines,
heartbeat, meta.json, pgid, a checkpoint dir with two files) registered as a nohup job; every job's pgid names
one live process group (a sleeper this script started), so every job is observed running and its log is read.
Measured: the probe's wall time, answer bytes and CPU time (bash `times` inside the probe: the shell and all its
children) for a first patrol (every log new) and a steady one (one new line per job); the whole `patrol()` and
the size of the tool's bounded answer; against the naive way, one `ssh` per job (a fresh connection each, as
shell patrols do) and one exec per job over the pooled connection, measured on `--naive` jobs and scaled to all.
Results go to docs/benchmarks.md (section patrol_scale).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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
from mcp_gpu.backends import observe as obs_path
from mcp_gpu.config import Settings
from mcp_gpu.lifecycle.patrol import patrol
from mcp_gpu.models import JobRecord, JobState, iso
from mcp_gpu.probes import load
from mcp_gpu.store import jobs as jobs_repo
from mcp_gpu.tools.patrol import render
from tests.sshd import Sshd


def make_jobs(app: App, root: Path, n: int, pgid: int) -> list[JobRecord]:
    now = iso()
    recs = []
    for i in range(n):
        jid = f"job_s{i:08x}"
        rd = root / jid
        (rd / "ck").mkdir(parents=True)
        (rd / "out.log").write_text("".join(f"step {s}/100000 loss {1 / s:.4f} lr 3e-4\n" for s in range(1, 41)))
        (rd / "heartbeat").touch()
        (rd / "meta.json").write_text(json.dumps({"job_id": jid}))
        (rd / "pgid").write_text(f"{pgid}\n")
        (rd / "ck" / "ckpt_20.pt").write_bytes(b"x" * 4096)
        (rd / "ck" / "ckpt_40.pt").write_bytes(b"x" * 4096)
        rec = JobRecord(id=jid, host="bench", name=f"scale-{i}", backend="nohup", state=JobState.running,
                        command="true\n", workdir=str(rd), run_dir=str(rd), created_at=now, updated_at=now,
                        spec={"outputs": ["ck"]})
        recs.append(jobs_repo.insert(app.store, rec))
    return recs


def grow(root: Path, step: int) -> None:
    for rd in root.iterdir():
        with (rd / "out.log").open("a") as f:
            f.write(f"step {step}/100000 loss 0.0100 lr 3e-4\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--naive", type=int, default=100)
    args = ap.parse_args()
    log.configure("warning")
    tmp = Path(tempfile.mkdtemp(prefix="mcpgpu-scale-"))
    server = Sshd(tmp / "sshd", alias="bench").start()
    sleeper = subprocess.Popen(["sleep", "100000"], start_new_session=True)
    try:
        app = App.open(Settings(home=tmp / "state", ssh_config=(str(server.ssh_config),), command_timeout=300))
        root = tmp / "runs"
        recs = make_jobs(app, root, args.jobs, sleeper.pid)

        async def measure() -> dict[str, float]:
            t = await app.transport("bench")
            await t.run(["true"])  # connect once: the pool is warm for both ways
            out: dict[str, float] = {}
            targets = [obs_path.target_of(r) for r in recs]
            t0 = time.perf_counter()
            first = await obs_path.observe_host(t, targets, timeout=300)
            out["first_s"] = time.perf_counter() - t0
            out["first_bytes"] = first.answer_bytes
            out["first_cpu"] = first.cpu_s or 0.0
            out["running"] = sum(obs_path.verdict(j).kind == "running" for j in first.jobs.values())
            # steady state: offsets at the end, one new line per job
            targets = [obs_path.Target(**{**t_.__dict__, "log_offset": first.jobs[t_.key].log_size or 0})
                       for t_ in targets]
            grow(root, 41)
            t0 = time.perf_counter()
            steady = await obs_path.observe_host(t, targets, timeout=300)
            out["steady_s"] = time.perf_counter() - t0
            out["steady_bytes"] = steady.answer_bytes
            out["steady_cpu"] = steady.cpu_s or 0.0
            # the whole patrol (probe, triage, registry writes): first (every log line new) and steady
            t0 = time.perf_counter()
            report = await patrol(app)
            out["patrol_first_s"] = time.perf_counter() - t0
            grow(root, 42)
            t0 = time.perf_counter()
            report = await patrol(app)
            out["patrol_s"] = time.perf_counter() - t0
            bounded = report.bounded()
            out["tool_text"] = len(render(bounded))
            out["tool_json"] = len(json.dumps(bounded.model_dump(mode="json", by_alias=True)))
            out["full_json"] = len(json.dumps(report.model_dump(mode="json", by_alias=True)))
            # naive, pooled: one exec per job over the warm connection
            k = min(args.naive * 2, len(recs))
            t0 = time.perf_counter()
            for tg in targets[:k]:
                await obs_path.observe_host(t, [tg], timeout=60)
            out["pooled_per_job_s"] = (time.perf_counter() - t0) / k
            return out

        m = anyio.run(measure)
        # naive, shell-patrol style: one fresh `ssh` per job running the same probe for that job alone
        script = load("observe.sh")
        k = min(args.naive, len(recs))
        t0 = time.perf_counter()
        for r in recs[:k]:
            stdin = obs_path.request([obs_path.target_of(r)])
            subprocess.run(["ssh", "-F", str(server.ssh_config), "bench", "bash", "-c",
                            "'" + script.replace("'", "'\\''") + "'", "mcp-gpu", "65536", "1048576", "1000"],
                           input=stdin, capture_output=True, check=False)
        ssh_per_job = (time.perf_counter() - t0) / k
        app.store.close()
    finally:
        with contextlib.suppress(OSError):
            os.killpg(sleeper.pid, signal.SIGKILL)
        server.stop()

    n = args.jobs
    naive_ssh = ssh_per_job * n
    naive_pool = m["pooled_per_job_s"] * n
    body = f"""## patrol at scale: {n} jobs on one host

`.venv/bin/python benchmarks/patrol_scale.py --jobs {n} --naive {args.naive}` — one real sshd on loopback, {n} run
dirs (40 log lines, heartbeat, two checkpoints each), every job alive ({int(m['running'])}/{n} observed running).
Same run, same machine; the naive ways were measured on {args.naive} (ssh) and {min(args.naive * 2, n)} (pooled)
jobs and scaled to {n}.

| way | wall time | answer | probe CPU | CPU per job |
|---|---|---|---|---|
| observation probe, first patrol (all logs new) | {m['first_s']:.2f} s | {m['first_bytes'] / 1024:.0f} KiB | {m['first_cpu']:.2f} s | {m['first_cpu'] / n * 1000:.2f} ms |
| observation probe, steady (one new line per job) | {m['steady_s']:.2f} s | {m['steady_bytes'] / 1024:.0f} KiB | {m['steady_cpu']:.2f} s | {m['steady_cpu'] / n * 1000:.2f} ms |
| whole `patrol()` (probe + triage + registry), first: 41 lines per job to triage | {m['patrol_first_s']:.2f} s | | | |
| whole `patrol()` (probe + triage + registry), steady | {m['patrol_s']:.2f} s | tool text {m['tool_text'] / 1024:.1f} KiB, structured {m['tool_json'] / 1024:.0f} KiB (full report {m['full_json'] / 1024:.0f} KiB) | | |
| naive: one exec per job on the pooled connection | {naive_pool:.1f} s | | | |
| naive: one fresh `ssh` per job | {naive_ssh:.1f} s | | | |
| **ratio naive ssh / probe (steady)** | **{naive_ssh / max(m['steady_s'], 1e-9):.0f}×** | | | |
| **ratio pooled exec / probe (steady)** | **{naive_pool / max(m['steady_s'], 1e-9):.0f}×** | | | |
| **ratio naive ssh / whole patrol (steady)** | **{naive_ssh / max(m['patrol_s'], 1e-9):.0f}×** | | | |

The naive execs run the same probe for one job each, so each also asks the host-wide questions (process table,
nvidia-smi, filesystems) once per job, as a per-job shell patrol does. The probe's CPU is measured inside it
(bash `times`: the shell and every child it waited for). Machine: 2 shared CPU cores under other load (see
`uptime` in the run), so absolute times are noisy; the ratios come from the same run.

The tool's answer stays bounded whatever the job count: counts per state, at most 40 summary lines with problems
first, at most 50 job records (`jobs_omitted` says how many were left out), findings spelled out for 10 jobs.
"""
    print(body)
    write_section("patrol_scale", body)


if __name__ == "__main__":
    main()
