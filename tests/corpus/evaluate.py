"""Run the triage engine on every corpus excerpt and score it: accuracy, false alarms, per-class figures."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from mcp_gpu.triage.engine import triage_text
from tests.corpus.loader import LABELS, Excerpt, load

THRESHOLD = 0.95  # held-out primary-class accuracy the test demands (issue 12)
# Regression floors: the held-out figures when the corpus was last grown (1967 excerpts, docs/triage.md). Raise them
# as the engine gets better; never lower them to let a change through. (Growing the corpus adds held-out logs, and
# new batches score worse at first sight than the logs the engine has had longer to generalise to: the counts rose
# from 5 and 17 when batch 6 added 63 held-out logs; batch 8 added 32 (26 right at first sight, 2 failures called
# healthy), batch 9 added 21 (16 right, 2 called healthy), batch 10 added 14 (13 right), batch 11 added 19 (14
# right, 1 called healthy), batch 12 added 33 (27 right, 1 false alarm, 1 called healthy), batch 13 added 13 (9
# right), batch 14 added 6 (3 right, 1 called healthy), batch 15 added 40 (35 right, 2 called healthy), batch 16
# added 18 (10 right, 4 called healthy), batch 17 added 4 (4 right) and batch 18 added 21 (17 right at first
# sight, 18 now; 1 called healthy). On the 416 held-out logs before batch 11 the engine now scores 369/416 =
# 88.7 % with 6 false alarms and 21 failures called healthy.)
FLOOR_ACCURACY = 0.864
FLOOR_FALSE_ALARMS = 7
FLOOR_MISSED = 31
# The engine refines two external stops beyond the fixed set (a scheduler time limit, a deliberate cancel); the
# corpus labels them with the fixed class they refine (added while tuning on the development part).
REFINES = {"time_limit": "preempted", "cancelled": "preempted"}


@dataclass(frozen=True)
class Outcome:
    excerpt: Excerpt
    predicted: str

    @property
    def correct(self) -> bool:
        return self.predicted == self.excerpt.label

    @property
    def false_alarm(self) -> bool:
        return self.excerpt.label == "healthy" and self.predicted != "healthy"

    @property
    def missed(self) -> bool:
        """A real failure called healthy."""
        return self.excerpt.label != "healthy" and self.predicted == "healthy"


@dataclass
class Score:
    split: str
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.outcomes)

    @property
    def correct(self) -> int:
        return sum(o.correct for o in self.outcomes)

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else 0.0

    @property
    def healthy(self) -> int:
        return sum(o.excerpt.label == "healthy" for o in self.outcomes)

    @property
    def false_alarms(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.false_alarm]

    @property
    def missed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.missed]

    def confusion(self) -> Counter[tuple[str, str]]:
        return Counter((o.excerpt.label, o.predicted) for o in self.outcomes)

    def per_class(self) -> dict[str, tuple[int, int, int]]:
        """label → (true positives, predicted as it, actually it)."""
        out = {}
        for cls in LABELS:
            tp = sum(o.correct and o.excerpt.label == cls for o in self.outcomes)
            pred = sum(o.predicted == cls for o in self.outcomes)
            actual = sum(o.excerpt.label == cls for o in self.outcomes)
            out[cls] = (tp, pred, actual)
        return out

    def line(self) -> str:
        return (f"{self.split}: {self.correct}/{self.n} primary class right ({100 * self.accuracy:.1f} %), "
                f"false alarms {len(self.false_alarms)}/{self.healthy} healthy, "
                f"failures called healthy {len(self.missed)}/{self.n - self.healthy}")


def evaluate(excerpts: list[Excerpt] | None = None) -> dict[str, Score]:
    """Score both splits: {'development': Score, 'held-out': Score}."""
    scores = {"development": Score("development"), "held-out": Score("held-out")}
    for ex in excerpts if excerpts is not None else load():
        primary = triage_text(ex.text).primary
        scores[ex.split].outcomes.append(Outcome(ex, REFINES.get(primary, primary)))
    return scores
