"""The verdict does not depend on how a log reached us: what collectors and launchers put around each line.

Every development excerpt of the corpus is triaged as pasted and again as `kubectl logs --timestamps`, `srun -l`,
torchrun's `[rankN]:`, Windows line ends, terminal colours, a Markdown code block's indent, `docker compose logs`,
Ray's worker prefix, a tagging `tee` and `mpirun --tag-output` would show it; no verdict may change. (Held-out
excerpts are left out: nobody looks at them one by one.)
"""

from __future__ import annotations

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
