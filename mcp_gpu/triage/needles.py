"""Literal "needles" of a regex: substrings one of which every match must contain.

A log line that holds none of a rule's needles cannot match it, so the engine tests a rule's regex only on the
lines that hold one (a substring test is far cheaper than a regex search, and most log lines match nothing).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_META = set(".^$*+?{}[]()|")


def _skip_class(p: str, i: int) -> int:
    """`p[i]` opens a character class: the index just past its `]`."""
    i += 1
    if p[i:i + 1] == "^":
        i += 1
    if p[i:i + 1] == "]":
        i += 1
    while i < len(p) and p[i] != "]":
        i += 2 if p[i] == "\\" else 1
    return i + 1


def _skip_group(p: str, i: int) -> int:
    """`p[i]` opens a group: the index just past its matching `)`."""
    depth = 0
    while i < len(p):
        c = p[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _skip_class(p, i)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def _branches(pattern: str) -> list[str]:
    """Split a regex at its top-level `|`."""
    out, start, i = [], 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
        elif c == "[":
            i = _skip_class(pattern, i)
        elif c == "(":
            i = _skip_group(pattern, i)
        else:
            if c == "|":
                out.append(pattern[start:i])
                start = i + 1
            i += 1
    out.append(pattern[start:])
    return out


def _longest_literal(branch: str) -> str:
    """The longest run of plain characters every match of `branch` contains (groups and classes break runs)."""
    runs, run, i = [], "", 0
    while i < len(branch):
        c = branch[i]
        if c == "\\" and i + 1 < len(branch) and not branch[i + 1].isalnum():
            char, width = branch[i + 1], 2
        elif c in "\\[(" or c in _META:
            runs.append(run)
            run = ""
            i = _skip_class(branch, i) if c == "[" else _skip_group(branch, i) if c == "(" else i + (2 if c == "\\" else 1)
            continue
        else:
            char, width = c, 1
        if branch[i + width: i + width + 1] in ("?", "*", "{"):
            runs.append(run)
            run = ""
        else:
            run += char
        i += width
    runs.append(run)
    return max(runs, key=len)


def needles_of(pattern: str) -> tuple[str, ...] | None:
    """Literals, one per top-level alternative, that any match must contain; None if some alternative has none."""
    found = []
    for branch in _branches(pattern):
        literal = _longest_literal(branch).lower()
        if len(literal) < 3:
            return None
        found.append(literal)
    return tuple(found)


# Characters from common to rare in training logs (roughly): a needle piece starting late in this list is seen
# at few positions. Characters not listed count as rarest.
_COMMON = " e0t1a2o3i4n5s6r7l8c9d:u.m/p_h-g|f,b[]=y()w'k\"vx%<>zjq"
ANCHOR_MIN = 5


def anchor(needle: str) -> str:
    """The tail of `needle` (at least ANCHOR_MIN characters) that starts at its rarest character."""
    if len(needle) <= ANCHOR_MIN:
        return needle

    def rank(i: int) -> int:
        j = _COMMON.find(needle[i])
        return len(_COMMON) if j < 0 else j

    best = max(range(len(needle) - ANCHOR_MIN + 1), key=lambda i: (rank(i), -i))
    return needle[best:]


def trie_pattern(words: Iterable[str]) -> str:
    """One regex matching any of `words`, factored by common prefixes (the longest word at a position wins).

    Python's regex engine tries the alternatives of a flat `a|b|c` one by one at every position; factored, it
    tests a few first characters per position, so one search for hundreds of needles stays near a plain scan."""
    root: dict[str, Any] = {}
    for w in words:
        node = root
        for c in w:
            node = node.setdefault(c, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        ends = "" in node
        branches = [re.escape(c) + emit(node[c]) for c in sorted(k for k in node if k)]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if ends:
            return "(?:" + body + ")?" if len(branches) == 1 else body + "?"
        return body

    return emit(root)


def _minimal_pieces(needles: Iterable[str]) -> list[str]:
    """Each needle's anchored piece, without the pieces that contain another."""
    pieces = {anchor(n) for n in needles}
    return sorted(n for n in pieces if not any(o != n and o in n for o in pieces))


# A line's shape: its UTF-8 bytes with ASCII letters lower-cased and every ASCII digit '0'. Log lines that differ
# only in their numbers (progress bars, step records, timestamps, NCCL chatter) have one shape, so a long log has few
# distinct shapes; needles are searched once per shape (a piece of a needle is in a line only if its shape is in the
# line's shape), and the real needles then in the few lines whose shape holds a piece.
_SHAPE = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", b"abcdefghijklmnopqrstuvwxyz" + b"0" * 10)


def shape(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass").translate(_SHAPE)


class NeedleFinder(Generic[T]):
    """Which owners (rules, signals) have a needle in a text, found in one pass over the lower-cased text."""

    def __init__(self, owners: Mapping[str, Iterable[T]]) -> None:
        needles = {n for n in owners if n}
        if not needles:
            raise ValueError("no needles")
        # a zero-width lookahead sees overlapping needles that start at different places
        self.finder = re.compile("(?=(" + trie_pattern(sorted(needles)) + "))")
        self.longest = max(map(len, needles))
        # To find the lines that may hold a needle, any piece of every needle will do (a line holding "out of
        # memory" holds "memory"): each needle is cut to start at its rarest character (`anchor`), and pieces that
        # contain another piece are dropped. The regex engine then skips most positions on their first character.
        # A line found this way is searched again for its real needles.
        # The pieces are searched in the lines' shapes (`shape`: digits all '0', bytes), so they are cut from the
        # needles' shapes.
        self.first = re.compile(trie_pattern(_minimal_pieces(shape(n).decode("latin-1") for n in needles))
                                .encode("latin-1"))
        # A shape holding a piece may stand for lines that hold none (`f0` of a glog line is in the shape of
        # every hexadecimal `f7`): a line is tested for its pieces, cheaply, before its needles are searched.
        self.first_in_line = re.compile(trie_pattern(_minimal_pieces(needles)))
        # a match is the longest needle at its position; the shorter needles it starts with are there too
        self._owners: dict[str, frozenset[T]] = {}
        for n in needles:
            acc: set[T] = set()
            for p in needles:
                if n.startswith(p):
                    acc.update(owners[p])
            self._owners[n] = frozenset(acc)

    def needles_in(self, low: str, start: int = 0, end: int | None = None) -> set[str]:
        """The needles found in `low[start:end]` (`low` already lower-cased)."""
        it = self.finder.finditer(low, start) if end is None else self.finder.finditer(low, start, end)
        return {m.group(1) for m in it}

    def crosses(self, low: str, cut: int) -> bool:
        """Whether a needle found in `low` (the longest at its place) starts before `cut` and ends after it."""
        for m in self.finder.finditer(low, max(0, cut - self.longest)):
            if m.start() >= cut:
                return False
            if m.start() + len(m.group(1)) > cut:
                return True
        return False

    def owners_of(self, found: Iterable[str]) -> set[T]:
        out: set[T] = set()
        for n in found:
            out |= self._owners.get(n, frozenset())
        return out
