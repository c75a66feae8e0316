"""The verdict does not depend on how a log reached us: what collectors and launchers put around each line.

Every development excerpt of the corpus is triaged as pasted and again as `kubectl logs --timestamps`, `srun -l`,
torchrun's `[rankN]:`, Windows line ends, terminal colours, a Markdown code block's indent, `docker compose logs`,
Ray's worker prefix, a tagging `tee`, `mpirun --tag-output`, the container runtime's log files and a web page
that escaped and typeset it would show it; no verdict may change. (Held-out excerpts are left out: nobody looks
at them one by one.)
"""

from __future__ import annotations

import html
from collections.abc import Callable

import pytest

from mcp_gpu.triage.engine import triage_text
from tests.corpus.loader import Excerpt, load


def _per_line(prefix: Callable[[int], str]) -> Callable[[str], str]:
    return lambda text: "\n".join(prefix(i) + line for i, line in enumerate(text.split("\n")))


FORMATS: dict[str, Callable[[str], str]] = {
    "kubectl --timestamps": _per_line(lambda i: f"2026-05-01T12:{i // 60 % 60:02d}:{i % 60:02d}.123456789Z "),
    "srun -l": _per_line(lambda i: "0: "),
    "torchrun rank prefix": _per_line(lambda i: "[rank3]: "),
    "CRLF line ends": lambda text: text.replace("\n", "\r\n"),
    "ANSI colours": lambda text: "\n".join(f"\x1b[1;31m{line}\x1b[0m" if "rror" in line else line
                                           for line in text.split("\n")),
    # how people paste: a Markdown code block indented by four spaces or a tab
    "code block (4 spaces)": _per_line(lambda i: "    "),
    "code block (tab)": _per_line(lambda i: "\t"),
    # prefixes no rule knows by name, found because every line shares them
    "docker compose logs": _per_line(lambda i: "trainer-1  | "),
    "Ray worker prefix": _per_line(lambda i: f"(RayTrainWorker pid={4000 + i % 3 * 517}) "),
    "a tee that tags stderr": _per_line(lambda i: "[stderr] "),
    "mpirun --tag-output": _per_line(lambda i: f"[1,{i % 2}]<stderr>:"),
    # the container runtime's own log files and `crictl logs`: stamp, stream, F (a full line)
    "CRI log file": _per_line(lambda i: f"2026-05-01T12:00:{i % 60:02d}.123456789Z stderr F "),
    "a bare time of day": _per_line(lambda i: f"12:{i // 60 % 60:02d}:{i % 60:02d} "),
    "a log viewer's export (tab after the stamp)": _per_line(lambda i: f"2026-05-01 12:00:{i % 60:02d}.123\t"),
    # moreutils' `ts` (`python train.py | ts`), a CI runner's stamps and its group mark, a log pasted as comments
    "moreutils ts": _per_line(lambda i: f"May 01 12:{i // 60 % 60:02d}:{i % 60:02d} "),
    "GitHub Actions step log": _per_line(lambda i: f"2026-05-01T12:00:{i % 60:02d}.1234567Z "
                                         + ("##[group]" if i == 0 else "")),
    "pasted as comments": _per_line(lambda i: "# "),
    # a log copied from a rendered web page: entities, curly quotes, no-break spaces, a blank line after each line
    "HTML entities": lambda text: html.escape(text, quote=True),
    "curly quotes": lambda text: text.replace("'", "\u2019").replace('"', "\u201d"),
    "no-break spaces": lambda text: text.replace("  ", "\u00a0 "),
    "a blank line after every line": lambda text: text.replace("\n", "\n\n"),
}


@pytest.fixture(scope="module")
def development() -> list[tuple[Excerpt, str]]:
    # a paste quoted as Markdown (`> ` on every line) is its own format: a collector's prefix would go inside it
    return [(ex, triage_text(ex.text).primary) for ex in load() if not ex.held_out and not ex.text.startswith(">")]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_collectors_prefix_changes_no_verdict(fmt: str, development: list[tuple[Excerpt, str]]) -> None:
    transform = FORMATS[fmt]
    flips = [(ex.name, before, after) for ex, before in development
             if (after := triage_text(transform(ex.text)).primary) != before]
    assert len(development) > 300
    assert not flips, f"{len(flips)} verdicts changed under {fmt}: {flips[:5]}"


def test_a_paste_hard_wrapped_at_a_fixed_width_is_read_whole() -> None:
    line = "RuntimeError: allocation of the activation buffer for layer 31 failed: CUDA out of memory (step 9)"
    progress = [f"step {i} loss 2.{i:02d} lr 3e-4 tokens/s 51234 mfu 0.41 grad_norm 0.8 elapsed 00:{i:02d}:10 eta 9:59"
                for i in range(12)]
    text = "\n".join([*progress, "Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
                      "    loss.backward()", line])
    width = 80  # a terminal's width; the cut falls inside "CUDA out of memory"
    wrapped = "\n".join(seg for raw in text.split("\n") for seg in ([raw[i:i + width] for i in range(0, len(raw), width)]
                                                                     or [""]))
    assert "CUDA out of memory" not in wrapped
    assert triage_text(wrapped).primary == "cuda_oom"


def _hard_wrap(text: str, width: int) -> str:
    """What a terminal or `tmux capture-pane` (without -J) gives: every line cut at the width, mid-word."""
    return "\n".join(seg for raw in text.split("\n")
                     for seg in ([raw[i:i + width] for i in range(0, len(raw), width)] or [""]))


def test_a_traceback_wrapped_with_its_frames_keeps_its_exception() -> None:
    # the words naming the failure land wholly on the continuation line, and the frames are cut too
    frames = [f'  File "/home/user/miniconda3/envs/train/lib/python3.10/site-packages/pkg/module_{i}/impl.py", '
              f"line {100 + i}, in call_{i}\n    return impl_{i}(*args, **kwargs)" for i in range(6)]
    exc = ("tensorflow.python.framework.errors_impl.InternalError: the op failed after 3 attempts: "
           "ResourceExhaustedError OOM when allocating tensor with shape[64,1024,1024]")
    text = "\n".join(["step 10 loss 2.1", "Traceback (most recent call last):", *frames, exc])
    for width in (80, 100, 120):
        assert triage_text(_hard_wrap(text, width)).primary == "cuda_oom", width


def test_a_frame_cut_at_any_width_is_joined() -> None:
    text = ('step 3 loss 1.2\nTraceback (most recent call last):\n  File "/opt/env/lib/python3.8/site-packages/torch/'
            'distributed/rende\nzvous.py", line 166, in _env_rendezvous_handler\n    raise _env_error("MASTER_ADDR")\n')
    assert triage_text(text).primary == "import_or_config_error"


def test_lines_that_merely_share_a_length_are_not_joined() -> None:
    # equal-width rows (NCCL chatter, a table) followed by new records: nothing to join
    rows = [f"gpu01:1234:56{i:02d} [0] NCCL INFO Channel {i:02d}/32 :    0   1   2   3   4   5   6   7 via P2P/IPC"
            for i in range(8)]
    text = "\n".join([*rows, "[rank0]: step 1 loss 2.0", "2026-01-01 12:00:00 | INFO | saved checkpoint step_1"])
    from mcp_gpu.triage.paste import unwrap
    assert unwrap(text) == text


# Hard wraps cannot all be undone (a wrap that falls between two records looks like two records); this budget keeps
# what was measured when fixed-width rejoining learned to join a cut line with any continuation that starts like no
# new record (docs/triage.md): at 100 columns 14 of 934 development verdicts changed, at 80 columns 20.
WRAP_FLIP_BUDGET = 0.025


@pytest.mark.parametrize("width", [80, 100])
def test_a_hard_wrapped_paste_keeps_nearly_every_verdict(width: int, development: list[tuple[Excerpt, str]]) -> None:
    flips = [(ex.name, before, after) for ex, before in development
             if (after := triage_text(_hard_wrap(ex.text, width)).primary) != before]
    assert len(flips) <= WRAP_FLIP_BUDGET * len(development), f"{len(flips)} verdicts changed: {flips[:5]}"


def test_the_progress_finders_word_hints_find_what_the_full_patterns_find() -> None:
    """The finder only tries its patterns on lines holding one of their literal words (a speed-up for logs of
    NCCL chatter or tracebacks): on every corpus log it must answer exactly as the patterns alone do."""
    from mcp_gpu.triage.paste import normalise
    from mcp_gpu.triage.scan import ProgressFinder

    asked = 0
    for ex in load():
        text = normalise(ex.text)
        starts = [0, *[i + 1 for i, ch in enumerate(text) if ch == "\n"][::3]]
        fast, full = ProgressFinder(text, set()), ProgressFinder(text, set(), hinted=False)
        for pos in starts:
            assert fast.after(pos) == full.after(pos), (ex.name, pos)
            assert fast.finite_loss_after(pos) == full.finite_loss_after(pos), (ex.name, pos)
            asked += 1
    assert asked > 5_000
