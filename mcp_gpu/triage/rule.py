"""One triage rule and the table builder the rule modules use (see `rules.py` for how rules are read)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from mcp_gpu.models import Severity
from mcp_gpu.triage.needles import needles_of

Role = Literal["cause", "sigterm", "cascade", "ignore", "trend"]

# Classes the engine adds to the ARCHITECTURE vocabulary (extend, never rename): a scheduler time limit and a
# deliberate cancellation are neither crashes nor preemptions, and a relaunch policy must not read them as either.
EXTRA_CLASSES: tuple[str, ...] = ("time_limit", "cancelled")


@dataclass(frozen=True)
class Rule:
    id: str
    cls: str
    severity: Severity
    title: str
    pattern: re.Pattern[str]
    remedy: str
    gotcha: str | None = None
    role: Role = "cause"
    # Lower-case literals, one of which every match contains: a cheap test before the regex (None: always run it).
    needles: tuple[str, ...] | None = None
    fatal: bool = False
    confidence: float = 0.85


def compile_pattern(pattern: str, ignore_case: bool = False) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE if ignore_case else 0)


# A client saying the trouble is over ("Network error resolved after 0:00:12, resuming normal operation"): the rule
# table keeps such a line from being read as one more error, and the progress finder reads it as training going on.
RECOVERY_PATTERN = r"[Ee]rror resolved after|resuming normal operation|[Cc]onnection (?:re-?established|restored)|" \
                   r"\b[Rr]econnected\b"

# "inf" as a value, not inside "info": the literal with what may follow it
INF_NEEDLES = ("inf ", "inf,", "inf)", "inf'", 'inf"', "inf}", "inf]", "inf|", "inf;", "inf\n", "inf\t", "infinit",
               "inf.")


class RuleTable:
    """Rows in order (the first rule that matches a line decides it); `add` checks each row has its needles."""

    def __init__(self) -> None:
        self._rules: list[Rule] = []

    def add(self, rule_id: str, cls: str, severity: Severity, title: str, pattern: str, remedy: str, *,
            gotcha: str | None = None, role: Role = "cause", ignore_case: bool = False, fatal: bool = False,
            needles: tuple[str, ...] | None = None, confidence: float = 0.85) -> Rule:
        found = needles if needles is not None else needles_of(pattern)
        if found is None:
            raise ValueError(f"rule {rule_id}: give needles (no literal of 3+ characters in every alternative)")
        rule = Rule(rule_id, cls, severity, title, compile_pattern(pattern, ignore_case), remedy, gotcha, role,
                    tuple(n.lower() for n in found), fatal, confidence)
        self._rules.append(rule)
        return rule  # (a row other modules name, such as the DataLoader's pickling failure, is kept by reference)

    def rules(self) -> tuple[Rule, ...]:
        return tuple(self._rules)
