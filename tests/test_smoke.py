"""`smoke_cpu` runs real processes on this machine: passing, crashing, CUDA-requiring, mis-shaped, hanging ones."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from mcp import Client

from mcp_gpu.app import App
from mcp_gpu.errors import ConfigError
from mcp_gpu.lifecycle.smoke import GRACE_S, pip_name, smoke_cpu
from mcp_gpu.server import build_server

pytestmark = pytest.mark.anyio
PY = sys.executable
TORCH_PY = Path(__file__).parent.parent / ".venv-torch" / "bin" / "python"


def script(tmp_path: Path, body: str, name: str = "train.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def gone(pid: int) -> bool:
    """No such process, or only its zombie (dead, waiting for init to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


async def test_a_passing_script_gets_a_pass_with_gpus_hidden_and_loggers_off(tmp_path: Path) -> None:
    train = script(tmp_path, """
        import os
        for k in ("CUDA_VISIBLE_DEVICES", "WANDB_MODE", "WANDB_DISABLED", "PYTHONUNBUFFERED", "MY_FLAG"):
            print(f"{k}={os.environ.get(k)!r}")
        for step in (1, 2):
            print(f"step {step} loss {1.0 / step:.3f}")
    """)
    r = await smoke_cpu([PY, train], str(tmp_path), timeout_s=30, env={"MY_FLAG": "x y", "WANDB_MODE": "online"})
    assert (r.verdict, r.exit_code, r.timed_out, r.primary) == ("pass", 0, False, "healthy")
    assert "CUDA_VISIBLE_DEVICES=''" in r.tail and "WANDB_MODE='disabled'" in r.tail  # forced values win
    assert "WANDB_DISABLED='true'" in r.tail and "PYTHONUNBUFFERED='1'" in r.tail and "MY_FLAG='x y'" in r.tail
    assert r.tail[-1] == "step 2 loss 0.500" and r.duration_s < 30


async def test_a_missing_module_fails_with_the_pip_install_to_run(tmp_path: Path) -> None:
    train = script(tmp_path, "import os\nimport mcp_gpu_not_a_real_pkg.sub\n")
    r = await smoke_cpu(f"{PY} {train}", str(tmp_path), timeout_s=30)
    assert r.verdict == "fail" and r.exit_code == 1 and r.primary == "import_or_config_error"
    f = r.findings[0]
    assert f.cls == "import_or_config_error" and "pip install mcp-gpu-not-a-real-pkg" in f.remedy
    assert any("No module named 'mcp_gpu_not_a_real_pkg'" in e for e in f.evidence)
    assert (pip_name("cv2"), pip_name("sklearn.linear_model"), pip_name("yaml")) == ("opencv-python", "scikit-learn",
                                                                                      "PyYAML")


async def test_code_that_hard_requires_cuda_is_told_to_add_a_device_flag(tmp_path: Path) -> None:
    # What torch's CPU build raises from `.cuda()` (torch/cuda/__init__.py `_lazy_init`), and an `is_available` assert.
    raises = script(tmp_path, """
        def to_gpu():
            raise AssertionError("Torch not compiled with CUDA enabled")
        print("building model")
        to_gpu()
    """)
    asserts = script(tmp_path, """
        class cuda:
            @staticmethod
            def is_available():
                return False
        assert cuda.is_available(), "this script needs a GPU"
    """, name="assert_gpu.py")
    for path in (raises, asserts):
        r = await smoke_cpu([PY, path], str(tmp_path), timeout_s=30)
        assert r.exit_code == 1 and r.verdict in ("warn", "fail")
        cuda = [f for f in r.findings if "hard-requires CUDA" in f.title]
        assert cuda, r.findings
        assert "device" in cuda[0].remedy and "map_location" in cuda[0].remedy


@pytest.mark.torch
async def test_real_torch_dot_cuda_on_cpu_is_reported_as_cuda_required(tmp_path: Path) -> None:
    if not TORCH_PY.exists():
        pytest.skip("no .venv-torch (the README's torch environment)")
    train = script(tmp_path, "import torch\nx = torch.zeros(2).cuda()\n")
    r = await smoke_cpu([str(TORCH_PY), train], str(tmp_path), timeout_s=120)
    assert r.exit_code == 1 and any("hard-requires CUDA" in f.title for f in r.findings), r.tail


async def test_a_shape_error_fails_with_a_shape_finding(tmp_path: Path) -> None:
    train = script(tmp_path, """
        print("epoch 0")
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (8x784 and 512x10)")
    """)
    r = await smoke_cpu([PY, train], str(tmp_path), timeout_s=30)
    assert r.verdict == "fail"
    assert any("shape" in f.title for f in r.findings), r.findings


async def test_a_hanging_run_is_killed_at_the_limit_with_its_children(tmp_path: Path) -> None:
    beat, pidfile = tmp_path / "beat", tmp_path / "child.pid"
    train = script(tmp_path, f"""
        import subprocess, sys, time
        child = '''
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a stubborn worker: only SIGKILL ends it
        open({str(pidfile)!r}, "w").write(str(os.getpid()))
        n = 0
        while True:
            n += 1
            open({str(beat)!r}, "w").write(str(n))
            time.sleep(0.05)
        '''
        subprocess.Popen([sys.executable, "-c", child])
        print("waiting for the data loader", flush=True)
        time.sleep(3600)
    """)
    r = await smoke_cpu([PY, train], str(tmp_path), timeout_s=2)
    assert r.timed_out and r.exit_code is None and r.verdict == "warn"
    assert r.findings[0].cls == "time_limit" and "waiting for the data loader" in r.findings[0].evidence
    assert r.duration_s < 2 + GRACE_S + 3
    pid = int(pidfile.read_text())
    assert gone(pid), "the child outlived the smoke"
    last = beat.read_text()
    with anyio.move_on_after(0.3):  # several heartbeat periods: nothing writes it any more
        while beat.read_text() == last:
            await anyio.sleep(0.05)
    assert beat.read_text() == last


async def test_children_left_behind_by_a_finished_run_are_swept(tmp_path: Path) -> None:
    pidfile = tmp_path / "stray.pid"
    train = script(tmp_path, f"""
        import subprocess, sys
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        open({str(pidfile)!r}, "w").write(str(p.pid))
        print("done")
    """)
    r = await smoke_cpu([PY, train], str(tmp_path), timeout_s=30)
    assert r.verdict == "pass" and r.exit_code == 0
    assert gone(int(pidfile.read_text()))


async def test_a_command_string_is_split_into_argv_and_never_run_by_a_shell(tmp_path: Path) -> None:
    r = await smoke_cpu(f"echo $(touch {tmp_path}/pwned) `id` ';' rm -rf /", str(tmp_path), timeout_s=10)
    assert r.exit_code == 0 and not (tmp_path / "pwned").exists()
    assert r.tail == [f"$(touch {tmp_path}/pwned) `id` ; rm -rf /"]


async def test_bad_arguments_are_config_errors_and_a_missing_program_is_a_failed_smoke(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        await smoke_cpu([], str(tmp_path))
    with pytest.raises(ConfigError):
        await smoke_cpu(["true"], str(tmp_path / "nope"))
    with pytest.raises(ConfigError):
        await smoke_cpu(["true"], str(tmp_path), env={"BAD NAME": "x"})
    r = await smoke_cpu(["mcp-gpu-no-such-program"], str(tmp_path), timeout_s=5)
    assert r.verdict == "fail" and r.exit_code == 127


async def test_the_smoke_cpu_tool_returns_a_structured_report(app: App, tmp_path: Path) -> None:
    async with Client(build_server(app=app)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert tools["smoke_cpu"].annotations is not None and tools["smoke_cpu"].annotations.read_only_hint is False
        r = await c.call_tool("smoke_cpu", {"command": [PY, "-c", "print('one batch ok')"], "cwd": str(tmp_path),
                                            "timeout_s": 30})
        assert not r.is_error and r.structured_content is not None
        assert r.structured_content["verdict"] == "pass" and r.structured_content["tail"] == ["one batch ok"]
        bad = await c.call_tool("smoke_cpu", {"command": ["true"], "cwd": str(tmp_path / "missing")})
        assert bad.is_error


def test_the_cli_verb_runs_the_command_after_the_double_dash(tmp_path: Path) -> None:
    env = {**os.environ, "MCP_GPU_HOME": str(tmp_path / "state")}
    ok = subprocess.run([PY, "-m", "mcp_gpu", "smoke", "--cwd", str(tmp_path), "--timeout", "30", "--env", "A=1",
                         "--", PY, "-c", "import os; print('A is', os.environ['A'])"],
                        capture_output=True, text=True, env=env, check=False)
    assert ok.returncode == 0, ok.stderr
    assert "smoke PASS" in ok.stdout and "A is 1" in ok.stdout
    bad = subprocess.run([PY, "-m", "mcp_gpu", "smoke", "--cwd", str(tmp_path), "--", PY, "-c", "import nopkg_zz"],
                         capture_output=True, text=True, env=env, check=False)
    assert bad.returncode == 1 and "pip install nopkg-zz" in bad.stdout
