"""Each stack's wording of a failure gets its class; routine lines of healthy runs raise no alarm.

The rows live in tests/fixtures/triage_wordings/ (one line per row, `\\n` for a line break) so that a new wording is
one more row: how PyTorch, TensorFlow, JAX, MXNet, ONNX Runtime, ROCm, Slurm, Kubernetes, Ray, SkyPilot, clouds and
HTTP clients say each thing. They were written from documentation and common pastes, not from the corpus, so they
test that a rule covers a family of wordings rather than one log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_gpu.triage.engine import triage_text

ROWS = Path(__file__).parent / "fixtures" / "triage_wordings"
REFINES = {"time_limit": "preempted", "cancelled": "preempted"}
PROGRESS = "\n".join(f"step {i} | loss {2.0 - i / 100:.3f} | lr 3e-4" for i in range(1, 6))
TRACEBACK = 'Traceback (most recent call last):\n  File "train.py", line 10, in <module>\n    main()\n'


def _rows(name: str) -> list[tuple[str, str]]:
    rows = []
    for raw in (ROWS / name).read_text(encoding="utf-8").splitlines():
        if raw.strip() and not raw.startswith("#"):
            key, line = raw.split("\t", 1)
            rows.append((key, line.replace("\\n", "\n")))
    return rows


FAILURES = _rows("failures.tsv")
UNKNOWN = _rows("unknown.tsv")
ROUTINE = _rows("routine.tsv")


def _primary(text: str) -> str:
    got = triage_text(text).primary
    return REFINES.get(got, got)


def _is_exception(line: str) -> bool:
    first = line.split()[0]
    return first.rstrip(":").endswith(("Error", "Exception")) or (":" in first and "." in first)


@pytest.mark.parametrize(("cls", "line"), FAILURES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(FAILURES)])
def test_a_failure_worded_by_any_stack_gets_its_class(cls: str, line: str) -> None:
    assert _primary(PROGRESS + "\n" + line + "\n") == cls
    if _is_exception(line):
        assert _primary(PROGRESS + "\n" + TRACEBACK + line + "\n") == cls


@pytest.mark.parametrize(("cls", "line"), UNKNOWN, ids=[f"{c}-{i}" for i, (c, _) in enumerate(UNKNOWN)])
def test_an_error_no_rule_knows_is_named_by_its_subject(cls: str, line: str) -> None:
    assert _primary(PROGRESS + "\n" + TRACEBACK + line + "\n") == cls


@pytest.mark.parametrize(("where", "line"), ROUTINE, ids=[str(i) for i in range(len(ROUTINE))])
def test_a_routine_line_of_a_healthy_run_is_no_alarm(where: str, line: str) -> None:
    assert _primary(line + "\n" + PROGRESS + "\n") == "healthy"
    if where == "both":
        assert _primary(PROGRESS + "\n" + line + "\n") == "healthy"


def test_the_rows_cover_every_failure_class() -> None:
    from tests.corpus.loader import LABELS

    assert {c for c, _ in FAILURES} == set(LABELS) - {"healthy"}
