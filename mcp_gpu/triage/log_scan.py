"""Reading one log text: every line holding a rule's needles is judged in order, tracebacks are walked to their
final exception line, pasted `df` tables and the fp16 loss-scale series are collected. The engine (`engine.py`)
decides what the hits mean; this module only finds them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mcp_gpu.models import SEVERITY_RANK, Severity
from mcp_gpu.triage.guesses import frame_hint, topic_rule
from mcp_gpu.triage.lexicon import topic
from mcp_gpu.triage.rules import (
    CONFIG_KEY,
    CONFIG_MAPPING,
    DF_DISK,
    DF_FULL_PERCENT,
    DF_INODES,
    GENERIC_TRACEBACK,
    LOG_ERROR,
    NAN_ASSERT,
    QUOTA_BLOCKS,
    QUOTA_FILES,
    TRUNCATED_THREAD,
    TRUNCATED_TRACEBACK,
    Role,
    Rule,
)
from mcp_gpu.triage.rules_software import PICKLE
from mcp_gpu.triage.scan import INDEX, LONG_LINE, clean_segments, is_tb_header, needle_lines, tb_rest
from mcp_gpu.triage.tables import (
    DF_HEADER,
    DF_INODE_COLUMNS,
    DF_ROW,
    QUOTA_HEADER,
    QUOTA_ROWS,
    QUOTA_TRIPLE,
    quota_reached,
)
from mcp_gpu.untrusted import clean_line as clean_remote

EVIDENCE_CHARS = 320


JUDGE_CHARS = LONG_LINE  # of a longer line, the first and last 2,000 characters are judged
TRACEBACK_WALK = 400  # lines a traceback may span before its final exception line
WRAP_MIN = 70  # a frame or code line at least this long may have been wrapped by the terminal or the paste
WRAP_LINES = 3  # wrapped tails skipped per traceback at most
# what an exception line looks like: a (dotted) name, then ':' or the end of the line
_EXC_LOOK = re.compile(r"^(?:[\w.]+: )?(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?::|$)")


# a traceback from a thread that only feeds a queue (multiprocessing's feeder): the process itself goes on
_BACKGROUND_FRAME = re.compile(r"multiprocessing[/\\]queues\.py\S*, line \d+, in _feed\b")


# (not a logger that files everything its program writes to stderr under ERROR, FastChat's
# `... | ERROR | stderr | INFO:     Shutting down`: the record inside it has its own, lower level)
_LOG_ERROR = re.compile(r"^(?!.*\b(?:ERROR|FATAL|CRITICAL)\s*\|\s*std(?:err|out)\s*\|\s*(?:INFO|DEBUG|TRACE|WARN(?:ING)?)\b)"
                        r"\s*(?:\[?(?:ERROR|FATAL|CRITICAL|Error|Fatal)\]?[:\s]|[EF]\d{4} \d\d:\d\d:\d\d|"
                        r"[\w.-]+: (?:error|fatal): |.*?\[E(?:\]|:| [\w.]+\.(?:cpp|cc|h|py):\d+\])|"
                        r".*?(?:\s|\[|\|)(?:ERROR|FATAL|CRITICAL)(?:\]|:|\s|\|)|.*?\[(?:Error|Fatal|Critical)\])")


_ANNOUNCES = re.compile(r"\b(?:ERROR|WARN(?:ING)?|CRITICAL|[Ee]rror|[Ww]arning|[Ee]xception|[Cc]aught|[Ii]gnor\w*|"
                        r"[Rr]etry\w*|[Ss]kipp\w*|[Ff]ailed)\b|^\s*[EWF]\d{4} |:\s*$")


# A line that says how the program copes with what it reports ("..., skipping", "falling back to", "using X
# instead", "ignoring"): reported and passed over, like a caught exception. NaN/inf lines are judged as a trend
# instead (a skipped update once is coping, skipped updates without end are the failure).
COPES = re.compile(r"(?:[,;:.(]\s*|\b)(?:skipping\b(?! (?:updating|update|step|batch))|skipped\b|"
                   r"[Ff]alling back\b|[Ff]all(?:s|ing)? back to\b|[Ff]allback to\b|using \S.{0,40}\binstead\b|ignoring\b|"
                   r"will be ignored|is ignored|continuing\b|will retry)", re.IGNORECASE)


_FINITE_CHECK = re.compile(r"isnan|isinf|isfinite|\bnan\b|\binf\b", re.IGNORECASE)


_EXC_LINE = re.compile(r"^(?:[\w.]+: )?(?:(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit)|"
                       r"[a-z_]\w*\.error)(?: \(see above for traceback\))?(?::\s|:?$)")


# the line before a thread's traceback
_THREAD_HEADER = re.compile(r"^(?:Exception in thread \S.*|Thread [\w.-]+):$")


# a frame line of a traceback: the line after it is the frame's source code, not something that happened
_FRAME_LINE = re.compile(r'^\s*File "[^"]*", line \d+')

# IPython/Jupyter print the exception's name on the header line (`TimeoutError    Traceback (most recent call
# last)`) and their frames at column 0 (`File ~/env/lib/x.py:1348, in f(...)`, `/opt/lib/x.py in f(...)`) with
# numbered source lines and `->` arrows: a cut-off notebook traceback still names its exception in the header.
_IPY_HEADER = re.compile(r"^([A-Za-z_][\w.]*)\s{2,}Traceback \(most recent call last\)")
# (IPython before 8 names a cell's frame `<ipython-input-6-416281258c80> in <module>`)
_IPY_FRAME = re.compile(r"^(?:File \S.*:\d+, in \S|\S+\.py(?:x|c)? in \S+\(|(?:Cell|Input) In\s*\[|<ipython-input-[\w-]+> in \S|"
                        r"\s*(?:-+>|->)?\s*\[?\d+\]?\s|\s*\[\.\.\. skipping|-{20,}$)")

# a generic exception type whose message may say nothing (`OSError: [Errno 0] Error`): where it was raised tells more
_GENERIC_TYPES = re.compile(r"^(?:[\w.]+\.)?(?:OSError|IOError|EnvironmentError|RuntimeError|SystemError|Exception|"
                            r"error|Error|Empty)\b")  # (`_queue.Empty`: a timed-out get, named by its caller)


# the deepest frame inside the data loader's own machinery (its pin-memory thread, a worker's loop, TF's queue
# runners): whatever the exception's type, the loader broke, not the model code (a dataset's own bug raised in a
# worker is re-raised as "Caught X in DataLoader worker process", a rule of its own)
_LOADER_INTERNAL = re.compile(r"torch[/\\]utils[/\\]data[/\\]_utils[/\\](?:pin_memory|worker)\.py|queue_runner_impl\.py")

# a DataLoader creating its worker processes (`_MultiProcessingDataLoaderIter.__init__` -> `w.start()`), and the
# exception pickling raises when an object cannot be sent to a spawned process
_LOADER_START = re.compile(r"torch[/\\]utils[/\\]data[/\\]dataloader\.py")
_PICKLE_FAIL = re.compile(r"[Cc]an(?:'t|not) pickle\b|PicklingError|[Cc]an't get attribute '[^']+' on <module")

# an exception name and message glued to the end of a frame's code line: `    main(args)RuntimeError: [!] NaN loss`
# (right after a call's closing bracket: an exception named inside the code, `except X:`, is code)
_GLUED_EXC = re.compile(r"(?<=[)\]])([A-Z]\w*(?:Error|Exception)):\s+\S")
# an exception line with no message: the message is on the lines below it (a multi-line `raise X("""...""")`)
_EMPTY_EXC = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception):?\s*$")
EXC_MESSAGE_LINES = 4
VERDICT_CACHE = 4096  # distinct judged lines whose matched rule is remembered, per log
FRAMES_AT_END = 60  # lines read back from the end of a paste for traceback frames with no header


# a line of Python's warnings module: `path.py:52: UserWarning: message` (or the category alone at its start)
_PY_WARNING = re.compile(r"^\s*(?:\S+\.py:\d+: )?(?:[A-Za-z_]\w*\.)*[A-Z]\w*Warning: ")

# a log record at warning level (no error word): what it introduces was reported and passed over
_WARNING_ONLY = re.compile(r"\b(?:WARN(?:ING)?|[Ww]arning)\b|^\s*W\d{4} ")
_WORSE_THAN_WARNING = re.compile(r"\b(?:ERROR|CRITICAL|FATAL|[Ee]rror|[Ff]atal|[Ff]ailed)\b")


_WORKER_EXIT = re.compile(r"exitcode\s*:\s*(-?\d+)")


_SCALE = re.compile(r"(?:reducing (?:loss scale )?to|loss[ _]scale(?: to)?:?|scale(?:r)? to:?|new scale:?|scale =)\s*"
                    r"([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)", re.IGNORECASE)


@dataclass
class _Hit:
    rule: Rule
    index: int  # character offset of the line in the log: the order of events
    line: str
    severity: Severity
    role: Role
    final: bool = False  # the final exception line of a traceback
    survived: bool = False  # training went on after it
    uncaught: bool = False  # ended a traceback nothing announced as caught: the process died there
    exception: bool = False  # a bare exception line (`SomeError: ...` at column 0) outside a walked traceback

    @property
    def cls(self) -> str:
        return self.rule.cls

    @property
    def fatal(self) -> bool:
        return self.rule.fatal or self.uncaught


def _match(line: str, found: set[str] | None = None) -> Rule | None:
    """The first rule (in table order) whose regex matches `line`; only rules whose needles it holds are tried."""
    for rule in INDEX.candidates(found if found is not None else INDEX.needles_in(line.lower() + "\n")):
        if rule.pattern.search(line):
            return rule
    return None


def _trim(line: str) -> str:
    """An evidence line: remote text, so escape sequences and control characters go (`untrusted.clean_line`)."""
    line = clean_remote(line).strip()
    return line if len(line) <= EVIDENCE_CHARS else line[: EVIDENCE_CHARS - 1] + "…"


class _Scan:
    """The hits of one log text, in order, with the tracebacks walked and the overflow series collected."""

    def __init__(self, text: str, crashed: bool, complete: bool) -> None:
        self.text = text
        # a bare exception line (no traceback header) ended the run if the process crashed, or if this is the
        # whole log and nothing came after it; in a batch of a running job's lines it may be a logged warning
        self.bare_exceptions = crashed or complete
        self.hits: list[_Hit] = []
        self.worker_exits: list[str] = []
        self.overflow: list[tuple[int, float | None]] = []
        self.hit_lines: set[int] = set()
        self.df_bytes_max: int | None = None  # fullest real filesystem in a pasted `df` (bytes) table
        self.df_inodes_max: int | None = None  # and in a pasted `df -i` table
        self._skip_to = 0
        # the rule each distinct (line, needles) pair matched: a log of one error repeated across ranks, steps or
        # retries is judged once per distinct line, not once per copy (bounded, and per log)
        self._verdicts: dict[tuple[str, frozenset[str] | None], Rule | None] = {}
        for line in needle_lines(text):
            if line.start < self._skip_to:
                continue  # a frame of a traceback already walked
            self._judge_line(line.start, line.end, line.found)
        if complete and self._skip_to < len(text):
            self._frames_at_end()

    def _frames_at_end(self) -> None:
        """A whole paste that ends in traceback frames with no header above them (copied from the middle of a
        traceback) ended inside that traceback: the run died there, as when a walked traceback is cut off."""
        frames: list[str] = []
        pos = len(self.text)
        start = pos
        for _ in range(FRAMES_AT_END):
            line_start = self.text.rfind("\n", 0, max(pos - 1, 0)) + 1
            raw = self.text[line_start:pos].rstrip("\n")
            segs = clean_segments(raw)
            line = segs[-1] if segs else ""
            if line.strip():
                if _FRAME_LINE.match(line):
                    frames.append(line.strip())
                elif line[:1] not in (" ", "\t"):
                    break
            start, pos = line_start, line_start
            if line_start == 0:
                break
        if not frames or any(h.index >= start for h in self.hits):
            return
        self.hits.append(_Hit(TRUNCATED_TRACEBACK, start, f"(the log ends inside a traceback) {frames[0]}", "error",
                              "cascade"))
        hint = frame_hint(list(reversed(frames)))
        if hint is not None:
            self.hits.append(_Hit(hint[0], start, hint[1], "warn", "cause"))

    def _frames_above(self, index: int) -> list[str]:
        """The traceback frames right above the line at `index` (a paste of frames and their exception, cut above
        the header), nearest first."""
        frames: list[str] = []
        pos = index
        for _ in range(FRAMES_AT_END):
            if pos <= 0:
                break
            line_start = self.text.rfind("\n", 0, pos - 1) + 1
            segs = clean_segments(self.text[line_start:pos - 1])
            line = segs[-1] if segs else ""
            if _FRAME_LINE.match(line):
                frames.append(line.strip())
            elif line.strip() and line[:1] not in (" ", "\t"):
                break
            pos = line_start
        return frames

    def _ignored_before(self, header: int) -> bool:
        """Whether the line before a traceback header says Python printed the exception and went on."""
        prev_end = header - 1
        if prev_end <= 0:
            return False
        prev_start = self.text.rfind("\n", 0, prev_end) + 1
        segs = clean_segments(self.text[prev_start:prev_end])
        head = (segs[-1] if segs else "")[:40]
        # "Exception ignored in": Python printed it and went on; "Error in atexit._run_exitfuncs": the interpreter
        # was already exiting when a cleanup hook failed
        return "Exception ignored in" in head or "Error in atexit._run_exitfuncs" in head

    def _thread_before(self, header: int) -> bool:
        """Whether the traceback is a thread's (`Exception in thread X:`, `Thread SenderThread:`): a thread dying
        does not end the process; only what follows tells whether the run went on."""
        prev = self._previous_line(header)
        segs = clean_segments(prev) if prev is not None else []
        return bool(segs) and _THREAD_HEADER.match(segs[-1].strip()) is not None

    def _announced_before(self, header: int) -> bool:
        """Whether the line before a traceback header is a log record or a message introducing it (how a caught
        and logged exception is printed: `logger.exception`, "Exception in thread", "Retrying after error:"). An
        uncaught exception's traceback follows whatever the program printed last, often a progress line; progress
        printed after it is then the rest of a buffered stdout, flushed at exit, not training going on."""
        prev = self._previous_line(header)
        if prev is None:
            return False
        segs = clean_segments(prev)
        return _ANNOUNCES.search(segs[-1] if segs else prev) is not None

    def _copes_after(self, pos: int) -> bool:
        """Whether the first line after a traceback's exception says the program copes with it ("Apex not found,
        falling back to native AMP", "..., skipping this file"): the program printed the traceback itself and went on.
        It is still a failure unless training progress follows (`recovery.mark_survived`); only no longer a death."""
        while pos < len(self.text):
            raw, end = self._physical(pos)
            if raw.strip():
                return not is_tb_header(raw.strip()) and COPES.search(raw) is not None
            pos = end + 1
        return False

    def _with_message(self, line: str, pos: int) -> tuple[str, int]:
        """An exception line with no message, joined with the message lines printed below it (up to a blank line
        or a new traceback); returns the joined text and where the scan goes on."""
        parts = [line.strip()]
        for _ in range(EXC_MESSAGE_LINES):
            if pos >= len(self.text):
                break
            raw, end = self._physical(pos)
            if not raw.strip() or is_tb_header(raw.strip()) or _FRAME_LINE.match(raw):
                break
            parts.append(raw.strip())
            pos = end + 1
        return " ".join(parts), pos

    def _optional_import(self, header: int, hits: list[_Hit]) -> bool:
        """A missing module reported under a warning (`WARNING: triton is not available` + its ImportError): an
        optional dependency probed and passed over, not the run failing to start."""
        if not hits or any(h.rule.id not in ("config.module", "config.import") for h in hits):
            return False
        prev = self._previous_line(header)
        return prev is not None and _WARNING_ONLY.search(prev) is not None and not _WORSE_THAN_WARNING.search(prev)

    def _after_frame_line(self, start: int) -> bool:
        """Whether the line before the one at `start` is a traceback frame (`File "...", line N, in f`)."""
        prev = self._previous_line(start)
        segs = clean_segments(prev) if prev is not None else []
        return bool(segs) and _FRAME_LINE.match(segs[-1]) is not None

    def _previous_line(self, start: int) -> str | None:
        """The last non-blank line before the line starting at `start`."""
        prev_end = start - 1
        while prev_end > 0:
            prev_start = self.text.rfind("\n", 0, prev_end) + 1
            prev = self.text[prev_start:prev_end]
            if prev.strip():
                return prev
            prev_end = prev_start - 1
        return None

    def _physical(self, start: int) -> tuple[str, int]:
        end = self.text.find("\n", start)
        end = len(self.text) if end < 0 else end
        return self.text[start:end], end

    def _judge_line(self, start: int, end: int, found: set[str]) -> None:
        raw = self.text[start:end]
        if "exitcode" in found:
            self.worker_exits += _WORKER_EXIT.findall(raw)
        segments = clean_segments(raw)
        if segments and segments[0][:1] in " \t" and self._after_frame_line(start):
            return  # the source line a traceback frame quotes (`raise OutOfMemoryError(...)`): code, not an event
        if len(segments) == 1 and _FRAME_LINE.match(segments[0]):
            # a frame line of a traceback pasted without its header: a place in the code, whatever its function is
            # named (`in _overflow_check_and_loss_scale_update`, `in _check_nan`), not an event
            return
        if "quota" in found and len(segments) == 1 and (head := QUOTA_HEADER.match(segments[0])):
            self._walk_quota(end + 1, head.start(1))
            return
        if "mounted on" in found and len(segments) == 1 and (df := DF_HEADER.match(segments[0])):
            self._walk_df(end + 1, inodes=df.group(1) == "IUse%" or DF_INODE_COLUMNS.search(segments[0]) is not None)
            return
        for seg in segments:
            rest = tb_rest(seg)
            if rest is None:
                continue
            if rest:  # a traceback pasted on one line: judge the whole of it as its final line
                self._skip_to = end + 1
                self._judge(start, rest, final=True, found=None)
            else:
                self._walk_traceback(start, end + 1)
            return
        for seg in segments:
            if seg.strip():
                # a launcher prefix only removes text, so the line's needles still cover the segment
                self._judge(start, seg, final=False, found=found if len(segments) == 1 and "\r" not in raw else None)

    def _walk_df(self, pos: int, *, inodes: bool) -> None:
        """The rows of a pasted `df` table: a real filesystem at 98 % or more is full (of bytes, or of inodes)."""
        for _ in range(200):
            if pos >= len(self.text):
                break
            raw, end = self._physical(pos)
            segs = clean_segments(raw)
            row = DF_ROW.match(segs[-1]) if segs else None
            if row is None:
                break
            device, percent, mount = row.groups()
            real = not device.startswith("/dev/loop") and not mount.startswith("/snap")
            if real and not inodes:
                self.df_bytes_max = max(self.df_bytes_max or 0, int(percent))
            if real and inodes:
                self.df_inodes_max = max(self.df_inodes_max or 0, int(percent))
            if int(percent) >= DF_FULL_PERCENT and real:
                self.hits.append(_Hit(DF_INODES if inodes else DF_DISK, pos, raw.strip(), "critical", "cause"))
                self.hit_lines.add(pos)
            pos = end + 1
        self._skip_to = pos

    def _walk_quota(self, pos: int, files_col: int) -> None:
        """The rows of a pasted quota report: a row whose file count reached its quota or limit (or is starred)
        is out of inodes; one whose block usage did is out of bytes. A row holds the block triple, then the file
        triple; a row with one triple is placed by its column (a long filesystem name may sit on a line of its own)."""
        for _ in range(QUOTA_ROWS):
            if pos >= len(self.text):
                break
            raw, end = self._physical(pos)
            segs = clean_segments(raw)
            row = segs[-1] if segs else ""
            if not row.strip():
                break
            triples = list(QUOTA_TRIPLE.finditer(row))
            if not triples and any(ch.isdigit() for ch in row) and "quota" not in row.lower():
                break  # the table ended: a log line with numbers in it
            if len(triples) >= 2:
                placed = [(triples[0], QUOTA_BLOCKS), (triples[1], QUOTA_FILES)]
            else:
                placed = [(t, QUOTA_FILES if t.start() >= files_col - 2 else QUOTA_BLOCKS) for t in triples]
            for triple, rule in placed:
                if quota_reached(triple):
                    self.hits.append(_Hit(rule, pos, raw.strip(), "critical", "cause"))
                    self.hit_lines.add(pos)
            pos = end + 1
        self._skip_to = pos

    def _walk_traceback(self, header: int, pos: int) -> None:
        """From just after a traceback header to its final exception line, which is judged (the frames are not).

        A log that ends inside a traceback ended with the crash: its last frame stands for the exception."""
        text = self.text
        last_frame = ""
        frames: list[str] = []
        ignored = self._ignored_before(header)
        header_line, _ = self._physical(header)
        hsegs = clean_segments(header_line)
        ipy = _IPY_HEADER.match(hsegs[-1].strip()) if hsegs else None
        # a thread's traceback (a queue feeder, `Exception in thread X:`): not the process dying; progress decides
        background = self._thread_before(header)
        prev_len, wrapped = 0, 0  # length of the last frame/code line; wrapped tails skipped so far
        # a traceback printed as an indented block (uv's and pip's `[stderr]` of a failed build, a tool quoting a
        # child's error): its lines are read with the header's indent taken off, so its exception line is found
        head = hsegs[-1] if hsegs else ""
        indent = head[:len(head) - len(head.lstrip(" \t"))]
        last_code = ""  # the last code line a frame quoted
        after_flat_frame = False  # the previous line was a frame printed at column 0
        for _ in range(TRACEBACK_WALK):
            if pos >= len(text):
                self._skip_to = pos
                if last_frame:
                    # a fatal sign, but it names no cause: anything named beats it
                    self.hits.append(_Hit(TRUNCATED_TRACEBACK if not background else TRUNCATED_THREAD, header,
                                          f"(the log ends inside a traceback) {last_frame}", "error", "cascade",
                                          survived=ignored or background))
                named = False
                if ipy is not None:  # the notebook's header named the exception the paste stops short of
                    before = len(self.hits)
                    self._judge(header, ipy.group(1), final=True, found=None)
                    for h in self.hits[before:]:
                        h.survived, h.uncaught = ignored, not (ignored or background)
                    named = not _GENERIC_TYPES.match(ipy.group(1)) or any(
                        h.rule is not GENERIC_TRACEBACK for h in self.hits[before:])
                # (cut on a module's own frame, `File "x.py", line 55, in <module>`, right under an import: the
                # paste stopped inside the import chain as surely as on the import statement itself)
                code = last_code if last_frame.startswith("File ") and last_frame.endswith("in <module>") else \
                    ("" if last_frame.startswith("File ") else last_frame)
                hint = None if named else frame_hint(frames, code)
                if hint is not None:
                    self.hits.append(_Hit(hint[0], header, hint[1], "warn", "cause", survived=ignored))
                return
            raw, end = self._physical(pos)
            segs = clean_segments(raw)
            line = segs[-1] if segs else ""
            if indent and line.startswith(indent):
                line = line[len(indent):]
            # a traceback whose indentation the paste lost (Markdown drops it): its frames at column 0, each followed
            # by its code line, also at column 0 (not an exception line)
            flat_code = after_flat_frame and bool(line.strip()) and not _EXC_LOOK.match(line)
            after_flat_frame = False
            if line[:1] not in (" ", "\t") and _FRAME_LINE.match(line):
                last_frame = line.strip()
                frames.append(last_frame)
                after_flat_frame = True
                pos = end + 1
                continue
            if flat_code:
                last_frame = last_code = line.strip()
                pos = end + 1
                continue
            if line[:1] in (" ", "\t") and line.strip():
                prev_len = len(line)  # a frame or its code line (as printed): the next line may be its wrapped tail
            if not line.strip() or line[0] in " \t" or line.lstrip().startswith(("^", "~")):
                if line.strip() and not line.lstrip().startswith(("^", "~")):
                    last_frame = line.strip()
                    if not last_frame.startswith("File "):
                        last_code = last_frame
                    if last_frame.startswith("File "):
                        frames.append(last_frame)
                    elif (glued := _GLUED_EXC.search(line)) is not None:
                        # stderr's exception line glued onto a code line of stdout's copy of the traceback (two
                        # streams interleaved): it is the exception the traceback ended in, out of place
                        self._judge(pos, line[glued.start(1):], final=True, found=None)
                    background = background or _BACKGROUND_FRAME.search(line) is not None
                pos = end + 1
                continue
            if is_tb_header(line):  # a second header (another rank, or a chained traceback) restarts the walk
                pos = end + 1
                continue
            if ipy is not None and _IPY_FRAME.match(line):
                if line.startswith(("File ", "/")) or ".py" in line.split(" in ", 1)[0]:
                    last_frame = line.strip()
                    frames.append(last_frame)
                pos = end + 1
                continue
            if wrapped < WRAP_LINES and prev_len >= WRAP_MIN and not _EXC_LOOK.match(line):
                # the tail of a long frame or code line the terminal or the paste wrapped: still inside the traceback
                wrapped += 1
                prev_len = len(line)
                pos = end + 1
                continue
            self._skip_to = end + 1
            before = len(self.hits)
            if _EMPTY_EXC.match(line):
                line, self._skip_to = self._with_message(line, end + 1)
            self._judge(pos, line, final=True, found=None)
            if (len(self.hits) > before and self.hits[-1].rule is GENERIC_TRACEBACK and line.startswith("AssertionError")
                    and last_frame and _FINITE_CHECK.search(last_frame)):
                # an assertion guarding finiteness (`assert not torch.isnan(loss)`): the values went NaN/inf
                self.hits[-1] = _Hit(NAN_ASSERT, pos, f"{line.strip()} at: {last_frame}", "error", "cause", final=True)
            elif (len(self.hits) == before + 1 and self.hits[-1].rule is GENERIC_TRACEBACK and line.startswith("KeyError")
                  and CONFIG_MAPPING.search(last_code)):
                # the key is missing from the config or hyperparameter file the code reads it from
                self.hits[-1] = _Hit(CONFIG_KEY, pos, f"{line.strip()} at: {last_code}", "error", "cause", final=True)
            elif (len(self.hits) == before + 1 and self.hits[-1].rule is GENERIC_TRACEBACK and _PICKLE_FAIL.search(line)
                  and any(_LOADER_START.search(f) for f in frames)):
                # the DataLoader starting its workers with the spawn method (Windows, macOS, set_start_method) pickles
                # the dataset: what does not pickle stops the workers before the first batch
                self.hits[-1] = _Hit(PICKLE, pos, line.strip(), "error", "cause", final=True)
            elif (len(self.hits) == before + 1 and self.hits[-1].rule is GENERIC_TRACEBACK
                  and (_GENERIC_TYPES.match(line) or (frames and _LOADER_INTERNAL.search(frames[-1])))
                  and (hint := frame_hint(frames)) is not None):
                # `OSError: [Errno 0] Error` raised from ssl.py: the subsystem it came from names the class (weakly)
                self.hits.append(_Hit(hint[0], pos, f"{line.strip()} (raised in {hint[0].cls} code: {hint[1]})",
                                      "error", "cause", final=True))
            caught = ignored or background or self._announced_before(header) or self._copes_after(self._skip_to)
            optional = self._optional_import(header, self.hits[before:])
            for h in self.hits[before:]:
                # a feeder thread's unnamed error (a broken pipe to a consumer that left) is routine; a named one
                # (shared memory full) starves the process, and only progress after it says it was survived
                h.survived = h.survived or ignored or optional or (background and h.rule is GENERIC_TRACEBACK)
                h.uncaught = not caught
            return
        self._skip_to = pos

    def _judge(self, index: int, line: str, *, final: bool, found: set[str] | None) -> None:
        if len(line) > JUDGE_CHARS:
            # a very long line (a dump, a one-line paste of many records): its head and its tail are judged, so the
            # rules' windows cost what they cost on a normal line; the words of a message sit at one end or the other
            line = line[:JUDGE_CHARS // 2] + " ... " + line[-(JUDGE_CHARS // 2):]
            found = None
        key = (line, frozenset(found) if found is not None else None)
        if key in self._verdicts:
            rule = self._verdicts[key]
        else:
            rule = _match(line, found)
            if len(self._verdicts) < VERDICT_CACHE:
                self._verdicts[key] = rule
        if rule is None:
            cls = topic(line) if (final or (self.bare_exceptions and (_EXC_LINE.match(line) or
                                                                                   _LOG_ERROR.match(line)))) else None
            if cls is not None:
                exc = final or _EXC_LINE.match(line) is not None
                self.hits.append(_Hit(topic_rule(cls), index, line,
                                      "error" if exc else "warn", "cause", final=final, exception=not final and exc))
                self.hit_lines.add(index)
            elif final or (self.bare_exceptions and _EXC_LINE.match(line)):
                generic = GENERIC_TRACEBACK
                if not final and _PICKLE_FAIL.search(line) and any(_LOADER_START.search(f)
                                                                   for f in self._frames_above(index)):
                    generic = PICKLE  # the same, pasted as frames without their traceback header
                self.hits.append(_Hit(generic, index, line, "error", "cause", final=final, exception=not final))
                self.hit_lines.add(index)
            elif self.bare_exceptions and _LOG_ERROR.match(line):
                self.hits.append(_Hit(LOG_ERROR, index, line, "error", "cascade"))
                self.hit_lines.add(index)
            return
        if rule.role == "ignore":
            return  # routine: it may still count as progress
        self.hit_lines.add(index)
        if rule.role == "trend":
            m = _SCALE.search(line)
            scale = None
            if m:
                try:
                    scale = float(m.group(1).rstrip("."))
                except ValueError:
                    scale = None
            self.overflow.append((index, scale))
            self.hits.append(_Hit(rule, index, line, "info", "trend"))
            return
        severity = rule.severity
        exception = not final and _EXC_LINE.match(line) is not None
        if final and rule.role == "cause" and SEVERITY_RANK[severity] < SEVERITY_RANK["error"]:
            severity = "error"  # the exception that ended the run, not a logged warning
        elif not final and not rule.fatal and SEVERITY_RANK[severity] > SEVERITY_RANK["warn"] and _PY_WARNING.match(line):
            # printed by Python's warnings module (`file.py:52: UserWarning: CUDA initialization: ...`): the program
            # said so and went on; it is the cause only if nothing else is (it still outranks a clean log)
            severity = "warn"
        self.hits.append(_Hit(rule, index, line, severity, rule.role, final=final, exception=exception))
