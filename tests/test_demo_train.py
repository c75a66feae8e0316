"""The bundled trainer: step lines, atomic checkpoints every N steps, keep-last-K, resume from the newest
checkpoint that loads, the pure-Python format, and a SIGTERM that checkpoints and exits 143."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TRAIN = Path(__file__).resolve().parent.parent / "mcp_gpu" / "demo" / "train.py"
STEP = re.compile(r"^step (\d+)/(\d+) loss (\d+\.\d+) lr (\d+\.\d+)$")


def train(out: Path, *args: str, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-u", str(TRAIN), "--out", str(out), *args], capture_output=True,
                          text=True, timeout=120, check=False)


def ckpts(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith("ckpt_"))


def test_it_trains_prints_steps_and_keeps_the_last_k_checkpoints(tmp_path: Path) -> None:
    out = tmp_path / "ck"
    res = train(out, "--steps", "30", "--ckpt-every", "10", "--keep", "2", "--torch", "off")
    assert res.returncode == 0, res.stderr
    steps = [STEP.match(ln) for ln in res.stdout.splitlines()]
    matched = [m for m in steps if m]
    assert [int(m.group(1)) for m in matched] == list(range(1, 31))
    assert float(matched[-1].group(3)) < float(matched[0].group(3))  # it learns
    assert ckpts(out) == ["ckpt_000020.npz", "ckpt_000030.npz"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["latest"] == "ckpt_000030.npz" and metrics["step"] == 30 and len(metrics["history"]) == 30
    assert not [p for p in out.iterdir() if ".tmp." in p.name]
    assert res.stdout.splitlines()[-1].startswith("done: step 30")


def test_it_resumes_from_the_newest_checkpoint_that_loads_and_matches_a_straight_run(tmp_path: Path) -> None:
    straight = train(tmp_path / "a", "--steps", "30", "--ckpt-every", "10", "--torch", "off")
    out = tmp_path / "b"
    assert train(out, "--steps", "30", "--ckpt-every", "10", "--torch", "off").returncode == 0
    newest = out / "ckpt_000030.npz"
    newest.write_bytes(newest.read_bytes()[:40])  # truncated, as after a crash mid-copy
    again = train(out, "--steps", "30", "--ckpt-every", "10", "--torch", "off")
    assert again.returncode == 0, again.stderr
    assert "skipping unreadable checkpoint ckpt_000030.npz" in again.stdout
    assert "resumed from ckpt_000020.npz at step 20" in again.stdout
    assert next(ln for ln in again.stdout.splitlines() if ln.startswith("step ")).startswith("step 21/30")
    assert again.stdout.splitlines()[-1] == straight.stdout.splitlines()[-1]  # deterministic: same final loss


def test_the_pure_python_format_saves_json_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "js"
    assert train(out, "--steps", "10", "--ckpt-every", "5", "--format", "json", "--torch", "off").returncode == 0
    assert ckpts(out) == ["ckpt_000005.json", "ckpt_000010.json"]
    more = train(out, "--steps", "15", "--ckpt-every", "5", "--format", "json", "--torch", "off")
    assert "resumed from ckpt_000010.json at step 10" in more.stdout and more.returncode == 0
    assert json.loads((out / "ckpt_000015.json").read_text())["step"] == 15


def test_sigterm_checkpoints_and_exits_143(tmp_path: Path) -> None:
    out = tmp_path / "term"
    proc = subprocess.Popen([sys.executable, "-u", str(TRAIN), "--out", str(out), "--steps", "100000",
                             "--ckpt-every", "100000", "--sleep", "0.02", "--torch", "off"], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    for line in proc.stdout:
        if line.startswith("step 5/") or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGTERM)
    rest = proc.stdout.read()
    assert proc.wait(timeout=30) == 143
    m = re.search(r"checkpoint saved at step (\d+)", rest)
    assert m, rest
    assert ckpts(out) == [f"ckpt_{int(m.group(1)):06d}.npz"]


@pytest.mark.torch
def test_with_torch_it_also_saves_pt_that_loads_with_weights_only(tmp_path: Path) -> None:
    import os

    py = os.environ.get("MCP_GPU_TORCH_PYTHON")
    if not py:
        pytest.skip("no torch environment: MCP_GPU_TORCH_PYTHON is set by scripts/test.sh when .venv-torch exists")
    out = tmp_path / "pt"
    res = train(out, "--steps", "4", "--ckpt-every", "2", python=py)
    assert res.returncode == 0, res.stderr
    assert "ckpt_000004.pt" in ckpts(out)
    load = subprocess.run([py, "-c", "import sys, torch; d = torch.load(sys.argv[1], weights_only=True, "
                           "map_location='cpu'); print(sorted(d) if isinstance(d, dict) else type(d))",
                           str(out / "ckpt_000004.pt")], capture_output=True, text=True, timeout=120, check=False)
    assert load.returncode == 0, load.stderr
