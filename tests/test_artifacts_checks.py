"""Load checks, listing validation and staleness rules: pure, on files written here (torch ones by real torch)."""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mcp_gpu.artifacts.checks import check_file
from mcp_gpu.artifacts.listing import Newest, parse_listing, unsafe_reason
from mcp_gpu.artifacts.manifest import Manifest, ManifestRecord, stale_reason
from mcp_gpu.artifacts.pytorch import scan_pickle

ROOT = Path(__file__).resolve().parent.parent
TORCH_PY = ROOT / ".venv-torch" / "bin" / "python"
needs_torch = pytest.mark.skipif(not TORCH_PY.exists(), reason=".venv-torch is absent (python3 -m venv .venv-torch && "
                                 ".venv-torch/bin/pip install torch==2.13.0 numpy safetensors)")


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """The format by hand: u64 header length, JSON header, then the tensors' bytes back to back."""
    codes = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int64"): "I64"}
    header: dict[str, object] = {"__metadata__": {"format": "np"}}
    blobs: list[bytes] = []
    pos = 0
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": codes[arr.dtype], "shape": list(arr.shape), "data_offsets": [pos, pos + len(raw)]}
        blobs.append(raw)
        pos += len(raw)
    hjson = json.dumps(header).encode()
    hjson += b" " * (-len(hjson) % 8)
    path.write_bytes(struct.pack("<Q", len(hjson)) + hjson + b"".join(blobs))


def flip_bit_to_inf(path: Path, data_start: int) -> None:
    """1.0f is 00 00 80 3f: flipping one bit of the top byte (0x3f -> 0x7f) makes it +Inf."""
    raw = bytearray(path.read_bytes())
    assert raw[data_start + 3] == 0x3F
    raw[data_start + 3] ^= 0x40
    path.write_bytes(bytes(raw))


def test_a_healthy_safetensors_file_passes_with_its_tensors_checked_finite(tmp_path: Path) -> None:
    p = tmp_path / "model.safetensors"
    write_safetensors(p, {"w": np.ones((4, 8), np.float32), "b": np.zeros(3, np.float16), "step": np.array([7])})
    r = check_file(p)
    assert r.ok and r.kind == "safetensors" and "finite" in r.check and r.detail == "3 tensors"


def test_the_safetensors_package_output_passes_too(tmp_path: Path) -> None:
    st = pytest.importorskip("safetensors.numpy")
    p = tmp_path / "pkg.safetensors"
    st.save_file({"a": np.arange(10, dtype=np.float32)}, str(p))
    assert check_file(p).ok


def test_a_truncated_safetensors_file_is_corrupt(tmp_path: Path) -> None:
    p = tmp_path / "m.safetensors"
    write_safetensors(p, {"w": np.ones((64, 64), np.float32)})
    p.write_bytes(p.read_bytes()[:-100])
    r = check_file(p)
    assert not r.ok and r.corrupt and "past the data" in r.detail


def test_one_flipped_bit_in_safetensors_tensor_data_is_caught_as_non_finite(tmp_path: Path) -> None:
    p = tmp_path / "m.safetensors"
    write_safetensors(p, {"w": np.ones(16, np.float32)})
    (hlen,) = struct.unpack("<Q", p.read_bytes()[:8])
    flip_bit_to_inf(p, 8 + hlen + 4 * 5)
    r = check_file(p)
    assert not r.ok and r.corrupt and "non-finite" in r.detail and "w" in r.detail


def test_safetensors_with_a_gap_between_tensors_is_corrupt(tmp_path: Path) -> None:
    hdr = json.dumps({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                      "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}).encode()
    p = tmp_path / "gap.safetensors"
    p.write_bytes(struct.pack("<Q", len(hdr)) + hdr + b"\0" * 12)
    r = check_file(p)
    assert r.corrupt and "not contiguous" in r.detail


def test_npz_with_a_flipped_byte_fails_its_zip_crc(tmp_path: Path) -> None:
    p = tmp_path / "arrays.npz"
    np.savez(p, w=np.ones(1000, np.float32))
    raw = bytearray(p.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    p.write_bytes(bytes(raw))
    r = check_file(p)
    assert r.corrupt and "CRC" in r.detail


def test_npy_with_nan_is_corrupt_and_a_clean_one_passes(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.npy", tmp_path / "bad.npy"
    np.save(good, np.ones(5))
    np.save(bad, np.array([1.0, np.nan]))
    assert check_file(good).ok
    assert check_file(bad).corrupt


def _torch_like_zip(path: Path, pkl: bytes, data: bytes) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", pkl)
        zf.writestr("archive/data/0", data)


def test_a_zip_checkpoint_with_a_crc_error_is_corrupt(tmp_path: Path) -> None:
    p = tmp_path / "ckpt.pt"
    payload = b"\x11" * 4096
    _torch_like_zip(p, pickle.dumps({"step": 1}, protocol=2), payload)
    raw = bytearray(p.read_bytes())
    i = raw.index(payload) + 100
    raw[i] ^= 0x01
    p.write_bytes(bytes(raw))
    r = check_file(p)
    assert not r.ok and r.corrupt and "CRC error in member archive/data/0" in r.detail


def test_a_truncated_zip_checkpoint_is_corrupt(tmp_path: Path) -> None:
    p = tmp_path / "ckpt.pth"
    _torch_like_zip(p, pickle.dumps({"step": 1}, protocol=2), b"\0" * 10000)
    p.write_bytes(p.read_bytes()[:5000])
    r = check_file(p)
    assert r.corrupt and "truncated" in r.detail


class _Evil:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("echo pwned",))


def test_pickle_imports_outside_torch_numpy_collections_are_flagged(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_GPU_TORCH_PYTHON", "/nonexistent/python")
    for proto in (2, 4):
        flagged = scan_pickle(io.BytesIO(pickle.dumps({"x": _Evil(), "o": __import__("collections").OrderedDict()},
                                                      protocol=proto)))
        assert flagged == ["posix.system"], proto
    p = tmp_path / "evil.ckpt"
    _torch_like_zip(p, pickle.dumps(_Evil(), protocol=2), b"")
    r = check_file(p)
    assert any("posix.system" in f for f in r.flags)


def test_a_legacy_non_zip_pickle_checkpoint_is_flagged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_GPU_TORCH_PYTHON", "/nonexistent/python")
    p = tmp_path / "old.pt"
    p.write_bytes(pickle.dumps({"w": [1.0, 2.0]}, protocol=2))
    r = check_file(p)
    assert r.kind == "torch" and any("legacy" in f for f in r.flags)
    p.write_bytes(p.read_bytes()[:-3])
    assert check_file(p).corrupt


def test_json_jsonl_csv_are_parsed_and_other_files_are_hash_only(tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text('{"loss": 0.1}')
    (tmp_path / "bad.json").write_text('{"loss": ')
    (tmp_path / "l.jsonl").write_text('{"a": 1}\n\n{"a": 2}\n')
    (tmp_path / "t.csv").write_text("step,loss\n1,0.5\n2,0.4\n")
    (tmp_path / "short.csv").write_text("step,loss\n1,0.5\n2\n")
    (tmp_path / "notes.txt").write_text("hi")
    assert check_file(tmp_path / "m.json").ok
    assert not check_file(tmp_path / "bad.json").ok and not check_file(tmp_path / "bad.json").corrupt
    assert check_file(tmp_path / "l.jsonl").detail == "2 records"
    assert check_file(tmp_path / "t.csv").ok
    short = check_file(tmp_path / "short.csv")
    assert not short.ok and "line 3 has 1 fields, the header has 2" in short.detail
    other = check_file(tmp_path / "notes.txt")
    assert other.ok and other.check == "hash-only" and "no load check" in other.detail


def test_names_that_could_escape_the_destination_are_refused() -> None:
    for bad in ("../../etc/passwd", "a/../../b", "/etc/passwd", "a/./b", "new\nline", "tab\there", "bell\x07",
                "bad\ufffdutf8", ""):
        assert unsafe_reason(bad) is not None, bad
    assert unsafe_reason("ckpt/epoch=3-step=100.ckpt") is None
    assert unsafe_reason("..hidden/ok..name") is None


def test_a_crafted_listing_with_traversal_names_is_refused_not_pulled() -> None:
    sha = "a" * 64
    out = "\0".join(["R", "0", "d",
                     "F", "0", "../../.ssh/authorized_keys", "10", "1.0", sha, "",
                     "F", "0", "/etc/shadow", "10", "1.0", sha, "",
                     "F", "0", "ok/model.pt", "10", "5.0", sha, "",
                     "L", "0", "leak", "/etc/passwd", ""])
    listing = parse_listing(out, ["/runs/x/out"])
    assert [f.local_rel for f in listing.files] == ["out/ok/model.pt"]
    assert listing.files[0].remote == "/runs/x/out/ok/model.pt"
    assert len(listing.refused) == 3
    assert any("outside" in r.reason for r in listing.refused)
    assert listing.newest_checkpoint == Newest(name="/runs/x/out/ok/model.pt", mtime=5.0)


def _record(name: str | None, mtime: float | None) -> ManifestRecord:
    m = Manifest(job="j", host="h", dest="/d", paths=["/r"], all_ok=True, checked=True, counts={}, bytes_total=0,
                 files=[])
    return ManifestRecord(id=1, job_id="j", host="h", at="t", dest="/d", all_ok=True, newest_remote_ckpt=name,
                          newest_remote_mtime=mtime, manifest=m)


def test_a_newer_remote_checkpoint_makes_a_manifest_stale() -> None:
    rec = _record("/r/ckpt_10.pt", 100.0)
    assert stale_reason(rec, Newest(name="/r/ckpt_10.pt", mtime=100.0)) is None
    assert stale_reason(rec, None) is None
    assert "newer" in (stale_reason(rec, Newest(name="/r/ckpt_20.pt", mtime=200.0)) or "")
    assert stale_reason(_record(None, None), Newest(name="/r/a.pt", mtime=1.0)) is not None


def _torch_save(script: str, path: Path) -> None:
    subprocess.run([str(TORCH_PY), "-c", script, str(path)], check=True, capture_output=True, timeout=120)


SAVE = ("import sys, torch; torch.manual_seed(0); torch.save({'model_state_dict': {'w': torch.ones(256, 64), "
        "'b': torch.zeros(64)}, 'step': 10}, sys.argv[1])")


@pytest.mark.torch
@needs_torch
def test_a_healthy_torch_checkpoint_loads_with_weights_only_and_finite_tensors(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_GPU_TORCH_PYTHON", str(TORCH_PY))
    p = tmp_path / "ckpt_10.pt"
    _torch_save(SAVE, p)
    r = check_file(p)
    assert r.ok, r
    assert "torch.load(weights_only)" in r.check and r.detail.startswith("2 tensors") and not r.flags


@pytest.mark.torch
@needs_torch
def test_a_torch_checkpoint_with_a_flipped_tensor_byte_is_corrupt_by_crc(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_GPU_TORCH_PYTHON", str(TORCH_PY))
    p = tmp_path / "ckpt.pt"
    _torch_save(SAVE, p)
    raw = bytearray(p.read_bytes())
    i = raw.index(b"\x00\x00\x80\x3f" * 16)  # inside the tensor of ones
    raw[i + 3] ^= 0x40
    p.write_bytes(bytes(raw))
    r = check_file(p)
    assert r.corrupt and "CRC" in r.detail


@pytest.mark.torch
@needs_torch
def test_a_torch_checkpoint_holding_nan_fails_the_finite_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_GPU_TORCH_PYTHON", str(TORCH_PY))
    p = tmp_path / "nan.pt"
    _torch_save("import sys, torch; torch.save({'w': torch.tensor([1.0, float('nan')])}, sys.argv[1])", p)
    r = check_file(p)
    assert r.corrupt and "non-finite" in r.detail and "w" in r.detail


@pytest.mark.torch
@needs_torch
def test_a_truncated_torch_checkpoint_is_corrupt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_GPU_TORCH_PYTHON", str(TORCH_PY))
    p = tmp_path / "cut.pt"
    _torch_save(SAVE, p)
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    assert check_file(p).corrupt
