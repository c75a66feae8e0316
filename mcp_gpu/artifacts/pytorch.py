"""PyTorch checkpoint checks: zip CRCs, a pickle-opcode scan for imports, and `torch.load` in a subprocess.

torch is never imported here: it is heavy, and a checkpoint is untrusted input. The load runs in a child
process (`MCP_GPU_TORCH_PYTHON`, else this interpreter when it has torch) with `weights_only=True`,
`map_location="cpu"` and a timeout, and reports tensor count and non-finite tensors as JSON.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickletools
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from mcp_gpu.artifacts.checks import CheckResult

SAFE_MODULE_PREFIXES = ("torch", "numpy", "collections")
SAFE_GLOBALS = frozenset({
    "builtins.set", "builtins.frozenset", "builtins.dict", "builtins.list", "builtins.tuple", "builtins.int",
    "builtins.float", "builtins.complex", "builtins.bool", "builtins.str", "builtins.bytes", "builtins.bytearray",
    "builtins.slice", "builtins.range", "_codecs.encode", "__builtin__.set", "copyreg._reconstructor",
})

TORCH_LOAD = r"""
import json, sys
out = {}
try:
    import torch
    torch.set_num_threads(2)
    obj = torch.load(sys.argv[1], weights_only=True, map_location="cpu")
    seen = {"n": 0}
    bad = []
    def walk(o, name, depth):
        if depth > 64:
            return
        if isinstance(o, torch.Tensor):
            seen["n"] += 1
            try:
                if (o.is_floating_point() or o.is_complex()) and o.numel() and not bool(torch.isfinite(o).all()):
                    bad.append(name or "<root>")
            except RuntimeError:
                pass
        elif isinstance(o, dict):
            for k, v in o.items():
                walk(v, f"{name}.{k}" if name else str(k), depth + 1)
        elif isinstance(o, (list, tuple)):
            for i, v in enumerate(o):
                walk(v, f"{name}[{i}]", depth + 1)
    walk(obj, "", 0)
    keys = list(obj.keys())[:8] if isinstance(obj, dict) else []
    out = {"ok": not bad, "tensors": seen["n"], "nonfinite": bad[:10], "keys": [str(k) for k in keys],
           "torch": torch.__version__}
except ImportError as e:
    out = {"ok": None, "error": f"ImportError: {e}"}
except Exception as e:
    out = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:400]}"}
print("\n" + json.dumps(out))
"""


def torch_python() -> str | None:
    """The interpreter that runs torch.load: MCP_GPU_TORCH_PYTHON, else this one if it has torch."""
    env = os.environ.get("MCP_GPU_TORCH_PYTHON")
    if env:
        return env
    return sys.executable if importlib.util.find_spec("torch") is not None else None


def scan_pickle(stream: IO[bytes]) -> list[str]:
    """Every `module.name` the pickle imports (GLOBAL, INST, STACK_GLOBAL) that is outside the safe set.
    Raises ValueError when the opcode stream is truncated or malformed."""
    flagged: list[str] = []
    strings: list[str] = []          # recent string pushes, for STACK_GLOBAL
    memo: dict[int, object] = {}
    for op, arg, _pos in pickletools.genops(stream):
        name = op.name
        if name in ("GLOBAL", "INST"):
            _judge(str(arg).replace(" ", "."), flagged)
        if name == "STACK_GLOBAL":
            mod, attr = [*strings, "\0", "\0"][:2] if len(strings) < 2 else strings[-2:]
            if "\0" in (mod, attr):
                flagged.append("<STACK_GLOBAL with a computed name>")
            else:
                _judge(f"{mod}.{attr}", flagged)
            strings.append("\0")
        elif isinstance(arg, str) and name.endswith(("UNICODE", "STRING")):
            strings.append(arg)
        elif name in ("BINGET", "LONG_BINGET", "GET"):
            v = memo.get(int(arg)) if isinstance(arg, int) else None
            strings.append(v if isinstance(v, str) else "\0")
        elif name in ("BINPUT", "LONG_BINPUT", "PUT", "MEMOIZE"):
            key = len(memo) if name == "MEMOIZE" else (int(arg) if isinstance(arg, int) else -1)
            memo[key] = strings[-1] if strings else None
        elif name not in ("FRAME", "PROTO"):
            strings.append("\0")
        del strings[:-2]
    return sorted(set(flagged))


def _judge(qual: str, flagged: list[str]) -> None:
    if qual in SAFE_GLOBALS:
        return
    if qual.split(".", 1)[0] in SAFE_MODULE_PREFIXES:
        return
    flagged.append(qual)


def _scan_members(zf: zipfile.ZipFile, names: Iterable[str]) -> list[str]:
    flagged: list[str] = []
    for n in names:
        with zf.open(n) as member:
            flagged.extend(scan_pickle(member))
    return sorted(set(flagged))


def check_torch(path: Path, *, timeout: float = 600) -> CheckResult:
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(4)
    if size == 0:
        return CheckResult(kind="torch", check="read", ok=False, corrupt=True, detail="empty file")
    flags: list[str] = []
    checks: list[str] = []
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as zf:
                badname = zf.testzip()
                if badname is not None:
                    return CheckResult(kind="torch", check="zip CRC", ok=False, corrupt=True,
                                       detail=f"CRC error in member {badname} (bytes changed after saving)")
                pkls = [n for n in zf.namelist() if n.endswith(".pkl")]
                imports = _scan_members(zf, pkls)
        except (zipfile.BadZipFile, EOFError, ValueError, OSError) as exc:
            return CheckResult(kind="torch", check="zip", ok=False, corrupt=True, detail=f"unreadable zip: {exc}")
        checks.append("zip CRC")
        if not pkls:
            flags.append("zip without a .pkl member: not a torch.save archive")
    elif head.startswith(b"PK"):
        return CheckResult(kind="torch", check="zip", ok=False, corrupt=True,
                           detail="zip central directory missing: the file is truncated")
    elif head[:1] == b"\x80":
        flags.append("legacy (non-zip) pickle checkpoint: no CRCs to check")
        try:
            with path.open("rb") as f:
                imports = scan_pickle(f)
        except (ValueError, EOFError) as exc:
            return CheckResult(kind="torch", check="pickle scan", ok=False, corrupt=True,
                               detail=f"pickle stream is truncated or malformed: {exc}")
    else:
        return CheckResult(kind="other", check="hash-only", ok=True,
                           detail="neither a zip nor a pickle: size and SHA-256 verified only")
    checks.append("pickle scan")
    if imports:
        flags.append(f"pickle imports outside torch/numpy/collections: {', '.join(imports[:8])}")
    py = torch_python()
    if py is None:
        flags.append("torch not installed: not loaded (set MCP_GPU_TORCH_PYTHON to a python with torch)")
        return CheckResult(kind="torch", check="+".join(checks), ok=True, flags=flags)
    res = run_torch_load(py, path, timeout=timeout)
    checks.append("torch.load(weights_only)")
    if res.get("ok") is None:
        flags.append(f"torch.load not run: {res.get('error', 'no torch in ' + py)}")
        return CheckResult(kind="torch", check="+".join(checks[:-1]), ok=True, flags=flags)
    if res.get("ok"):
        keys = res.get("keys") or []
        return CheckResult(kind="torch", check="+".join(checks) + "+finite", ok=True, flags=flags,
                           detail=f"{res.get('tensors', 0)} tensors" + (f"; keys {', '.join(keys)}" if keys else ""))
    if res.get("nonfinite"):
        return CheckResult(kind="torch", check="+".join(checks) + "+finite", ok=False, corrupt=True, flags=flags,
                           detail=f"non-finite values (NaN/Inf) in {', '.join(res['nonfinite'][:5])}")
    err = str(res.get("error", "unknown error"))
    unsafe = "Weights only load failed" in err or "weights_only" in err.lower()
    return CheckResult(kind="torch", check="+".join(checks), ok=False, corrupt=not unsafe, flags=flags,
                       detail=("refused by weights_only (needs classes beyond tensors): " if unsafe
                               else "torch.load failed: ") + err[:300])


def run_torch_load(python: str, path: Path, *, timeout: float) -> dict[str, Any]:
    env = dict(os.environ, OMP_NUM_THREADS="2", PYTHONDONTWRITEBYTECODE="1")
    try:
        proc = subprocess.run([python, "-c", TORCH_LOAD, str(path)], capture_output=True, text=True,
                              timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"torch.load ran past {timeout:g}s"}
    except OSError as exc:
        return {"ok": None, "error": f"cannot run {python}: {exc}"}
    lines = proc.stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1]) if lines else {}
    except ValueError:
        out = {}
    if not isinstance(out, dict) or "ok" not in out:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"ok": False, "error": f"loader exited {proc.returncode}: {tail[:300]}"}
    return out
