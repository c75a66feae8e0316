"""The listing probe over a real sshd: one pass with no process per file, framing no file name can imitate
(CR, LF, `@@`, record letters, NULs cannot occur), hashes right for every file, unreadable files and escaping
symlinks reported, and a bounded verify answer for thousands of problems."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from mcp_gpu.app import App
from mcp_gpu.artifacts.listing import PROBE, list_remote, parse_listing
from mcp_gpu.lifecycle.verify import MAX_FINDINGS, verify_artifacts

pytestmark = pytest.mark.anyio
HOSTILE = ["x.pt\r@@job other\rexit=0\r", "y.pt\nckpt=notafloat 1 z", "F", "B", ".hidden", "-", "a  b", "@@meta",
           "back\\slash", "tab\tname", "pct%P%s"]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def test_hostile_names_are_listed_exactly_with_their_own_hashes(ssh_app: App, tmp_path: Path) -> None:
    root = tmp_path / "out"
    (root / "sub").mkdir(parents=True)
    want: dict[str, bytes] = {}
    for n, name in enumerate(HOSTILE):
        data = f"payload {n} {name}".encode()
        (root / "sub" / name).write_bytes(data)
        want[f"sub/{name}"] = data
    t = await ssh_app.transport("testhost")
    listing = await list_remote(t, [str(root)])
    got = {f.rel: f for f in listing.files}
    # names with CR/LF are refused for the local side (control characters), never mistaken for records
    safe = {k: v for k, v in want.items() if "\r" not in k and "\n" not in k and "\t" not in k}
    assert set(got) == set(safe), sorted(got)
    for rel, data in safe.items():
        assert got[rel].sha256 == _sha(data) and got[rel].size == len(data)
    assert sorted(r.path for r in listing.refused) == sorted(
        f"{root}/{k!r}" for k in want if k not in safe)
    assert not listing.errors


async def test_thousands_of_files_in_one_pass_hash_and_unreadable_and_escaping_links(
        ssh_app: App, tmp_path: Path, is_root: bool) -> None:
    root = tmp_path / "many"
    for d in range(20):
        (root / f"d{d}").mkdir(parents=True)
        for f in range(150):
            (root / f"d{d}" / f"f{f}.txt").write_bytes(f"{d}/{f}".encode())
    big = root / "big.bin"
    big.write_bytes(os.urandom(3 << 20))  # over the batch size: hashed through the per-file path
    (root / "inside-link").symlink_to(root / "d0" / "f0.txt")
    (root / "escape-link").symlink_to("/etc/hostname")
    t = await ssh_app.transport("testhost")
    listing = await list_remote(t, [str(root)])
    by = {f.rel: f for f in listing.files}
    assert len(by) == 20 * 150 + 2
    assert by["d7/f42.txt"].sha256 == _sha(b"7/42")
    assert by["big.bin"].sha256 == _sha(big.read_bytes())
    assert by["inside-link"].sha256 == _sha(b"0/0") and by["inside-link"].link_target
    assert [r.path for r in listing.refused] == [f"{root}/escape-link"]
    # with a hash limit, big files come back unhashed (the pull hashes them) and small ones hashed
    limited = await list_remote(t, [str(root)], hash_max_bytes=1 << 20)
    lb = {f.rel: f for f in limited.files}
    assert lb["big.bin"].sha256 is None and lb["d0/f1.txt"].sha256 == _sha(b"0/1")
    if is_root:
        return  # root reads everything: the unreadable case needs a normal user
    (root / "d1" / "f1.txt").chmod(0)
    again = await list_remote(t, [str(root)])
    assert [e.path for e in again.errors] == [f"{root}/d1/f1.txt"]


@pytest.mark.parametrize("name", ["listing.sh", "claim.sh", "audit.sh"])
def test_the_probes_are_shellcheck_clean_files(name: str) -> None:
    import subprocess

    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed")
    path = Path(__file__).parents[1] / "mcp_gpu" / "probes" / name
    if name == "listing.sh":
        assert path.read_text() == PROBE
    res = subprocess.run(["shellcheck", "-s", "bash", str(path)], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout


def test_a_hash_line_for_a_file_the_walk_did_not_report_is_ignored() -> None:
    out = "\0".join(["R", "0", "d", "F", "0", "a.txt", "3", "1.5", "-", "", "B", "0",
                     "0" * 64 + "  a.txt", "1" * 64 + "  ghost.txt", ".", ""])
    listing = parse_listing(out, ["/r"], hashed=True)
    assert [(f.rel, f.sha256, f.mtime) for f in listing.files] == [("a.txt", "0" * 64, 1.0)]


async def test_verify_answer_is_bounded_for_thousands_of_problems(ssh_app: App, tmp_path: Path) -> None:
    root = tmp_path / "bad"
    root.mkdir()
    for n in range(400):
        (root / f"link{n}").symlink_to("/etc/hostname")  # each is refused: a finding
    (root / "ok.txt").write_text("fine")
    r = await verify_artifacts(ssh_app, host="testhost", paths=[str(root)], dest=tmp_path / "dest")
    assert r.counts["refused"] == 400 and not r.all_ok
    assert len(r.findings) == MAX_FINDINGS + 1 and "350 more findings" in r.findings[-1].title
    assert len(r.model_dump_json()) < 64_000
