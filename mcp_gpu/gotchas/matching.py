"""Paste an error line or a symptom, get the catalogue entries that explain it.

Signals are found in one pass over the text (`_Signals`): cost linear in the text, nearly flat in the catalogue.

Ranking: exact signals first (a substring or regex from the entry found in the text scores high, longer
matches higher), then word overlap weighted by how rare each word is in the catalogue. Only a signal hit makes a
match `confident`; word overlap alone is a suggestion, capped well below it, so a healthy log line such as
`step 100 loss 0.23` never comes back as a confident diagnosis.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

from pydantic import BaseModel, Field

from mcp_gpu.gotchas.catalogue import Catalogue, Gotcha, Signal, load_catalogue
from mcp_gpu.triage.needles import NeedleFinder, needles_of

MAX_TEXT = 20_000
MIN_WORD_WEIGHT = 6.0  # shared words must be rare enough: 'step' + 'loss' alone is not a diagnosis
_WORD_RE = re.compile(r"[a-z][a-z0-9_]{2,}")
_STOP = frozenset(re.findall(r"\S+",
    "the and for with from that this then than into onto when while after before not but are was were has have "
    "had its can cannot could should would will use used using via per all any one two only also each both out off "
    "too very much more most less least same other there their them they what which who whose how why where your "
    "you our yes none null true false get gets got set sets run runs running ran"))
_CHINA = frozenset({"hengyuan", "matpool", "featurize", "lanrui"})


class GotchaMatch(BaseModel):
    id: str
    title: str
    severity: str
    confidence: float = Field(ge=0, le=1)
    confident: bool = Field(description="true only when one of the entry's exact signals matched the text")
    matched: list[str] = Field(default_factory=list, description="the signal text found, or the shared words")
    symptom: str
    cause: str
    fix: str
    phase: list[str]
    cls: str | None = Field(default=None, alias="class")
    related: list[str] = Field(default_factory=list)
    uri: str


class LookupResult(BaseModel):
    query: str = Field(description="the first line of the text (shortened)")
    confident: bool = Field(description="at least one match is backed by an exact signal")
    matches: list[GotchaMatch]


def _words(text: str) -> set[str]:
    out = set()
    for w in _WORD_RE.findall(text.lower()):
        if w in _STOP:
            continue
        out.add(w[:-1] if len(w) > 4 and w.endswith("s") and not w.endswith("ss") else w)
    return out


class _Index:
    def __init__(self, cat: Catalogue) -> None:
        self.cat = cat
        self.words = {g.id: _words(" ".join((g.title, g.symptom, g.cause, g.short_id))) for g in cat.entries}
        df: dict[str, int] = {}
        for ws in self.words.values():
            for w in ws:
                df[w] = df.get(w, 0) + 1
        n = len(cat.entries)
        self.idf = {w: math.log(1 + n / c) for w, c in df.items()}
        self.unknown_idf = math.log(1 + n)


@lru_cache(maxsize=2)
def _index(cat: Catalogue) -> _Index:
    return _Index(cat)


class _Signals:
    """Every entry's text signals behind one needle search: a signal's regex runs only when the text holds a
    literal every match of it contains (`needles_of`), so a lookup costs one pass over the text plus the few
    signals that could match, instead of a search per signal."""

    def __init__(self, cat: Catalogue) -> None:
        self.signals: list[tuple[str, int, Signal]] = []  # (entry id, signal position, signal)
        owners: dict[str, set[int]] = {}
        self.always: set[int] = set()
        for g in cat.entries:
            for pos, sig in enumerate(g.signals):
                if sig.pattern is None:
                    continue
                k = len(self.signals)
                self.signals.append((g.id, pos, sig))
                needles = (sig.value.lower(),) if sig.kind == "substring" else needles_of(sig.value)
                if needles is None:
                    self.always.add(k)
                else:
                    for n in needles:
                        owners.setdefault(n, set()).add(k)
        self.finder = NeedleFinder(owners) if owners else None

    def hits(self, text: str) -> dict[str, list[str]]:
        """entry id → the signal text found, in the entry's signal order."""
        ks = set(self.always)
        if self.finder is not None:
            ks |= self.finder.owners_of(self.finder.needles_in(text.lower()))
        out: dict[str, list[str]] = {}
        for k in sorted(ks):
            gid, _pos, sig = self.signals[k]
            assert sig.pattern is not None
            m = sig.pattern.search(text)
            if m:
                out.setdefault(gid, []).append(m.group(0).strip() or sig.value)
        return out


@lru_cache(maxsize=2)
def _signals(cat: Catalogue) -> _Signals:
    return _Signals(cat)


def _match(g: Gotcha, confidence: float, confident: bool, matched: list[str]) -> GotchaMatch:
    return GotchaMatch.model_validate({
        "id": g.id, "title": g.title, "severity": g.severity, "confidence": round(confidence, 2),
        "confident": confident, "matched": matched, "symptom": g.symptom, "cause": g.cause, "fix": g.fix,
        "phase": list(g.phase), "class": g.cls, "related": g.related, "uri": g.uri})


def _in_platform(g: Gotcha, platform: str | None) -> bool:
    return platform is not None and (g.family == platform or (g.family == "china" and platform in _CHINA))


def lookup(text: str, limit: int = 5, platform: str | None = None, catalogue: Catalogue | None = None) -> LookupResult:
    """Best-matching catalogue entries for `text` (an error line, a log tail, or a symptom in words)."""
    cat = catalogue or load_catalogue()
    text = text[-MAX_TEXT:]
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    query = first if len(first) <= 160 else first[:157] + "..."
    limit = max(1, min(limit, 50))

    direct = cat.resolve(text.strip()) if len(text.strip()) <= 40 else None
    if direct is not None:
        return LookupResult(query=query, confident=True, matches=[_match(direct, 1.0, True, [direct.id])])

    idx = _index(cat)
    qwords = _words(text)
    qweight = sum(idx.idf.get(w, idx.unknown_idf) for w in qwords) or 1.0
    scored: list[tuple[float, GotchaMatch]] = []
    found = _signals(cat).hits(text)
    for g in cat.entries:
        hits = found.get(g.id, [])
        shared = qwords & idx.words[g.id]
        weight = sum(idx.idf[w] for w in shared)
        coverage = weight / qweight
        boost = 1.0 if _in_platform(g, platform) else 0.0
        if hits:
            strength = sum(10 + min(len(h), 60) / 6 for h in hits)
            conf = min(0.99, 0.8 + 0.05 * (len(hits) - 1) + 0.1 * coverage + 0.03 * boost)
            scored.append((100 + strength + 5 * coverage + 3 * boost, _match(g, conf, True, hits)))
        elif len(shared) >= 2 and coverage >= 0.25 and weight >= MIN_WORD_WEIGHT:
            conf = min(0.5, 0.15 + 0.4 * coverage + 0.05 * boost)
            scored.append((10 * coverage + boost, _match(g, conf, False, sorted(shared))))
    scored.sort(key=lambda t: (-t[0], t[1].id))
    matches = [m for _, m in scored[:limit]]
    return LookupResult(query=query, confident=any(m.confident for m in matches), matches=matches)
