"""The gotcha catalogue: known failures as validated data (mcp_gpu/gotchas/data/*.toml).

Ids are qualified by family so the origin's reused short ids never collide: `<family>.<ID>`, e.g.
`universal.U9`, `runpod.RP14`, `memory.M17`, `checkpoint.C2`, `throughput.T1` vs `transport.T1`. Platform
families are named after the profile (`autodl`, `runpod`, `vastai`, `lambda`, `paperspace`, `hengyuan`,
`matpool`, `featurize`, `lanrui`, `generic-ssh`, `slurm`, `kubernetes`, `colab-kaggle`, `local`) plus `china`
for what all Chinese rentals share; training families are `memory`, `precision`, `distributed`, `multinode`,
`checkpoint`, `throughput`, `data`, `convergence`, and the domains `llm`, `vision`, `diffusion`, `rl`, `vlm`.

Each data file is a TOML document whose top-level keys are family names, each an array of entries:

    [[universal]]
    id = "U9"                       # short id; the loader qualifies it as universal.U9
    title = "..."; symptom = "..."; cause = "..."; fix = "..."
    signals = [{kind = "regex", value = '(?m)^\\s*Killed\\s*$'}]
    phase = ["patrol", "triage"]; severity = "error"; class = "host_oom_killed"; related = ["memory.M3"]
"""

from __future__ import annotations

import re
import tomllib
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mcp_gpu import frontmatter
from mcp_gpu.errors import ConfigError, NotFoundError
from mcp_gpu.models import TRIAGE_CLASSES

DATA_DIR = Path(__file__).parent / "data"
Phase = Literal["audit", "smoke", "launch", "patrol", "verify", "teardown", "triage"]
_NUMERIC_RE = re.compile(r"^\s*([a-z][a-z0-9_]*)\s*(>=|<=|==|!=|>|<)\s*(-?\d+(?:\.\d+)?)\s*$")
_FAMILY_RE = re.compile(r"^[a-z][a-z0-9-]*$")
_SHORT_RE = re.compile(r"^[A-Z][A-Z0-9]*\d+[a-z]?$")


class Signal(BaseModel):
    """Something a machine can check. substring: case-insensitive text; regex: Python `re` (MULTILINE);
    numeric: `metric op number` over a probe's numbers (e.g. `exit_code == 137`); manual: a person has to look."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["substring", "regex", "numeric", "manual"]
    value: str = ""

    @model_validator(mode="after")
    def _check_value(self) -> Signal:
        if self.kind != "manual" and not self.value.strip():
            raise ValueError(f"a {self.kind} signal needs a value")
        if self.kind == "regex":
            try:
                re.compile(self.value, re.MULTILINE)
            except re.error as exc:
                raise ValueError(f"regex does not compile: {exc}") from None
        if self.kind == "numeric" and not _NUMERIC_RE.match(self.value):
            raise ValueError(f"numeric signal {self.value!r}: expected 'metric op number', e.g. 'exit_code == 137'")
        if self.kind == "substring" and len(self.value.strip()) < 4:
            raise ValueError(f"substring {self.value!r} is too short to be a signal")
        return self

    @cached_property
    def pattern(self) -> re.Pattern[str] | None:
        if self.kind == "regex":
            return re.compile(self.value, re.MULTILINE)
        if self.kind == "substring":
            return re.compile(re.escape(self.value), re.IGNORECASE)
        return None

    def fires(self, metrics: dict[str, float]) -> bool:
        """For a numeric signal: does it hold for these numbers? (False when the metric is absent.)"""
        m = _NUMERIC_RE.match(self.value) if self.kind == "numeric" else None
        if not m or m.group(1) not in metrics:
            return False
        left, op, right = metrics[m.group(1)], m.group(2), float(m.group(3))
        return {">=": left >= right, "<=": left <= right, "==": left == right, "!=": left != right,
                ">": left > right, "<": left < right}[op]


class Gotcha(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str = Field(description="family-qualified id, e.g. universal.U9")
    family: str
    title: str = Field(min_length=3)
    symptom: str = Field(min_length=3)
    signals: list[Signal] = Field(min_length=1)
    cause: str = Field(min_length=3, description="root cause")
    fix: str = Field(min_length=3, description="the fixed remedy: never 'retry and see'")
    phase: list[Phase] = Field(min_length=1)
    severity: Literal["info", "warn", "error", "critical"]
    cls: str | None = Field(default=None, alias="class", description="triage class this entry explains")
    related: list[str] = Field(default_factory=list)

    @field_validator("cls")
    @classmethod
    def _known_class(cls, v: str | None) -> str | None:
        if v is not None and v not in TRIAGE_CLASSES:
            raise ValueError(f"class {v!r} is not in the triage vocabulary {TRIAGE_CLASSES}")
        return v

    @property
    def short_id(self) -> str:
        return self.id.split(".", 1)[1]

    @property
    def uri(self) -> str:
        return f"gpu://gotchas/{self.id}"

    @property
    def detectable(self) -> bool:
        return any(s.kind in ("substring", "regex") for s in self.signals)


TRAINING_FAMILIES = frozenset({"memory", "precision", "distributed", "multinode", "checkpoint", "throughput", "data",
                               "convergence", "llm", "vision", "diffusion", "rl", "vlm"})


class Catalogue:
    def __init__(self, entries: list[Gotcha]) -> None:
        self.entries = entries
        self.by_id = {g.id: g for g in entries}
        self._by_short: dict[str, list[Gotcha]] = {}
        for g in entries:
            self._by_short.setdefault(g.short_id.upper(), []).append(g)

    def __len__(self) -> int:
        return len(self.entries)

    def families(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.entries:
            out[g.family] = out.get(g.family, 0) + 1
        return out

    def resolve(self, key: str) -> Gotcha | None:
        """An exact id (case-insensitive family), or a bare short id when only one family has it."""
        key = key.strip()
        if "." in key:
            fam, short = key.split(".", 1)
            if fam.lower() == "train":  # triage's shorthand: any training family
                hits = [g for g in self._by_short.get(short.upper(), []) if g.family in TRAINING_FAMILIES]
                return hits[0] if len(hits) == 1 else None
            return self.by_id.get(f"{fam.lower()}.{short.upper()}") or self.by_id.get(key)
        hits = self._by_short.get(key.upper(), [])
        return hits[0] if len(hits) == 1 else None

    def get(self, key: str) -> Gotcha:
        hit = self.resolve(key)
        if hit is not None:
            return hit
        same = self._by_short.get(key.strip().split(".")[-1].upper(), [])
        hint = (f"{key!r} is ambiguous: use one of {', '.join(g.id for g in same)}" if len(same) > 1 and "." not in key
                else "ids are <family>.<ID>, e.g. universal.U9 or memory.M17; read gpu://gotchas for the index")
        raise NotFoundError(f"no gotcha {key!r}", hint=hint)


def _load_file(path: Path) -> list[Gotcha]:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path.name}: does not parse: {exc}", data={"file": path.name}) from None
    out: list[Gotcha] = []
    for family, items in doc.items():
        if not _FAMILY_RE.match(family) or not isinstance(items, list):
            raise ConfigError(f"{path.name}: top-level key {family!r} must be a family name holding [[{family}]] entries",
                              data={"file": path.name, "field": family})
        for i, raw in enumerate(items):
            short = str(raw.get("id", ""))
            where = f"{family}[{i}]"
            if not _SHORT_RE.match(short):
                raise ConfigError(f"{path.name}: {where}.id {short!r} must look like U9, RP14, DP15",
                                  data={"file": path.name, "field": f"{where}.id"})
            try:
                out.append(Gotcha.model_validate({**raw, "id": f"{family}.{short}", "family": family}))
            except ValidationError as exc:
                field = f"{where}.{frontmatter.field_path(exc.errors()[0]['loc'])}"
                raise ConfigError(f"{path.name}: {field} ({family}.{short}): {exc.errors()[0]['msg']}",
                                  data={"file": path.name, "field": field}) from None
    return out


@lru_cache(maxsize=4)
def load_catalogue(data_dir: Path = DATA_DIR) -> Catalogue:
    entries: list[Gotcha] = []
    for path in sorted(data_dir.glob("*.toml")):
        entries.extend(_load_file(path))
    seen: set[str] = set()
    for g in entries:
        if g.id in seen:
            raise ConfigError(f"gotcha id {g.id} is defined twice", data={"field": g.id})
        seen.add(g.id)
    for g in entries:
        for r in g.related:
            if r not in seen:
                raise ConfigError(f"{g.id}: related id {r!r} does not exist", data={"field": f"{g.id}.related"})
    return Catalogue(entries)
