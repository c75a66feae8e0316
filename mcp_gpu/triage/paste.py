"""How a pasted log reached us, undone before it is judged: quoting, indentation, a prefix on every line, hard wraps.

People paste logs as they have them: quoted in Markdown (`> `), indented as a code block (four spaces, a tab),
through `docker compose logs` (`trainer-1  | `), Ray's worker prefix (`(RayTrainWorker pid=1234) `), a CI viewer or
a `tee` that tags each line, or wrapped at a terminal's width. The rules read lines as a program printed them (a
traceback's exception line at column 0), so the verdict must not depend on any of that. `scan.clean_segments` knows
the collectors' prefixes that vary from line to line (timestamps, `srun -l`, `[rankN]:`); this module finds the ones
that every line shares without knowing them in advance.
"""

from __future__ import annotations

import html
import itertools
import re
from collections import Counter

from mcp_gpu.triage.scan import INDEX, clean_segments

PREFIX_SAMPLE = 2_000  # non-blank lines read to find a shared prefix (linear: the rest are only cut)
PREFIX_SHARE = 0.8  # of the sampled lines, the share that must carry the prefix
PREFIX_MIN_LINES = 3
PREFIX_HEAD = 80  # characters of each line looked at
# A decoration ends at a separator and a space: `| `, `) `, `] `, `> `, `- `, and `: ` only after a bracket or a
# number (`0: `, `[1,0]<stderr>:` of mpirun --tag-output with or without a space); `"loss": ` and `NVRM: ` are
# what programs print.
_BOUNDARY = frozenset("|)]>-#")
_BEFORE_COLON = frozenset(")]>0")
# A prefix that names training progress is the program's own text (`step 12 | loss ...`, a progress bar's
# ` 45%|#### | `), not a decoration.
_PROGRESS_WORDS = re.compile(r"\b(?:step|steps|epoch|iter|iteration|batch|loss)\b|%\||it/s|s/it", re.IGNORECASE)
# A decoration holds a number, a bracket, a pipe or a comment mark (`[stderr] `, `trainer-1 | `, `(pid=12) `, `# `
# of a log pasted as comments under code); a bare word and a colon (`INFO: `, `NVRM: `) is what the program printed.
_DECORATION = re.compile(r"[0|(\[#]")
_QUOTES = re.compile(r"[\"']")  # quoted keys are the program's output


def normalise(text: str) -> str:
    """The paste as the program printed it (a web page's escapes and typography, quote marks, a shared prefix, a
    code block's indent, a blank line after every line and hard wraps gone)."""
    return unwrap_frames(unwrap_tail(unwrap(undouble(dedent(strip_shared_prefix(unquote(unweb(text))))))))


# A log copied from a rendered web page (a forum post, a scraped thread, an HTML report) carries what the page did to
# it: entities where the program printed `<`, `>`, `"`, `'`, `&`; curly quotes where it printed straight ones; no-break
# and thin spaces where it printed spaces; zero-width characters. Rules are written against what programs print.
_ENTITY = re.compile(r"&(?:quot|gt|lt|amp|apos|nbsp|#0*39|#x0*27|#0*34|#x0*22|#0*60|#0*62);")
_TYPOGRAPHY = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " ",
                             "\u2009": " ", "\u202f": " ", "\u2007": " ", "\u200b": None, "\ufeff": None})
_TYPOGRAPHIC_CHARS = "\u2018\u2019\u201c\u201d\u00a0\u2009\u202f\u2007\u200b\ufeff"


def unweb(text: str) -> str:
    """The text as the program printed it before a web page escaped and typeset it."""
    if "&" in text and _ENTITY.search(text):
        text = html.unescape(text)
    if any(ch in text for ch in _TYPOGRAPHIC_CHARS):  # a few substring tests run faster than one class search
        text = text.translate(_TYPOGRAPHY)
    return text


DOUBLE_SHARE = 0.9  # of the gaps between non-blank lines, the share that must be one blank line


def undouble(text: str) -> str:
    """A paste with a blank line after every line (what copying some viewers' output gives) loses the blank lines,
    so that a traceback's frames and its exception line are neighbours again. A log that only has blank lines here
    and there keeps them."""
    if "\n\n" not in text:
        return text
    sample = text[:WRAP_SAMPLE_CHARS].split("\n")  # decided on the head, so a long log that is not doubled costs little
    gaps = blank = 0
    for prev, line in itertools.pairwise(sample):
        if prev.strip() and not line.strip():
            blank += 1
        elif prev.strip() and line.strip():
            gaps += 1
    if blank < PREFIX_MIN_LINES or blank < DOUBLE_SHARE * (blank + gaps):
        return text
    return "\n".join(line for line in text.split("\n") if line.strip())


_QUOTED = re.compile(r"^> ?", re.MULTILINE)


def unquote(text: str) -> str:
    """A log pasted as a Markdown quote (every line behind `> `) is read without the quote marks."""
    lines = text.count("\n") + 1
    return _QUOTED.sub("", text) if text.startswith(">") and text.count("\n>") + 1 >= lines // 2 else text


_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r" +")


def _shape(line: str) -> str:
    """The line's head with every number and every run of spaces made one character: `pid=1234) ` and `pid=7) `,
    `trainer-1  | ` and `trainer-12 | ` have one shape."""
    return _SPACES.sub(" ", _DIGITS.sub("0", line[:PREFIX_HEAD]))


def _shared(shapes: list[str]) -> str:
    """The longest head that at least PREFIX_SHARE of the shapes start with, cut back to a decoration's end."""
    need = max(PREFIX_MIN_LINES, int(PREFIX_SHARE * len(shapes) + 0.999))
    best = ""
    for n in range(1, PREFIX_HEAD + 1):
        top = Counter(s[:n] for s in shapes if len(s) >= n).most_common(1)
        if not top or top[0][1] < need:
            break
        head = top[0][0]
        best = head
    # the first "<separator> ": the least that can be a decoration (a timestamp in brackets, a container name),
    # never the program's own words after it (`[12.3] NVRM: Xid ...` keeps `NVRM: `)
    for end in range(2, len(best) + 1):
        if best[end - 1] == " " and (best[end - 2] in _BOUNDARY or
                                     (best[end - 2] == ":" and end >= 3 and best[end - 3] in _BEFORE_COLON)):
            return best[:end]
        if best[end - 2:end] == ">:":  # Open MPI's tag is followed by the text itself: `[1,0]<stderr>:Traceback`
            return best[:end]
    return ""


def strip_shared_prefix(text: str) -> str:
    """Cut a decoration nearly every line starts with (`trainer-1  | `, `(RayTrainWorker pid=12) `, `[stderr] `)."""
    head = text[: 4 * PREFIX_SAMPLE * PREFIX_HEAD].split("\n")  # the sample, without splitting a 50 MB log
    sample = [line for line in head[: 4 * PREFIX_SAMPLE] if line.strip()][:PREFIX_SAMPLE]
    if len(sample) < PREFIX_MIN_LINES:
        return text
    prefix = _shared([_shape(line) for line in sample])
    if not _DECORATION.search(prefix) or _PROGRESS_WORDS.search(prefix) or _QUOTES.search(prefix):
        return text
    # one pass over the text: the shape back as a pattern (a number any number, a space run any run), cut through
    # the separator and one space so that what the program indented (a traceback's frames) stays indented
    parts = [r"\d+" if ch == "0" else " +" if ch == " " else re.escape(ch) for ch in prefix[:-1]]
    parts.append(re.escape(prefix[-1]))
    return re.sub("(?m)^" + "".join(parts), "", text)


_AT_COLUMN_0 = re.compile(r"\n[^\s]")


def dedent(text: str) -> str:
    """A paste indented as a code block: the indent every non-blank line shares (the first line, often copied
    from its first character, may lack it) is removed. A paste of traceback frames alone keeps its shape."""
    if _AT_COLUMN_0.search(text):
        return text  # the common case, found at C speed: a line after the first starts at column 0
    lines = text.split("\n")
    body = [line for line in lines[1:] if line.strip()]
    if len(body) < PREFIX_MIN_LINES:  # a short paste: its first line counts too
        body = [line for line in lines if line.strip()]
    if not body:
        return text
    indent = min(len(line) - len(line.lstrip(" \t")) for line in body)
    if indent == 0:
        return text
    least = [line.lstrip(" \t") for line in body if len(line) - len(line.lstrip(" \t")) == indent]
    if all(line.startswith('File "') for line in least):
        return text  # frames are indented by their nature: this is a traceback without its header
    first = lines[0]
    first_indent = len(first) - len(first.lstrip(" \t"))
    return "\n".join([first[min(indent, first_indent):], *(line[indent:] if line.strip() else "" for line in lines[1:])])


WRAP_MIN_WIDTH = 60  # narrower "wrapping" is just short lines
WRAP_MIN_LINES = 3
WRAP_SHARE = 0.3  # of the lines at least WRAP_MIN_WIDTH long, the share that must have exactly the wrap width
WRAP_SAMPLE_CHARS = 2_000_000
_BAR_LIKE = re.compile(r"\|[^|]*\|| it/s| s/it|\d+/\d+ \[")


def unwrap(text: str) -> str:
    """A paste hard-wrapped at a fixed width (a terminal, a console, a CI viewer) cuts messages in two. The width is
    found from the text (many lines of exactly one length of at least WRAP_MIN_WIDTH, progress bars not counted);
    a line of that width is joined with the next only where the join makes a rule's words whole, so that lines
    which merely happen to share a length (NCCL chatter, tables) stay as they are."""
    # the width is found from a sample (the head of a long log), so a log that was not wrapped costs little
    sample = text[:WRAP_SAMPLE_CHARS].split("\n")
    widths = Counter(len(line) for line in sample if len(line) >= WRAP_MIN_WIDTH and not _BAR_LIKE.search(line))
    if not widths:
        return text
    width, count = widths.most_common(1)[0]
    if count < WRAP_MIN_LINES or count < WRAP_SHARE * sum(widths.values()):
        return text
    lines = text.split("\n")
    # only a line whose length is a multiple of the width can have been cut: those are found in one comprehension,
    # and a log where none is joined comes back as it was, without being put together again
    out: list[str] = []
    done = 0  # lines[:done] are in `out` or were joined into it
    for i in [i for i, n in enumerate(map(len, lines)) if n >= width and n % width == 0]:
        if i < done:
            continue
        line, j = lines[i], i
        while len(line) >= width and len(line) % width == 0 and j + 1 < len(lines) and (
                _wrapped_into(line[-width:], lines[j + 1])):
            j += 1
            line += lines[j]
        if j > i:
            out += lines[done:i]
            out.append(line)
            done = j + 1
    if not done:
        return text
    return "\n".join(out + lines[done:])


def _joins_words(head: str, tail: str) -> bool:
    """Whether a rule's needle spans the cut between `head` and `tail` (found in neither alone)."""
    if not head or not tail or _BAR_LIKE.search(head):
        return False
    low_head, low_tail = head[-60:].lower(), tail[:60].lower()
    edge = low_head + low_tail + "\n"
    # the common case first: no needle found in the join runs across the cut
    if not INDEX.crosses(edge, len(low_head)):
        return False
    return bool(INDEX.needles_in(edge) - INDEX.needles_in(low_head + "\n") - INDEX.needles_in(low_tail + "\n"))


# what starts a new record rather than continuing a cut one: a timestamp, a log level, a rank or bracket prefix, a
# traceback frame or header, an exception name, a progress bar, a shell prompt
RECORD_OPENING = 6
SHORT_EVENT = 40  # characters: a line this short that a rule reads as an event is no wrapped tail
_RECORD_START = re.compile(r"^(?:\s*File \"|\s|\[|\(|\d{2,4}[-/:.]\d|[A-Z][A-Z]+\b|[IWEF]\d{4} |Traceback|"
                           r"(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Warning)\b|\w+@\S+[:$#]|[$#>] |\d+%\||[\w.-]+:\d+:\d+ )")


def _wrapped_into(head: str, tail: str) -> bool:
    """Whether a line after one of exactly the wrap width is the rest of it: not when it opens the way the cut line
    does (rows of one source share their opening: a host:pid prefix, a timestamp's form, a table's first column);
    then when the join makes a rule's words whole, or when it starts like no new record and is no event alone."""
    if head[:RECORD_OPENING] == tail[:RECORD_OPENING]:
        return False
    if _joins_words(head, tail):
        return True
    # a short capitalised line that is a whole event by itself (bash's `Killed`, `Segmentation fault (core dumped)`
    # after rows that merely share a length) is its own; a wrapped tail starts mid-sentence
    return bool(tail.strip()) and not _RECORD_START.match(tail) and not (
        len(tail) <= SHORT_EVENT and tail[:1].isupper() and _an_event(tail))


def _an_event(line: str) -> bool:
    """Whether a rule reads `line` alone as an event."""
    return any(rule.pattern.search(line) for rule in INDEX.candidates(INDEX.needles_in(line.lower() + "\n"))
               if rule.role != "ignore")


# a traceback frame cut before its end: Python's `  File "/path/x.py", line 3, in f` with the quote still open, or an
# IPython frame `path.py in f(a, b` with the parenthesis still open, continued at column 0 on the next line. Each
# pattern starts with a literal, which the regex engine finds at C speed; what comes before it on the line (only
# blanks before `File "`, one word before `.py in `) is checked in Python for the few places found.
_CUT_PY_FRAME = re.compile(r'File "[^"\n]*\n(?=\S)')
_CUT_IPY_FRAME = re.compile(r"\.py in \w+\([^)\n]*\n(?=\S)")


def unwrap_frames(text: str) -> str:
    """Frames a paste wrapped at any width are joined with their rest (whatever the width, a frame line whose quote
    or parenthesis is still open was cut), so that the traceback reads to its exception line."""
    cuts = []  # the newlines to remove
    for rx, one_word in ((_CUT_PY_FRAME, False), (_CUT_IPY_FRAME, True)):
        for m in rx.finditer(text):
            before = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
            if (bool(before) and not any(c.isspace() for c in before)) if one_word else not before.strip():
                cuts.append(m.end() - 1)
    if not cuts:
        return text
    pieces, at = [], 0
    for cut in sorted(set(cuts)):
        pieces.append(text[at:cut])
        at = cut + 1
    pieces.append(text[at:])
    return "".join(pieces)


TAIL_LINES = 60  # the end of a paste, where the crash is, read for a cut at no fixed width
_FRAGMENT = re.compile(r"^[a-z0-9_]")  # a line that starts mid-word: the rest of the line above


def unwrap_tail(text: str) -> str:
    """A long line near the end cut at no fixed width (a viewer wrapping one message, tabs making widths unequal)
    and continued on the next line mid-word (`... cudaMalloc fail` / `ed: out of memory`): joined when the join
    makes a rule's words whole. Only the last TAIL_LINES lines are looked at, so the cost does not grow with the log."""
    cut = len(text)
    for _ in range(TAIL_LINES):  # where the last TAIL_LINES lines start, without splitting the whole log
        cut = text.rfind("\n", 0, cut)
        if cut < 0:
            break
    start = cut + 1
    tail_text = text[start:]
    lines = tail_text.split("\n")
    out: list[str] = []
    i = joined = 0
    while i < len(lines):
        line = lines[i]
        while i + 1 < len(lines) and len(line) >= WRAP_MIN_WIDTH:
            # the continuation as the program printed it: a collector's timestamp or rank prefix is not part of it
            segs = clean_segments(lines[i + 1])
            tail = segs[0] if segs else ""
            if not (_FRAGMENT.match(tail) and _joins_words(line[-60:], tail)):
                break
            i += 1
            joined += 1
            line += tail
        out.append(line)
        i += 1
    return text[:start] + "\n".join(out) if joined else text  # unchanged, the long log is not copied

