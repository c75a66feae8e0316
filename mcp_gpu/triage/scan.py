"""One linear pass over a log: which lines hold a rule's needle, where tracebacks end, where progress resumes.

A rule's regex is tried only on the lines that hold one of its needles (`Rule.needles`). Lines are first reduced
to their shapes (`needles.shape`: letters lower-cased, digits all '0'), and each distinct shape is searched once,
with one regex built as a trie of pieces of every needle (`needles.trie_pattern`): Python's regex engine then tests
a handful of first characters per position instead of every needle. A long log is mostly lines that differ only in
their numbers (progress bars, step records, NCCL chatter), so it is searched as the few distinct lines it is made
of; only the lines whose shape holds a piece are lower-cased and searched for their real needles. Lines without
a needle (nearly all lines of a healthy log) are never looked at one by one."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from mcp_gpu.triage.needles import NeedleFinder, shape, trie_pattern
from mcp_gpu.triage.rule import RECOVERY_PATTERN
from mcp_gpu.triage.rules import RULES, Rule

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
# What launchers put before each line: torchrun's [rank0]:, srun's "0: ", Ray's (Worker pid=1), NCCL's
# host:pid:tid [dev], Open MPI's [1,0]<stderr>:, and pdsh/DeepSpeed's "worker-1: " host names.
PREFIX = re.compile(r"^(?:\[(?:rank|default)\d+\]:\s?|\d{1,4}:(?: |$)|\(\w+ pid=\d+[^)]*\)\s|"
                    r"\S+:\d+:\d+ \[\d+\] |\[\d+,\d+\]<std(?:out|err)>:|"
                    r"(?:[a-z][\w-]*?\d+|\d{1,3}(?:\.\d{1,3}){3}): )")
# What log collectors put before every line: `kubectl logs --timestamps` / `docker logs -t` (RFC 3339), the
# container runtime's own log files (`/var/log/pods/...`, `crictl logs`: the stamp, the stream, F for a full line
# or P for a part), a bare time of day, a log viewer's export (a tab after the stamp), a CI runner's annotation
# after its stamp (`##[error]`), journald's syslog form and moreutils' `ts` (its date without host and process).
# Removed before the launcher prefix, so the line underneath (a traceback frame, an exception) is read as printed.
STAMP = re.compile(r"^(?:\[?(?:\d{4}-\d\d-\d\d[T ])?\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?"
                   r"(?: std(?:out|err) [FP](?= |$))?(?: |\t|$)(?:##\[[a-z]+\])?|"
                   r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:$| (?:\S+ (?:kernel|[\w.\-/@]+\[\d+\]): )?))")
TB_HEADER = "traceback (most recent call last)"
# (also glued to the progress bar the crash interrupted: `...1.77it/s, loss=1.96]Traceback (most recent call last):`)
_TB_HEADER_RE = re.compile(r"(?:^|\s|(?<=[\]|>)]))(?:Original )?Traceback \(most recent call last\):?")
# structural needles: the exception line of a crash without its traceback header, and torchrun's exit codes
_STRUCTURAL = (TB_HEADER, "error", "exception", "exitcode", "mounted on", "fatal", "critical", "quota")


LONG_LINE = 4_000  # a line longer than this is read by its first and last 2,000 characters (log_scan.JUDGE_CHARS)


class NeedleIndex:
    """All needles of the rule table, found in one pass; per line the rules worth trying."""

    def __init__(self, rules: tuple[Rule, ...]) -> None:
        self.rules = rules
        owners: dict[str, set[int]] = {n: set() for n in _STRUCTURAL}
        for i, rule in enumerate(rules):
            for n in rule.needles or ():
                owners.setdefault(n, set()).add(i)
        self._needles = NeedleFinder(owners)
        self.first = self._needles.first
        self.first_in_line = self._needles.first_in_line

    def candidates(self, found: Iterable[str]) -> list[Rule]:
        """The rules whose needles are among `found` (needle matches in one line), in table order."""
        return [self.rules[i] for i in sorted(self._needles.owners_of(found))]

    def needles_in(self, low_line: str) -> set[str]:
        return self._needles.needles_in(low_line)

    def crosses(self, low: str, cut: int) -> bool:
        """Whether a needle found in `low` starts before `cut` and ends after it."""
        return self._needles.crosses(low, cut)


INDEX = NeedleIndex(RULES)


@dataclass
class Line:
    """A physical line of the log that holds at least one needle."""

    start: int
    end: int
    found: set[str]


BLOCK = 1 << 20  # characters read per step: the GIL is let go between steps
SHAPES_KEPT = 200_000  # distinct line shapes remembered across steps (a log of unique lines would grow it without end)


def _ends(line_shape: bytes) -> bytes:
    """What is searched of a shape: all of it, or of a long line only its ends (a long line is judged by its first
    and last LONG_LINE // 2 characters; a character is at most 4 bytes, so these bytes hold them)."""
    if len(line_shape) <= 4 * LONG_LINE:
        return line_shape
    return line_shape[:2 * LONG_LINE] + b" " + line_shape[-2 * LONG_LINE:]


def needle_lines(text: str) -> Iterator[Line]:
    """The lines of `text` holding a needle, in order.

    The text is taken in blocks of about `BLOCK` characters cut at line ends. Each line of a block is reduced to
    its shape (`needles.shape`: lines differing only in numbers share one), the shapes not seen before are searched
    once for a piece of a needle, and only the lines whose shape holds one are lower-cased and searched for their
    real needles. So a 50 MB log of progress bars and step records is searched as the few thousand distinct lines
    it is made of; a log of all-different lines costs one search over its text, as before. Each call into the
    regex engine is short, so a worker thread running this leaves the event loop its turns."""
    first, in_line = INDEX.first, INDEX.first_in_line
    seen: dict[bytes, bool] = {}  # shape -> holds a piece of a needle
    n = len(text)
    base = 0
    while base < n:
        stop = text.find("\n", min(n, base + BLOCK))
        stop = n if stop < 0 else stop
        block = text[base:stop]
        shapes = shape(block).split(b"\n")
        if len(seen) > SHAPES_KEPT:
            seen.clear()
        distinct = dict.fromkeys(shapes)
        new = [s for s in distinct if s not in seen]
        if new:
            looked = [_ends(s) for s in new]
            joined = b"\n".join(dict.fromkeys(looked)) + b"\n"
            holding: set[bytes] = set()
            pos = 0
            while (m := first.search(joined, pos)) is not None:
                start = joined.rfind(b"\n", 0, m.start()) + 1
                pos = joined.find(b"\n", m.start()) + 1
                holding.add(joined[start:pos - 1])
            for s, look in zip(new, looked, strict=True):
                seen[s] = look in holding
        # the lines are walked one by one only in a block where some shape holds a piece
        hits = [i for i, s in enumerate(shapes) if seen[s]] if any(seen[s] for s in distinct) else []
        if hits:
            # where each line starts: a shape has the line's length in bytes, which is its length in characters
            # when the block is ASCII
            lengths = map(len, shapes if block.isascii() else block.split("\n"))
            ends = list(itertools.accumulate(lengths))
            for i in hits:
                end = ends[i] + i  # the newlines before line i
                start = end - (ends[i] - (ends[i - 1] if i else 0))
                if end - start > LONG_LINE:  # judged by its head and tail only (log_scan.JUDGE_CHARS): look there
                    low = (block[start:start + LONG_LINE // 2] + "\n" + block[end - LONG_LINE // 2:end]).lower()
                else:
                    low = block[start:end].lower()
                low += "\n"  # every line ends in a newline (needles like "inf\n")
                if in_line.search(low) is None:
                    continue
                found = INDEX.needles_in(low)
                if found:  # the piece found may belong to no whole needle on this line
                    yield Line(base + start, base + end, found)
        base = stop + 1


def clean_segments(raw: str) -> list[str]:
    """One raw physical line → the lines worth judging: colours and rank prefixes gone, tqdm redraws split apart.

    A carriage return followed by ':' or a quote is bash echoing a CRLF script, so it is kept as a visible `\\r`."""
    text = ANSI.sub("", raw).rstrip("\r\n") if "\x1b" in raw else raw.rstrip("\r\n")
    if "\r" in text:
        parts = text.split("\r")
        if any(p[:1] in (":", "'", '"') for p in parts[1:]):
            segments = [text.replace("\r", "\\r")]
        else:
            segments = [p for p in parts if p.strip()]
    else:
        segments = [text]
    return [_unprefix(s.rstrip()) for s in segments]


def _unprefix(line: str) -> str:
    """The line without up to two collectors' timestamps and up to two launcher prefixes (`srun -l` around torchrun's
    `[rank0]:` gives `0: [rank0]: ...`)."""
    # (`match`, not `sub`: both patterns start with `^`, and a search for it walks a long line to its end)
    # (two stamps: a collector's over a CI runner's or a container runtime's own, `12:00:01 2025-03-03T04:52:43Z ...`)
    cut = _cut(STAMP, line)
    line = _cut(STAMP, cut) if cut != line else cut
    stripped = _cut(PREFIX, line)
    return _cut(PREFIX, stripped) if stripped != line else stripped


def _cut(prefix: re.Pattern[str], line: str) -> str:
    m = prefix.match(line)
    return line[m.end():] if m else line


def is_tb_header(line: str) -> bool:
    return "Traceback (most recent call last)" in line and _TB_HEADER_RE.search(line) is not None


def tb_rest(line: str) -> str | None:
    """None if `line` holds no traceback header; else the text after the header ('' for a normal header)."""
    if "Traceback (most recent call last)" not in line:  # the header's words, found at C speed first
        return None
    m = _TB_HEADER_RE.search(line)
    if m is None:
        return None
    return line[m.end():].strip()


# Training going on: a progress bar, a step/epoch counter, a finite loss, or a stage reported done.
_PROGRESS = re.compile(
    r"(?<!\d)(?:[1-9]\d?|100)%\|| [1-9]\d*/\d+ \[[\d:]+<|\d\s*(?:it/s|s/it|[kMG]?B/s)\b|"
    r"\b(?:step|steps|iter|iteration|epoch|global_step|num_updates|update|batch)\b['\"]?\s*[:=#]?\s*\[?\s*(?!0\b)\d|"
    # (not in an atexit callback, nor a failed flush of stdout/stderr: that is the interpreter on its way out)
    r"\bException ignored in\b(?! atexit)(?!:? <_io\.\w+ name='<std(?:out|err)>')|"
    r"\b(?:train_|training_)?loss(?:es)?\b['\"]?\s*[:=]?\s*(?:tensor\()?[-+]?\d|"
    r"\b(?:successfully|succeeded|(?:training|download|upload|epoch|step) (?:completed|complete|finished|done)|"
    r"(?:saved|saving) (?:model|checkpoint)|resum(?:ed|ing) (?:training|from)|continu(?:e|"
    r"ing) training)\b|" + RECOVERY_PATTERN, re.IGNORECASE | re.MULTILINE)
# A literal word every `_PROGRESS` match holds (lower-cased): a tqdm bar with a total prints `[elapsed<remaining`, so
# "<" stands for the bars; the words of the step, loss, completion and recovery alternatives stand for theirs.
_PROGRESS_HINT = re.compile(trie_pattern([
    "%|", "<", "it/s", "s/it", "b/s", "step", "iter", "epoch", "update", "batch", "exception ignored in", "loss",
    "successfully", "succeeded", "complete", "finished", "done", "saved", "saving", "resum", "continu", "resolved",
    "established", "restored", "reconnected"]))
_LOSS_HINT = re.compile("loss")
# a client saying the trouble is over: progress even though the line names the error it recovered from
_RECOVERED = re.compile(RECOVERY_PATTERN)
# a finite loss value: what a NaN/inf loss needs after it to count as survived
# (a validation or test loss does not count: the training loss is what went bad)
_FINITE_LOSS = re.compile(r"(?<![\w/])(?<!validation )(?<!valid )(?<!val )(?<!eval )(?<!test )(?:train[_/ ]?)?"
                          # (a tabular logger's statistics of it count: rllab/rlpyt's `lossAverage   0.0114`)
                          r"loss(?:es|_?(?:avg|average|mean|median))?\b['\"]?\s*[:=]?\s*(?:tensor\()?[-+]?\d",
                          re.IGNORECASE)
_NOT_PROGRESS = re.compile(r"^\s*File \"|wandb|\b(?:nan|inf|fail(?:ed|ure|s)?|errors?|exception|abort(?:ed|ing)?|"
                           r"killed|terminat\w*|timed out|timeout|refused|denied|exit(?:ed|code)?|not finite)\b",
                           re.IGNORECASE)


_NAN_VALUE = re.compile(r"[:=]\s*(?:tensor\()?['\"]?[-+]?(?:nan|inf)\b", re.IGNORECASE)


_BAR = re.compile(r"\d%\||(?:it/s|s/it)\]|\[=+>?\.*\]")


class _Cached:
    """`search(pos)` → the first match at or after pos; asked at non-decreasing positions, each stretch of text is
    searched at most once (the answer for pos stays valid for every later pos up to it)."""

    def __init__(self, search: Callable[[int], int | None]) -> None:
        self._search = search
        self._from = -1
        self._found: int | None = None

    def __call__(self, pos: int) -> int | None:
        if self._from >= 0 and pos >= self._from and (self._found is None or self._found >= pos):
            return self._found
        self._from = pos
        self._found = self._search(pos)
        return self._found


class ProgressFinder:
    """The next line of real progress (or of a finite training loss) after a position."""

    def __init__(self, text: str, hit_lines: set[int], *, hinted: bool = True) -> None:
        self.text = text
        self.hit_lines = hit_lines
        self.after = _Cached(self._progress)
        # a second cursor for "and then more progress", asked at positions of its own
        self.after_next = _Cached(self._progress)
        self.finite_loss_after = _Cached(self._finite_loss)
        self._lower: str | None = None if hinted else ""  # "": every search runs the full pattern

    def is_bar(self, start: int) -> bool:
        """Whether the line starting at `start` is a progress bar (tqdm and the like)."""
        end = self.text.find("\n", start)
        return _BAR.search(self.text, start, len(self.text) if end < 0 else end) is not None

    def _line(self, m: re.Match[str]) -> tuple[int, int]:
        start = self.text.rfind("\n", 0, m.start()) + 1
        end = self.text.find("\n", m.end())
        return start, len(self.text) if end < 0 else end

    def _low(self) -> str:
        if self._lower is None:
            low = self.text.lower()
            # (a few characters lower-case to two: then positions would not line up, and the hints are not used)
            self._lower = low if len(low) == len(self.text) else ""
        return self._lower

    def _next(self, pattern: re.Pattern[str], hint: re.Pattern[str], pos: int) -> re.Match[str] | None:
        """The first match of `pattern` at or after `pos`, tried only on lines that hold one of its literal words
        (`hint`, found in the lower-cased text at the speed of a plain scan): a log of nothing but NCCL chatter or
        tracebacks costs one fast pass instead of the full pattern at every position."""
        low = self._low()
        if not low:
            return pattern.search(self.text, pos)
        n = len(self.text)
        while True:
            h = hint.search(low, pos)
            if h is None:
                return None
            start = self.text.rfind("\n", 0, h.start()) + 1
            end = self.text.find("\n", h.end())
            end = n if end < 0 else end
            m = pattern.search(self.text, max(pos, start), end)
            if m is not None:
                return m
            pos = end + 1

    def _progress(self, pos: int) -> int | None:
        while True:
            m = self._next(_PROGRESS, _PROGRESS_HINT, pos)
            if m is None:
                return None
            start, end = self._line(m)
            if start < pos:  # the rest of a line that began before pos
                pos = end + 1
                continue
            line = self.text[start:end]
            last = clean_segments(line)[-1] if line else ""
            ignored = last.startswith("Exception ignored in") and "atexit" not in last and "name='<std" not in last
            if start not in self.hit_lines and (ignored or _RECOVERED.search(last)
                                                or not _NOT_PROGRESS.search(last)):
                return start
            pos = end + 1

    def _finite_loss(self, pos: int) -> int | None:
        while True:
            m = self._next(_FINITE_LOSS, _LOSS_HINT, pos)
            if m is None:
                return None
            start, end = self._line(m)
            if start >= pos and not _NAN_VALUE.search(self.text, start, end):
                return start
            pos = end + 1
