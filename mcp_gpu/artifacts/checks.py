"""Load checks by kind: does a pulled file not only hash right but also open as what it claims to be?

`check_file(path)` picks the check from the name: safetensors, PyTorch (`.pt/.pth/.ckpt/.bin`, see
`pytorch.py`), `.npy/.npz`, `.json/.jsonl`, `.csv`; anything else is hash-only and says so. A result is
`ok`, and when it is not, `corrupt` tells a damaged checkpoint (`checkpoint_corrupt`: truncated, CRC error,
non-finite tensor values) from a file that is merely unreadable or unsafe to load.
"""

from __future__ import annotations

import csv
import json
import math
import struct
import zipfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

Kind = Literal["safetensors", "torch", "numpy", "json", "jsonl", "csv", "other"]

TORCH_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin")
CHECKPOINT_KINDS = ("safetensors", "torch", "numpy")

# safetensors dtype name → bytes per element
ST_DTYPES: dict[str, float] = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "F4": 0.5, "F6_E2M3": 0.75,
    "F6_E3M2": 0.75, "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8,
    "F64": 8, "C64": 8,
}
_ST_FLOATS = {"F16": "<f2", "F32": "<f4", "F64": "<f8"}
MAX_ST_HEADER = 100 * 1024 * 1024


class CheckResult(BaseModel):
    kind: Kind
    check: str = Field(description="what was checked, in a few words")
    ok: bool
    corrupt: bool = False
    detail: str = ""
    flags: list[str] = Field(default_factory=list, description="warnings that do not fail the file")


def kind_of(name: str) -> Kind:
    low = name.lower()
    if low.endswith(".safetensors"):
        return "safetensors"
    if low.endswith(TORCH_SUFFIXES):
        return "torch"
    if low.endswith((".npy", ".npz")):
        return "numpy"
    if low.endswith(".jsonl"):
        return "jsonl"
    if low.endswith(".json"):
        return "json"
    if low.endswith(".csv"):
        return "csv"
    return "other"


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def check_file(path: Path, *, torch_timeout: float = 600) -> CheckResult:
    """Run the load check for this file's kind. Never raises for a bad file: the result says what is wrong."""
    kind = kind_of(path.name)
    try:
        if kind == "safetensors":
            return check_safetensors(path)
        if kind == "torch":
            from mcp_gpu.artifacts.pytorch import check_torch

            return check_torch(path, timeout=torch_timeout)
        if kind == "numpy":
            return check_numpy(path)
        if kind in ("json", "jsonl"):
            return check_json(path, lines=kind == "jsonl")
        if kind == "csv":
            return check_csv(path)
    except OSError as exc:
        return CheckResult(kind=kind, check="read", ok=False, detail=f"could not read: {exc}")
    return CheckResult(kind="other", check="hash-only", ok=True,
                       detail="no load check for this kind: size and SHA-256 verified only")


def check_safetensors(path: Path) -> CheckResult:
    """Header length and JSON, offsets inside the file and contiguous, dtype size × shape == bytes; finite floats."""
    size = path.stat().st_size

    def bad(detail: str) -> CheckResult:
        return CheckResult(kind="safetensors", check="header+offsets", ok=False, corrupt=True, detail=detail)

    with path.open("rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            return bad(f"file is {size} bytes: shorter than the 8-byte header length")
        (hlen,) = struct.unpack("<Q", raw)
        if hlen > MAX_ST_HEADER or 8 + hlen > size:
            return bad(f"header length {hlen} does not fit in a {size}-byte file (truncated?)")
        try:
            header = json.loads(f.read(hlen))
        except (ValueError, UnicodeDecodeError) as exc:
            return bad(f"header is not valid JSON: {exc}")
    if not isinstance(header, dict):
        return bad("header is not a JSON object")
    data_len = size - 8 - hlen
    spans: list[tuple[int, int, str]] = []
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = meta["dtype"], meta["shape"], meta["data_offsets"]
        except (KeyError, TypeError, ValueError):
            return bad(f"tensor {name!r}: entry lacks dtype/shape/data_offsets")
        if dtype not in ST_DTYPES:
            return bad(f"tensor {name!r}: unknown dtype {dtype!r}")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            return bad(f"tensor {name!r}: bad shape {shape!r}")
        if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end):
            return bad(f"tensor {name!r}: bad offsets {[begin, end]}")
        if end > data_len:
            return bad(f"tensor {name!r}: offsets {[begin, end]} run past the data ({data_len} bytes; truncated?)")
        want = math.ceil(math.prod(shape) * ST_DTYPES[dtype])
        if end - begin != want:
            return bad(f"tensor {name!r}: {dtype}{shape} needs {want} bytes, offsets give {end - begin}")
        spans.append((begin, end, name))
    spans.sort()
    pos = 0
    for begin, end, name in spans:
        if begin != pos:
            return bad(f"tensor {name!r} starts at {begin}, expected {pos}: offsets not contiguous")
        pos = end
    if pos != data_len:
        return bad(f"tensors cover {pos} bytes but the file holds {data_len} data bytes")
    np = _numpy()
    if np is None:
        return CheckResult(kind="safetensors", check="header+offsets", ok=True, detail=f"{len(spans)} tensors",
                           flags=["numpy not installed: tensor values not checked for NaN/Inf"])
    bad_names: list[str] = []
    mm = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + hlen, shape=(data_len,)) if data_len else None
    for begin, end, name in spans:
        dtype = header[name]["dtype"]
        if mm is None or end == begin or dtype not in (*_ST_FLOATS, "BF16"):
            continue
        if not _finite_bytes(np, mm, begin, end, dtype):
            bad_names.append(name)
    del mm
    if bad_names:
        return CheckResult(kind="safetensors", check="header+offsets+finite", ok=False, corrupt=True,
                           detail=f"non-finite values (NaN/Inf) in {len(bad_names)} tensor(s): {', '.join(bad_names[:5])}")
    return CheckResult(kind="safetensors", check="header+offsets+finite", ok=True, detail=f"{len(spans)} tensors")


def _finite_bytes(np: Any, mm: Any, begin: int, end: int, dtype: str, chunk: int = 64 << 20) -> bool:
    width = 2 if dtype in ("F16", "BF16") else (4 if dtype == "F32" else 8)
    step = chunk - chunk % width
    for lo in range(begin, end, step):
        raw = mm[lo:min(end, lo + step)]
        vals = (raw.view("<u2").astype("<u4") << 16).view("<f4") if dtype == "BF16" else raw.view(_ST_FLOATS[dtype])
        if not bool(np.isfinite(vals).all()):
            return False
    return True


def check_numpy(path: Path) -> CheckResult:
    np = _numpy()
    if path.name.lower().endswith(".npz"):
        try:
            with zipfile.ZipFile(path) as zf:
                badname = zf.testzip()
        except (zipfile.BadZipFile, EOFError) as exc:
            return CheckResult(kind="numpy", check="zip", ok=False, corrupt=True, detail=f"not a readable zip: {exc}")
        if badname is not None:
            return CheckResult(kind="numpy", check="zip CRC", ok=False, corrupt=True, detail=f"CRC error in {badname}")
    if np is None:
        return CheckResult(kind="numpy", check="zip CRC" if path.suffix == ".npz" else "hash-only", ok=True,
                           flags=["numpy not installed: arrays not loaded"])
    try:
        loaded = np.load(path, allow_pickle=False, mmap_mode=None if path.suffix.lower() == ".npz" else "r")
        arrays = {k: loaded[k] for k in loaded.files} if hasattr(loaded, "files") else {"array": loaded}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        return CheckResult(kind="numpy", check="np.load(allow_pickle=False)", ok=False, corrupt=True,
                           detail=f"does not load: {exc}")
    bad_names = [k for k, a in arrays.items()
                 if a.dtype.kind in "fc" and a.size and not bool(np.isfinite(a).all())]
    if bad_names:
        return CheckResult(kind="numpy", check="np.load+finite", ok=False, corrupt=True,
                           detail=f"non-finite values (NaN/Inf) in {', '.join(bad_names[:5])}")
    return CheckResult(kind="numpy", check="np.load+finite", ok=True, detail=f"{len(arrays)} array(s)")


def check_json(path: Path, *, lines: bool) -> CheckResult:
    kind: Kind = "jsonl" if lines else "json"
    text = path.read_bytes().decode("utf-8", "strict") if path.stat().st_size < (1 << 30) else None
    if text is None:
        return CheckResult(kind=kind, check="hash-only", ok=True, flags=["over 1 GiB: not parsed"])
    try:
        if lines:
            n = 0
            for lineno, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        json.loads(line)
                    except ValueError as exc:
                        return CheckResult(kind=kind, check="parse", ok=False, detail=f"line {lineno}: {exc}")
                    n += 1
            return CheckResult(kind=kind, check="parse", ok=True, detail=f"{n} records")
        json.loads(text)
    except ValueError as exc:
        return CheckResult(kind=kind, check="parse", ok=False, detail=f"not valid JSON: {exc}")
    return CheckResult(kind=kind, check="parse", ok=True)


def check_csv(path: Path) -> CheckResult:
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = 0
            width: int | None = None
            for lineno, row in enumerate(csv.reader(f), 1):
                if not row:
                    continue
                if width is None:
                    width = len(row)
                elif len(row) != width:
                    return CheckResult(kind="csv", check="parse", ok=False,
                                       detail=f"line {lineno} has {len(row)} fields, the header has {width}")
                rows += 1
    except (csv.Error, UnicodeDecodeError) as exc:
        return CheckResult(kind="csv", check="parse", ok=False, detail=f"not valid CSV: {exc}")
    return CheckResult(kind="csv", check="parse", ok=True, detail=f"{rows} rows")
