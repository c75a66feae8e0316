"""The one-pass scan finds exactly the lines that hold a rule's needle, however the log repeats itself.

The scan searches each distinct line shape (digits all one, letters lower-cased) once; these tests build logs where
that shortcut could go wrong — lines that share a shape but differ in the digits a needle names, non-ASCII text
where bytes and characters part, blocks cut in the middle of the log, lines too long to read whole — and compare
with the plain way: every line, lower-cased, tested for every needle."""

from __future__ import annotations

import random

from mcp_gpu.triage.engine import triage_text
from mcp_gpu.triage.needles import shape
from mcp_gpu.triage.paste import normalise, unwrap_frames
from mcp_gpu.triage.scan import BLOCK, INDEX, LONG_LINE, needle_lines

NEEDLES = sorted(INDEX._needles._owners)


def plain_needle_lines(text: str) -> dict[int, tuple[int, set[str]]]:
    """Line start -> (line end, needles), found the obvious way."""
    out, pos = {}, 0
    for raw in text.split("\n"):
        look = raw if len(raw) <= LONG_LINE else raw[:LONG_LINE // 2] + "\n" + raw[-(LONG_LINE // 2):]
        low = look.lower() + "\n"
        if any(n in low for n in NEEDLES):
            out[pos] = (pos + len(raw), INDEX.needles_in(low))
        pos += len(raw) + 1
    return out


def scanned(text: str) -> dict[int, tuple[int, set[str]]]:
    return {line.start: (line.end, line.found) for line in needle_lines(text)}


def test_lines_sharing_a_shape_are_told_apart_by_the_digits_a_needle_names() -> None:
    # "signal 11" is a needle; "signal 12" has the same shape and is not; both hundreds of times, interleaved
    lines = []
    for i in range(600):
        lines.append(f"worker {i} got signal {11 if i % 7 == 0 else 12}")
        lines.append(f"[rank{i % 8}] step {i} loss {i / 1000:.3f}")
    text = "\n".join(lines)
    assert shape("got signal 11") == shape("got signal 12")
    found = scanned(text)
    assert found == plain_needle_lines(text)
    assert sum("signal 11" in f for _, f in found.values()) == len(range(0, 600, 7))


def test_a_long_non_ascii_log_cut_into_blocks_gives_the_same_lines_at_the_same_places() -> None:
    rng = random.Random(7)
    bar = "█▌▏ 進捗 ñ"
    lines = []
    size = 0
    while size < 3 * BLOCK:
        r = rng.random()
        if r < 0.01:
            line = f"RuntimeError: CUDA error: an illegal memory access was encountered {rng.randint(0, 99)}"
        elif r < 0.02:
            line = f"OSError: [Errno {rng.choice((28, 13, 2))}] No space left on device 進捗"
        elif r < 0.03:
            line = "x" * (LONG_LINE + 50) + (" Traceback (most recent call last):" if rng.random() < 0.5 else "")
        else:
            line = f"{rng.randint(0, 100):3d}%|{bar * rng.randint(1, 5)}| {rng.randint(0, 10**6)}/1000000 [00:01<00:02]"
        lines.append(line)
        size += len(line) + 1
    text = "\n".join(lines)
    found = scanned(text)
    assert found == plain_needle_lines(text)
    for start, (end, _) in found.items():  # each place is a whole line of the text
        assert start == 0 or text[start - 1] == "\n"
        assert end == len(text) or text[end] == "\n"


def test_a_needle_in_the_middle_of_a_very_long_line_is_not_read_but_one_at_its_end_is() -> None:
    middle = "a" * LONG_LINE + " out of memory " + "a" * LONG_LINE
    tail = "a" * (3 * LONG_LINE) + " CUDA out of memory"
    text = "\n".join(["start", middle, tail, "end"])
    found = scanned(text)
    assert found == plain_needle_lines(text)
    assert [text[s:e] for s, (e, _) in found.items()] == [tail]


def test_no_needle_is_digits_alone() -> None:
    # A needle is searched for in line shapes, where every digit is '0': a needle of digits and signs only
    # ("137") would send every line holding a three-digit number down the slow path. Name the words around it.
    weak = [n for n in NEEDLES if len(n) < 8 and not any(c.isalpha() for c in shape(n).decode("latin-1"))]
    assert weak == [], weak


def test_a_frame_cut_before_its_end_is_joined_wherever_it_is_and_only_there() -> None:
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/mod',
        'ule.py", line 1518, in _wrapped_call_impl',
        'print("File \\"x.py")',  # not at the line's start after blanks: not a frame
        "next",
        "/work/src/train.py in forward(self, x,",
        "y)",
        "some words.py in f(a,",
        "b)",  # a word with blanks before `.py in`: not an IPython frame
        "torch.OutOfMemoryError: CUDA out of memory.",
    ])
    out = unwrap_frames(text).split("\n")
    assert out[1] == '  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1518, in ' \
                     "_wrapped_call_impl"
    assert out[2:4] == ['print("File \\"x.py")', "next"]
    assert out[4] == "/work/src/train.py in forward(self, x,y)"
    assert out[5:7] == ["some words.py in f(a,", "b)"]
    assert unwrap_frames("no frames here\n") == "no frames here\n"


def test_a_log_that_needs_no_repair_comes_back_as_it_was() -> None:
    # lines that share one length (NCCL chatter) make the text look wrapped; nothing is joined, nothing changes
    lines = [f"node01:2411:2411 [{i % 8}] NCCL INFO Channel {i % 32:02d}/0 : 0[0] -> 1[1] via P2P/IPC" for i in range(50)]
    lines += [f" {i}%|####      | {i}/100 [00:01<00:02,  5.38it/s]" for i in range(50)]
    text = "\n".join(lines)
    assert normalise(text) == text
    assert triage_text(text + "\nKilled").primary == "host_oom_killed"


def test_a_glog_fatal_line_is_found_on_any_day_of_the_year() -> None:
    # its needles name the month and the day (`F0515 `), so that a hexadecimal `f7` in a line's shape is no hit
    for stamp in ("F0101", "F0515", "F0930", "F1231"):
        text = f"I0101 00:00:00.1 7 op.cc:8] step 5\n{stamp} 23:59:59.999999  77 op.cc:9] Non-OK-status: INTERNAL"
        assert triage_text(text).primary == "traceback", stamp
    assert triage_text("weights 0xf0930 12:00:00 loaded\nstep 9 loss 0.1").primary == "healthy"
