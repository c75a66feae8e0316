"""Literal "needles" of a regex: substrings one of which every match must contain.

A log line that holds none of a rule's needles cannot match it, so the engine tests a rule's regex only on the
lines that hold one (a substring test is far cheaper than a regex search, and most log lines match nothing).
"""

from __future__ import annotations

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
