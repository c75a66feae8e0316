"""Weak findings that stand for a guess: the subject an unexplained error line names (`lexicon.topic`), and the
subsystem a cut-off traceback's frames were in (`rules.FRAME_HINTS`). `log_scan` makes them when no rule names a
cause; any rule that does outranks them (their confidence is lower).
"""

from __future__ import annotations

import re

from mcp_gpu.models import Severity
from mcp_gpu.triage.lexicon import TOPIC_CONFIDENCE
from mcp_gpu.triage.rules import FRAME_HINT_CONFIDENCE, FRAME_HINTS, GENERIC_TRACEBACK, RULES, Rule

# the weak rules that stand for a guess, made once per kind and class: `topic.<cls>` (an unexplained error line about
# the subject `lexicon.topic` names) and `hint.<cls>` (the subsystem a cut-off traceback's frames were in)
_WEAK_RULES: dict[str, Rule] = {}


def _weak_rule(kind: str, cls: str, severity: Severity, title: str, confidence: float) -> Rule:
    rule_id = f"{kind}.{cls}"
    rule = _WEAK_RULES.get(rule_id)
    if rule is None:
        base = next((r for r in RULES if r.cls == cls and r.role == "cause"), GENERIC_TRACEBACK)
        rule = Rule(rule_id, cls, severity, title, base.pattern, base.remedy, base.gotcha, "cause", None, False,
                    confidence)
        _WEAK_RULES[rule_id] = rule
    return rule


def topic_rule(cls: str) -> Rule:
    """The weak rule standing for an unexplained error line about `cls`."""
    return _weak_rule("topic", cls, "error", f"an error no rule knows, about {cls.replace('_', ' ')}", TOPIC_CONFIDENCE)


def hint_rule(cls: str) -> Rule:
    return _weak_rule("hint", cls, "warn", f"the log ends inside a traceback in {cls} code", FRAME_HINT_CONFIDENCE)


# the last code line of a cut-off traceback importing a module: the paste stops inside an import chain
_IMPORT_LINE = re.compile(r"^(?:from [\w.]+ )?import [\w.]+")


def frame_hint(frames: list[str], code: str = "") -> tuple[Rule, str] | None:
    """The subsystem the deepest recognisable frame of a cut-off traceback belongs to, as a weak finding; a paste
    cut on an import statement stopped inside the imports (a module or library that does not load)."""
    if _IMPORT_LINE.match(code):
        return hint_rule("import_or_config_error"), f"(the log ends inside a traceback, while importing) {code}"
    for frame in reversed(frames):
        for pattern, cls in FRAME_HINTS:
            if pattern.search(frame):
                return hint_rule(cls), f"(the log ends inside a traceback, last in {cls} code) {frame}"
    return None
