"""One remote probe that lists what a pull would fetch: sizes, mtimes, SHA-256 computed on the remote, symlinks.

The probe is a static bash script (`mcp_gpu/probes/listing.sh`: coreutils + GNU find, openssl when present; no Python
needed on the box) whose arguments are the requested roots; it walks each root once, with no process per file, and
prints NUL-separated records so any file name survives and none can imitate a record. Everything it prints is
re-validated here: a name that could escape the destination (`..`, absolute, control characters, invalid
UTF-8) or a symlink that resolves outside its requested root is refused and reported, never pulled.
"""

from __future__ import annotations

import importlib.resources
import posixpath
import re
from collections.abc import Sequence

from pydantic import BaseModel

from mcp_gpu.errors import CommandFailed, ConfigError
from mcp_gpu.transport import Transport

# The probe (probes/listing.sh): one `find` pass per root and one `sha256sum -z` over a NUL list, no process per
# file. Args: MODE LIMIT ROOT... (see the script's header for the records it prints).
PROBE = importlib.resources.files("mcp_gpu.probes").joinpath("listing.sh").read_text()
MAX_LISTING_BYTES = 96 << 20
"""The bound on one listing's output (about 700,000 files with hashes); a bigger tree is refused with a hint."""
_HASHED = re.compile(r"([0-9a-f]{64}) [ *](.*)", re.S)

CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".npz", ".npy", ".pkl", ".h5")
_CKPT_NAME = re.compile(r"(ckpt|checkpoint)", re.I)
_BAD_CHARS = re.compile(r"[\x00-\x1f\x7f\ufffd]")


class RemoteFile(BaseModel):
    root: str              # the requested root it was found under, as requested
    remote: str            # full remote path (root joined with rel)
    rel: str               # path relative to the root, POSIX
    local_rel: str         # where it lands under dest: <root label>/<rel>
    size: int
    mtime: float
    sha256: str | None     # None in "newest" mode
    link_target: str | None = None


class Refused(BaseModel):
    path: str
    reason: str


class Newest(BaseModel):
    name: str
    mtime: float


class Listing(BaseModel):
    roots: list[str]
    files: list[RemoteFile]
    refused: list[Refused]
    missing: list[str]
    errors: list[Refused]
    newest_checkpoint: Newest | None = None

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


def is_checkpoint_like(name: str) -> bool:
    base = posixpath.basename(name).lower()
    return base.endswith(CHECKPOINT_SUFFIXES) or bool(_CKPT_NAME.search(base))


def unsafe_reason(rel: str) -> str | None:
    """Why a relative name cannot be written under dest, or None when it is safe."""
    if not rel:
        return "empty name"
    if _BAD_CHARS.search(rel):
        return "control character or invalid UTF-8 in the name"
    if rel.startswith("/") or rel.startswith("\\"):
        return "absolute path"
    parts = rel.split("/")
    if any(p in ("..", ".", "") for p in parts):
        return "'..' or empty path component (traversal)"
    return None


def check_roots(paths: Sequence[str]) -> list[str]:
    """Requested remote paths: absolute or home-relative, no '..' components, no control characters."""
    out: list[str] = []
    for p in paths:
        if not p or _BAD_CHARS.search(p) or p.startswith("-"):
            raise ConfigError(f"refused remote path {p!r}", hint="give plain absolute paths of output directories")
        if ".." in p.split("/"):
            raise ConfigError(f"refused remote path {p!r}: '..' traversal",
                              hint="name the directory directly, without '..'", data={"class": "path_refused"})
        if p == "~" or p.startswith("~/"):
            p = p[2:] or "."  # commands and SFTP both start in the remote home
        out.append(posixpath.normpath(p))
    return out


def _labels(roots: Sequence[str]) -> list[str]:
    """A distinct local folder name per root (its basename; suffixed when two roots share one)."""
    seen: dict[str, int] = {}
    labels: list[str] = []
    for r in roots:
        base = posixpath.basename(r.rstrip("/")) or "root"
        if base in (".", "..", "~"):
            base = "root"
        n = seen.get(base, 0)
        seen[base] = n + 1
        labels.append(base if n == 0 else f"{base}-{n + 1}")
    return labels


def parse_listing(stdout: str, roots: Sequence[str], *, hashed: bool = False, limit: int = 0) -> Listing:
    """Parse the probe's NUL-separated records (pure: tests feed it crafted output too). With `hashed` (the
    probe ran in hash mode with `limit`), a file in the hashed range that came back without a hash could not be
    read, and is reported as such."""
    fields = stdout.split("\0")
    labels = _labels(roots)
    file_roots: set[int] = set()
    files: list[RemoteFile] = []
    refused: list[Refused] = []
    errors: list[Refused] = []
    missing: list[str] = []
    seen_local: set[str] = set()
    by_key: dict[tuple[int, str], int] = {}
    hashes: dict[tuple[int, str], str] = {}
    k = 0

    def take(n: int) -> list[str]:
        nonlocal k
        got = fields[k:k + n]
        k += n
        if len(got) < n:
            raise CommandFailed("the listing probe's output was cut short", hint="run it again")
        return got

    def root_at(i: str) -> str:
        if not i.isdigit() or int(i) >= len(roots):
            raise CommandFailed(f"the listing probe named root #{i!r}, which was not requested", hint="run it again")
        return roots[int(i)]

    while k < len(fields) and fields[k] != "":
        tag = take(1)[0]
        if tag == "M":
            missing.append(root_at(take(1)[0]))
        elif tag == "R":
            i, kind = take(2)
            if kind == "f":
                file_roots.add(int(i))
        elif tag == "L":
            i, rel, tgt = take(3)
            root = root_at(i)
            refused.append(Refused(path=posixpath.join(root, rel),
                                   reason=f"symlink pointing outside {root} (-> {tgt})"))
        elif tag == "E":
            i, rel, why = take(3)
            errors.append(Refused(path=posixpath.join(root_at(i), rel), reason=why))
        elif tag == "B":
            i = take(1)[0]
            root_at(i)
            while True:
                rec = take(1)[0]
                if rec == ".":
                    break
                m = _HASHED.fullmatch(rec)
                if m is not None:
                    hashes[(int(i), m.group(2))] = m.group(1)
        elif tag == "F":
            i, rel, size, mtime, sha, tgt = take(6)
            root = root_at(i)
            unsafe = unsafe_reason(rel)
            if unsafe is not None:
                refused.append(Refused(path=f"{root}/{rel!r}", reason=unsafe))
                continue
            if sha != "-" and not re.fullmatch(r"[0-9a-f]{64}", sha):
                errors.append(Refused(path=posixpath.join(root, rel), reason="remote sha256 unreadable"))
                continue
            local_rel = f"{labels[int(i)]}/{rel}"
            if local_rel in seen_local:
                continue
            seen_local.add(local_rel)
            remote = root if int(i) in file_roots else posixpath.join(root, rel)
            try:
                nbytes, when = int(size), float(int(float(mtime)))
            except ValueError:
                errors.append(Refused(path=remote, reason="unreadable size/mtime in the listing"))
                continue
            by_key[(int(i), rel)] = len(files)
            files.append(RemoteFile(root=root, remote=remote, rel=rel, local_rel=local_rel, size=nbytes, mtime=when,
                                    sha256=None if sha == "-" else sha, link_target=tgt or None))
        else:
            raise CommandFailed(f"unexpected record {tag!r} in the listing probe's output", hint="run it again")
    for key, sha in hashes.items():
        at = by_key.get(key)
        if at is not None and files[at].sha256 is None:
            files[at].sha256 = sha
    if hashed:
        unread = {n for n, f in enumerate(files) if f.sha256 is None and (limit <= 0 or f.size <= limit)}
        errors += [Refused(path=files[n].remote, reason="unreadable") for n in sorted(unread)]
        files = [f for n, f in enumerate(files) if n not in unread]
    newest = None
    ckpts = [f for f in files if is_checkpoint_like(f.rel)]
    if ckpts:
        top = max(ckpts, key=lambda f: (f.mtime, f.rel))
        newest = Newest(name=posixpath.join(top.root, top.rel), mtime=top.mtime)
    return Listing(roots=list(roots), files=files, refused=refused, missing=missing, errors=errors,
                   newest_checkpoint=newest)


async def list_remote(transport: Transport, roots: Sequence[str], *, hashes: bool = True,
                      hash_max_bytes: int = 0, timeout: float = 3600) -> Listing:
    """Run the probe once over the transport and parse it. With `hash_max_bytes`, bigger files come back with
    `sha256=None`: the pull hashes them on the remote while the bytes travel (see `remote_sha256`)."""
    roots = check_roots(roots)
    limit = max(0, hash_max_bytes)
    res = await transport.run_script(PROBE, ["hash" if hashes else "newest", str(limit), *roots],
                                     timeout=timeout, max_output=MAX_LISTING_BYTES)
    if res.truncated:
        raise CommandFailed(f"the listing of {', '.join(roots)} is larger than {MAX_LISTING_BYTES >> 20} MiB "
                            "(hundreds of thousands of files)",
                            hint="list fewer or narrower paths (e.g. the checkpoint directory only), or tar the "
                                 "small files on the box first")
    if res.exit_status not in (0, 1) and not res.stdout:
        res.check()
    return parse_listing(res.stdout, roots, hashed=hashes, limit=limit)


HASH_PROBE = r"""
set -u
if command -v openssl >/dev/null 2>&1 && openssl dgst -sha256 -r </dev/null >/dev/null 2>&1; then
  for p in "$@"; do h=$(openssl dgst -sha256 -r < "$p" 2>/dev/null) && printf '%s\0%s\0' "${h%% *}" "$p"; done
else
  for p in "$@"; do h=$(sha256sum < "$p" 2>/dev/null) && printf '%s\0%s\0' "${h%% *}" "$p"; done
fi
"""


async def remote_sha256(transport: Transport, paths: Sequence[str], *, timeout: float = 3600) -> dict[str, str]:
    """SHA-256 of remote files in one round trip (unreadable files are simply absent from the answer)."""
    if not paths:
        return {}
    res = await transport.run_script(HASH_PROBE, list(paths), timeout=timeout)
    parts = res.stdout.split("\0")
    out: dict[str, str] = {}
    for sha, path in zip(parts[0::2], parts[1::2], strict=False):
        if re.fullmatch(r"[0-9a-f]{64}", sha):
            out[path] = sha
    return out
