"""Benchmark: verify_artifacts (pull + SHA-256 both ends + load check + manifest) vs scp and rsync, same file, same run.

    .venv/bin/python benchmarks/pull.py [--size-mib 1024] [--reps 2] [--no-write]

A private OpenSSH sshd on loopback serves one random file. Each tool copies it `reps` times (fresh destination
each time; the source stays in the page cache for all of them); the best time of each counts. Then the resume
case: the link is cut (sshd stopped with its sessions) once half the bytes have arrived, and a rerun finishes.
Results go to docs/benchmarks.md under `## pull` (only that section is rewritten).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp_gpu.app import App  # noqa: E402
from mcp_gpu.config import Settings  # noqa: E402
from mcp_gpu.lifecycle.verify import verify_artifacts  # noqa: E402
from tests.sshd import Sshd  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- bench:pull -->", "<!-- /bench:pull -->"


def make_file(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        left = size
        while left:
            n = min(left, 16 << 20)
            f.write(os.urandom(n))
            left -= n


def timed(argv: list[str]) -> float:
    t0 = time.monotonic()
    subprocess.run(argv, check=True, capture_output=True)
    return time.monotonic() - t0


async def run_verify(settings: Settings, src_dir: Path, dest: Path) -> tuple[float, int, bool]:
    app = App.open(settings)
    try:
        t0 = time.monotonic()
        r = await verify_artifacts(app, host="testhost", paths=[str(src_dir)], dest=dest)
        return time.monotonic() - t0, r.bytes_moved, r.all_ok
    finally:
        await app.aclose()


async def run_resume(settings: Settings, box: Sshd, src_dir: Path, dest: Path) -> dict[str, float]:
    cut: list[int] = []

    async def cutter(done: int, total: int, msg: str) -> None:
        if not cut and done >= total // 2 and done < total:
            cut.append(done)
            box.stop(sessions=True)

    app = App.open(settings)
    try:
        t0 = time.monotonic()
        r1 = await verify_artifacts(app, host="testhost", paths=[str(src_dir)], dest=dest, progress=cutter)
        t1 = time.monotonic() - t0
        box.start()
        t0 = time.monotonic()
        r2 = await verify_artifacts(app, host="testhost", paths=[str(src_dir)], dest=dest)
        t2 = time.monotonic() - t0
        t0 = time.monotonic()
        r3 = await verify_artifacts(app, host="testhost", paths=[str(src_dir)], dest=dest)
        t3 = time.monotonic() - t0
    finally:
        await app.aclose()
    return {"first_moved": r1.bytes_moved, "first_s": t1, "second_moved": r2.bytes_moved, "second_s": t2,
            "ok": float(r2.all_ok), "third_moved": r3.bytes_moved, "third_s": t3}


def write_section(text: str) -> None:
    """Replace only this benchmark's block (between its markers, or its bare `## pull` section); else append."""
    DOC.parent.mkdir(parents=True, exist_ok=True)
    doc = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    block = f"{BEGIN}\n{text.rstrip()}\n{END}\n"
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        doc = head + block + rest.split(END, 1)[1].lstrip("\n")
    else:
        lines = doc.splitlines(keepends=True)
        start = next((i for i, ln in enumerate(lines) if ln.strip() == "## pull"), None)
        if start is None:
            doc = doc.rstrip("\n") + "\n\n" + block
        else:
            stop = next((i for i in range(start + 1, len(lines))
                         if lines[i].startswith(("## ", "<!-- bench:"))), len(lines))
            doc = "".join(lines[:start]) + block + ("\n" if stop < len(lines) else "") + "".join(lines[stop:])
    DOC.write_text(doc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = ap.parse_args()
    size = args.size_mib * 2**20
    work = Path(tempfile.mkdtemp(prefix="mcp-gpu-pullbench-"))
    try:
        src = work / "remote" / "run" / "shard.dat"
        make_file(src, size)
        box = Sshd(work / "sshd").start()
        cfg = str(box.ssh_config)
        settings = Settings(home=work / "state", ssh_config=(cfg,), connect_timeout=10, command_timeout=600,
                            keepalive=5)
        res: dict[str, list[float]] = {"scp": [], "rsync": [], "verify_artifacts": [],
                                       "(part of it) remote SHA-256 alone": []}
        def run_scp(rep: int) -> None:
            d = work / f"scp{rep}"
            d.mkdir()
            res["scp"].append(timed(["scp", "-q", "-F", cfg, f"testhost:{src}", str(d / "shard.dat")]))

        def run_rsync(rep: int) -> None:
            d = work / f"rsync{rep}"
            d.mkdir()
            res["rsync"].append(timed(["rsync", "-a", "-e", f"ssh -F {cfg}", f"testhost:{src}", str(d) + "/"]))

        def run_ours(rep: int) -> None:
            secs, moved, ok = anyio.run(run_verify, settings, src.parent, work / f"verify{rep}")
            assert ok and moved == size, (ok, moved)
            res["verify_artifacts"].append(secs)

        for rep in range(args.reps):
            # each tool starts with no dirty pages left by the one before (this VM's writeback is slow), and
            # the order rotates so no tool always runs first or last
            steps = [run_scp, run_rsync, run_ours]
            for step in steps[rep % 3:] + steps[: rep % 3]:
                os.sync()
                step(rep)
            res["(part of it) remote SHA-256 alone"].append(
                timed(["ssh", "-F", cfg, "testhost", "openssl", "dgst", "-sha256", str(src)]))
            for p in (work / f"scp{rep}", work / f"rsync{rep}", work / f"verify{rep}"):
                shutil.rmtree(p)
        resume = anyio.run(run_resume, settings, box, src.parent, work / "resume")
        box.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    best = {k: min(v) for k, v in res.items()}
    mibs = {k: size / 2**20 / v for k, v in best.items()}
    ratio_scp = mibs["verify_artifacts"] / mibs["scp"]
    no_remote_hash = best["verify_artifacts"] - best["(part of it) remote SHA-256 alone"]
    ratio_rsync = mibs["verify_artifacts"] / mibs["rsync"]
    rows = "\n".join(f"| {k} | {best[k]:.2f} | {mibs[k]:.0f} | {', '.join(f'{x:.2f}' for x in res[k])} |" for k in res)
    text = f"""## pull

`verify_artifacts` (a stat-only listing probe; the bytes streamed through the OpenSSH client and hashed locally
while they arrive, with the remote SHA-256 computed on the box at the same time; fsync + rename + the per-kind
check (hash-only for this `.dat` file) + MANIFEST.json and registry row) against `scp` and `rsync -a` of the same
{args.size_mib} MiB random file over a
loopback OpenSSH {subprocess.run(['ssh', '-V'], capture_output=True, text=True).stderr.strip().split(',')[0]}
sshd, in the same run, best of {args.reps} (order rotated each round; `sync` before each transfer). Machine: {os.cpu_count()} CPUs ({platform.machine()}), Python
{platform.python_version()}, shared with other work while it ran, so absolute numbers are noisy; the ratios
come from the same minutes.

| tool | best s | MiB/s | all runs (s) |
|---|---|---|---|
{rows}

- verify_artifacts vs scp: **{ratio_scp:.2f}×** scp's throughput (goal ≥ 0.8×), including both hashes.
- verify_artifacts vs rsync: **{ratio_rsync:.2f}×**.
- Both ends share this machine's {os.cpu_count()} cores, so the box's own SHA-256 pass (best
  {best["(part of it) remote SHA-256 alone"]:.2f} s alone) competes with the transfer for CPU; less that, the
  pull + local hash + fsync takes about {no_remote_hash:.2f} s = **{best["scp"] / no_remote_hash:.2f}×** scp's
  throughput. On a real rented box that hash runs on the box's own CPU, alongside the transfer.
- Resume after a cut at half: the first run moved {resume['first_moved'] / 2**20:.0f} MiB before sshd was stopped
  with its sessions; the rerun moved {resume['second_moved'] / 2**20:.0f} MiB in {resume['second_s']:.2f} s and
  verified (all_ok={bool(resume['ok'])}). A third run moved {resume['third_moved']:.0f} bytes in
  {resume['third_s']:.2f} s (one probe: with a manifest present it hashes everything on the remote, so
  unchanged files are proven unchanged and skipped).

Where the time goes: the bytes travel through the OpenSSH client (C crypto, like scp), which writes them
straight into the `.partial` file; a Python thread hashes that file as it grows (SHA-256 with SHA-NI here,
~1.5 GB/s). The remote hash runs on the box while the transfer runs. Without an `ssh` binary (or with MCP_GPU_PULL_ENGINE=sftp) the bytes go over asyncssh SFTP,
whose decryption in this Python process tops out near 100 MiB/s. Both sides write into this VM's page cache,
which is itself slow (~220 MiB/s for 1 GiB here), so absolute numbers swing from run to run.

Reproduce: `.venv/bin/python benchmarks/pull.py --size-mib {args.size_mib} --reps {args.reps}`
"""
    print(text)
    if not args.no_write:
        write_section(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
