"""Load the triage corpus (tests/corpus/logs/<label>/<slug>.log) and split it by source project.

The format and the split rule are described in tests/corpus/README.md; the split is fixed and must never change.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from mcp_gpu.models import TRIAGE_CLASSES

LOGS = Path(__file__).parent / "logs"
# The classes a corpus file may carry: the fixed vocabulary of the issue (patrol-only verdicts excluded).
LABELS: tuple[str, ...] = (
    "cuda_oom", "host_oom_killed", "nan_inf", "nccl_timeout", "disk_full", "inode_exhausted", "cuda_device_error",
    "preempted", "dataloader_error", "checkpoint_corrupt", "network_stall", "ssh_disconnect", "import_or_config_error",
    "traceback", "healthy",
)
assert set(LABELS) <= set(TRIAGE_CLASSES)
REQUIRED = ("source", "project", "label")


class CorpusError(ValueError):
    """A corpus file breaks the format."""


@dataclass(frozen=True)
class Excerpt:
    path: Path
    source: str
    project: str
    label: str
    why: str
    text: str

    @property
    def held_out(self) -> bool:
        return is_held_out(self.project)

    @property
    def split(self) -> str:
        return "held-out" if self.held_out else "development"

    @property
    def name(self) -> str:
        return f"{self.label}/{self.path.stem}"


def is_held_out(project: str) -> bool:
    """The split rule: by source project, about 30 % held out. Fixed before tuning; never change it."""
    return int(hashlib.sha256(project.lower().encode()).hexdigest(), 16) % 10 < 3


def parse(path: Path) -> Excerpt:
    raw = path.read_text(encoding="utf-8", errors="replace")
    header: dict[str, str] = {}
    lines = raw.splitlines(keepends=True)
    body_at = None
    for i, line in enumerate(lines):
        stripped = line.rstrip("\r\n")
        if stripped.strip() == "#: ---":
            body_at = i + 1
            break
        if not stripped.startswith("#:"):
            raise CorpusError(f"{path}: line {i + 1} is neither a '#: key: value' header nor the '#: ---' separator")
        key, sep, value = stripped[2:].strip().partition(":")
        if not sep:
            raise CorpusError(f"{path}: header line {i + 1} has no 'key: value'")
        header[key.strip().lower()] = value.strip()
    if body_at is None:
        raise CorpusError(f"{path}: no '#: ---' line ends the header")
    missing = [k for k in REQUIRED if not header.get(k)]
    if missing:
        raise CorpusError(f"{path}: header lacks {', '.join(missing)}")
    label = header["label"]
    if label not in LABELS:
        raise CorpusError(f"{path}: label {label!r} is not one of {', '.join(LABELS)}")
    if label != path.parent.name:
        raise CorpusError(f"{path}: label {label!r} differs from its folder {path.parent.name!r}")
    return Excerpt(path, header["source"], header["project"], label, header.get("why", ""), "".join(lines[body_at:]))


def load(root: Path = LOGS) -> list[Excerpt]:
    """Every excerpt under `root`, sorted by label then file name."""
    if not root.is_dir():
        return []
    return [parse(p) for p in sorted(root.glob("*/*.log"))]
