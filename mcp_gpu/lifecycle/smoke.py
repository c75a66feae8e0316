"""Phase 2, `smoke_cpu`: run the user's entry point here, on CPU, for a batch or two, before paying for a GPU.

GPUs are hidden (CUDA_VISIBLE_DEVICES=""), experiment loggers are switched off with their own documented switches,
output is unbuffered, and the command runs in a new process group that is killed whole (children included) at
the time limit, and swept after a normal exit so no stray DataLoader worker outlives the smoke. The output goes
through the shared triage engine; the checks only a CPU smoke needs (code that hard-requires CUDA, shape errors,
the exact package to install) live here.

The command is the agent's, so it gets nothing that guards the server: an allow-listed environment (no provider
key, token or MCP_GPU_* setting; secrets only when named in `secret_env`), a private mount namespace that hides
the state dir and the provider key files (`sandbox.py`; the answer says when this machine allows none), and its
output scrubbed of every secret value the server knows.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, Field

from mcp_gpu import log
from mcp_gpu.backends._env import allowed_env, check_env_name, exit_signal_of
from mcp_gpu.errors import ConfigError
from mcp_gpu.lifecycle.sandbox import Sandbox, escape_hatches, sandbox_for
from mcp_gpu.models import Finding, Verdict, finding, verdict_of

TAIL_LINES = 40
TRIAGE_LINES = 400
GRACE_S = 3.0
READ_BYTES = 256 * 1024

# Loggers off: W&B, Comet, MLflow (also the transformers integration), Neptune, trackio (local store in a temp dir).
LOGGERS_OFF = {"WANDB_MODE": "disabled", "WANDB_DISABLED": "true", "COMET_MODE": "disabled",
               "COMET_AUTO_LOG_DISABLE": "true", "DISABLE_MLFLOW_INTEGRATION": "TRUE", "NEPTUNE_MODE": "debug",
               "HF_HUB_DISABLE_TELEMETRY": "1"}

# import name → pip name, where they differ (the common ones in training code).
PIP_NAMES = {"cv2": "opencv-python", "PIL": "Pillow", "sklearn": "scikit-learn", "yaml": "PyYAML",
             "skimage": "scikit-image", "Bio": "biopython", "attr": "attrs", "google.protobuf": "protobuf",
             "dotenv": "python-dotenv", "jwt": "PyJWT", "fitz": "PyMuPDF", "tensorboardX": "tensorboardX"}

_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")
_CUDA = re.compile(r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|No CUDA GPUs are available|"
                   r"no CUDA-capable device is detected|Attempting to deserialize object on a CUDA device|"
                   r"cuda\.is_available\(\)|CUDA driver initialization failed|nvidia-smi: (?:command )?not found")
_SHAPE = re.compile(r"mat1 and mat2 shapes cannot be multiplied|size mismatch|shape '\[[^\]]*\]' is invalid|"
                    r"The size of tensor a \(\d+\) must match|Expected input batch_size|Sizes of tensors must match|"
                    r"\bshape\b.*\b(mismatch|incompatible|invalid)|(mismatch|incompatible|invalid)\b.*\bshape\b", re.I)
_KEYERROR = re.compile(r"^(?:\w+\.)*(KeyError|ConfigAttributeError|ConfigKeyError|MissingMandatoryValue)\b")


class SmokeReport(BaseModel):
    """What a CPU smoke run showed. Read `verdict`, then `findings` (each with its fixed remedy)."""

    verdict: Verdict
    command: list[str]
    cwd: str
    exit_code: int | None = Field(description="exit status; 128+N when signal N ended it; None when it was killed")
    exit_signal: str | None = None
    timed_out: bool
    duration_s: float
    primary: str = Field(description="root-cause triage class, or 'healthy'")
    findings: list[Finding] = Field(default_factory=list)
    tail: list[str] = Field(default_factory=list, description="the last lines of stdout+stderr")
    env_forced: dict[str, str] = Field(default_factory=dict, description="what the smoke set: GPUs hidden, loggers off")
    env_inherited: list[str] = Field(default_factory=list, description="NAMES of the allow-listed variables it got "
                                                                       "from the server's environment")
    sandbox: str = Field(default="", description="how the command was kept from the server's keys (or that it "
                                                 "was not)")


def smoke_env(user_env: dict[str, str] | None, scratch: str,
              secrets: dict[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(the full environment, the variables the smoke forces): the allow-listed part of the server's environment,
    the caller's env, the NAMED secrets, then the forced values (which win)."""
    forced = {"CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1", **LOGGERS_OFF,
              "TRACKIO_DIR": f"{scratch}/trackio", "MLFLOW_TRACKING_URI": f"file:{scratch}/mlruns"}
    env = allowed_env()
    for name, value in (user_env or {}).items():
        env[check_env_name(name)] = value
    env.update(secrets or {})
    env.update(forced)
    return env, forced


def guarded_paths() -> list[Path]:
    """What the smoke must not read: the state dir and the provider key files (profiles whose teardown is an API)."""
    from mcp_gpu.config import Settings
    from mcp_gpu.profiles import all_profiles

    out = [Settings.from_env().home]
    for p in all_profiles():
        if p.head.teardown.method == "api":
            out += [Path(f).expanduser() for f in p.head.credentials.files]
    return out


def argv_of(command: list[str] | str) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv or not argv[0]:
        raise ConfigError("smoke_cpu needs a command", hint="e.g. ['python', 'train.py', '--max-steps', '2']")
    return argv


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """Is any live (non-zombie) process left in the group? /proc where there is one, else kill(0)."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for stat in proc.glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                return True
    return False


async def _until_gone(pgid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while _group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def _end_group(proc: asyncio.subprocess.Process) -> None:
    """TERM to the whole group, a grace period, then KILL: the command and every child it started.
    Returns when no live process is left in the group (a child that called setsid() has left it)."""
    if _group_alive(proc.pid):
        _kill_group(proc.pid, signal.SIGTERM)
        if not await _until_gone(proc.pid, GRACE_S):
            _kill_group(proc.pid, signal.SIGKILL)
            await _until_gone(proc.pid, 5)
    await proc.wait()


def _last_lines(path: Path, limit: int) -> list[str]:
    """The last `limit` non-empty lines of the output file, read from its end; tqdm \r-redraws keep their latest state."""
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - READ_BYTES))
        data = f.read()
    lines = [piece.decode("utf-8", "replace")[:500] for raw in data.split(b"\n") for piece in raw.split(b"\r")
             if piece.strip()]
    if size > READ_BYTES and lines:
        lines = lines[1:]  # the first one is cut
    return lines[-limit:]


async def smoke_cpu(command: list[str] | str, cwd: str, timeout_s: float = 120, env: dict[str, str] | None = None,
                    secret_env: list[str] | None = None, hide: list[Path] | None = None) -> SmokeReport:
    """Run `command` (argv; a string is split like a shell would, without a shell) in `cwd` on CPU, sandboxed."""
    from mcp_gpu.lifecycle.launch import read_secrets

    argv = argv_of(command)
    workdir = Path(cwd).expanduser()
    if not workdir.is_dir():
        raise ConfigError(f"smoke cwd {cwd!r} is not a directory", hint="pass the project directory the command runs in")
    if not 0 < timeout_s <= 3600:
        raise ConfigError(f"timeout_s={timeout_s} must be between 0 and 3600 seconds",
                          hint="a smoke is 1-2 batches: 60-300 s is typical")
    secrets = read_secrets(secret_env)
    box = sandbox_for([*(guarded_paths() if hide is None else hide), *escape_hatches()])
    if box.covers(workdir):
        raise ConfigError(f"smoke cwd {cwd!r} is the server's state dir (or a key file): the smoke may not run there",
                          hint="run it in the project directory")
    with tempfile.TemporaryDirectory(prefix="mcp-gpu-smoke-") as scratch:
        full_env, forced = smoke_env(env, scratch, secrets)
        inherited = sorted(set(allowed_env()) - set(forced))
        out_path = Path(scratch) / "out.log"
        t0 = time.monotonic()
        # Output goes to a file, not a pipe: a child that keeps the pipe open cannot then hold up the exit.
        with out_path.open("wb") as out:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *box.wrap(argv, workdir), cwd=str(workdir), env=full_env, stdin=asyncio.subprocess.DEVNULL, stdout=out,
                    stderr=asyncio.subprocess.STDOUT, start_new_session=True)
            except (FileNotFoundError, PermissionError) as exc:
                f = finding("import_or_config_error", "error", f"cannot start {argv[0]!r}: {exc.strerror}",
                            evidence=[str(exc)], remedy="check the command and the PATH of the environment it runs in")
                return SmokeReport(verdict="fail", command=argv, cwd=str(workdir), exit_code=127, timed_out=False,
                                   duration_s=0.0, primary="import_or_config_error", findings=[f], env_forced=forced,
                                   env_inherited=inherited, sandbox=box.description)
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), timeout_s)
        except TimeoutError:
            timed_out = True
        finally:
            await _end_group(proc)  # at the limit: everything; after an exit: stray children
        duration = time.monotonic() - t0
        lines = [log.scrub(x) for x in _last_lines(out_path, TRIAGE_LINES)]
    rc = proc.returncode
    exit_code = None if timed_out else (128 - rc if rc is not None and rc < 0 else rc)
    exit_signal = signal.Signals(-rc).name.removeprefix("SIG") if rc is not None and rc < 0 else exit_signal_of(exit_code)
    primary, findings = triage_smoke(lines, exit_code, timed_out, timeout_s)
    if not box.active:
        findings.append(_unsandboxed(box))
    return SmokeReport(verdict=verdict_of(findings), command=argv, cwd=str(workdir), exit_code=exit_code,
                       exit_signal=exit_signal, timed_out=timed_out, duration_s=round(duration, 2), primary=primary,
                       findings=findings, tail=lines[-TAIL_LINES:], env_forced=forced, env_inherited=inherited,
                       sandbox=box.description)


def _unsandboxed(box: Sandbox) -> Finding:
    return finding("sandbox_unavailable", "warn", "the smoke ran WITHOUT a sandbox: it could read the server's "
                   "state dir and key files", evidence=[box.how],
                   remedy="run the server on Linux with util-linux (unshare, setpriv) and user namespaces enabled "
                          "(sysctl kernel.unprivileged_userns_clone=1), or as a dedicated user")


def pip_name(module: str) -> str:
    top = module.split(".")[0]
    return PIP_NAMES.get(module) or PIP_NAMES.get(top) or top.replace("_", "-")


def triage_smoke(lines: list[str], exit_code: int | None, timed_out: bool, timeout_s: float) -> tuple[str, list[Finding]]:
    """The shared engine's findings, sharpened for a CPU smoke; a small fallback when the engine is absent."""
    crashed = exit_code not in (0, None)
    try:
        from mcp_gpu.triage.engine import triage
    except ImportError:  # pragma: no cover - the engine ships with the package; kept for partial installs
        found, primary = [], "healthy"
    else:
        result = triage(lines, exit_code=exit_code if crashed else None)
        found, primary = list(result.findings), result.primary
    found = [_sharpen(f) for f in found]
    found += [f for f in _own_checks(lines) if not _covered(f, found)]
    if crashed and not any(f.severity in ("error", "critical") or _is_cuda(f) for f in found):
        found.append(finding("traceback", "error", f"the command exited {exit_code}", evidence=lines[-5:],
                             remedy="read the tail; fix the error and run the smoke again"))
    if timed_out:
        quiet = not lines
        found.append(finding("time_limit", "warn",
                             f"still running at the {timeout_s:g}s limit: killed with its children"
                             + (" (it printed nothing: hung?)" if quiet else ""),
                             evidence=lines[-5:],
                             remedy="limit the smoke to 1-2 batches (e.g. --max-steps 2 / --fast-dev-run) or raise "
                                    "timeout_s; if the last line never changes, it is stuck there (data loading, a "
                                    "download, a barrier waiting for other ranks)"))
    if primary == "healthy" and found:
        primary = max(found, key=lambda f: {"info": 0, "warn": 1, "error": 2, "critical": 3}[f.severity]).cls
    found.sort(key=lambda f: -{"info": 0, "warn": 1, "error": 2, "critical": 3}[f.severity])
    return primary, found


def _is_cuda(f: Finding) -> bool:
    return f.title.startswith("the code hard-requires CUDA")


def _covered(new: Finding, found: list[Finding]) -> bool:
    """Same evidence line already explained (the engine and our checks often see the same line)."""
    seen = {line for f in found for line in f.evidence}
    return any(line in seen for line in new.evidence) or any(f.title == new.title for f in found)


def _cuda_finding(line: str) -> Finding:
    return finding("import_or_config_error", "warn", "the code hard-requires CUDA, so the CPU smoke could not run it",
                   evidence=[line.strip()],
                   remedy="add a device flag (e.g. --device cpu) and use torch.device('cuda' if "
                          "torch.cuda.is_available() else 'cpu') instead of .cuda() / asserts; load checkpoints with "
                          "map_location='cpu'; then run the smoke again")


def _sharpen(f: Finding) -> Finding:
    text = "\n".join(f.evidence)
    if m := _MODULE.search(text):
        return f.model_copy(update={"remedy": f"pip install {pip_name(m.group(1))} (in the environment the job runs in;"
                                              f" add it to requirements), then run the smoke again"})
    if _CUDA.search(text) and f.cls in ("import_or_config_error", "cuda_device_error", "traceback"):
        return _cuda_finding(next((e for e in f.evidence if _CUDA.search(e)), f.evidence[0]))
    return f


def _own_checks(lines: list[str]) -> list[Finding]:
    out: list[Finding] = []
    for i, line in enumerate(lines):
        if m := _MODULE.search(line):
            out.append(finding("import_or_config_error", "error", f"module {m.group(1)!r} is missing", gotcha="U5",
                               evidence=[line.strip()], remedy=f"pip install {pip_name(m.group(1))}, then smoke again"))
        elif _CUDA.search(line) and ("Error" in line or "assert" in line or (i + 1 < len(lines)
                                     and "AssertionError" in lines[i + 1])):
            out.append(_cuda_finding(line))
        elif _SHAPE.search(line) and ("Error" in line or "error" in line):
            out.append(finding("import_or_config_error", "error", "a tensor shape does not fit the model or config",
                               evidence=[line.strip()],
                               remedy="check the model dimensions against the data/config (input size, vocab, "
                                      "number of classes, batch layout) and any checkpoint being loaded"))
        elif _KEYERROR.search(line.strip()):
            out.append(finding("import_or_config_error", "error", "a config key is missing", evidence=[line.strip()],
                               remedy="the config lacks a key the code reads: add it or fix its name, then smoke again"))
    return out
