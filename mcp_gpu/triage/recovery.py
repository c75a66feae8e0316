"""What shows that a run survived a finding, or that a finding is explained away, before the root cause is chosen.

The engine (`engine._triage_text`) runs these passes over the scan's hits in order:
- `mark_survived`: real training progress after a line, with no fatal sign in between;
- `named_loss_recovered`: a loss component that went NaN/inf recovers only when that same component is finite again;
- `after_done`: a crash printed after the run said it finished is teardown;
- `grad_norm_recovered`: a NaN gradient norm followed by a finite one (the AMP scaler skipped a step); a warm-up
  whose every logged norm is NaN is not;
- `anomaly_explained`, `coping`, `eval_nan_explained`, `retries_pile_up`: a line explained by the one after it, a
  line that says how the program copes, a NaN in an eval loss beside a finite training loss, retries that pile up;
- `write_interrupted`: a checkpoint write cut short by an exception raised mid-save, not by a full disk;
- `nan_from_fault`: a NaN printed once right before a GPU kernel fault is the fault's garbage.
"""

from __future__ import annotations

import bisect
import re

from mcp_gpu.triage.log_scan import COPES, _Hit
from mcp_gpu.triage.rules import GRAD_NORM_NAN, LOG_ERROR
from mcp_gpu.triage.scan import ProgressFinder


def mark_survived(hits: list[_Hit], progress: ProgressFinder) -> None:
    """A hit is survived when real progress follows it with no fatal sign in between (after the exception line of a
    traceback, a progress bar needs a second line of progress: a crashing process flushes its bar once)."""
    fatal_at = sorted(h.index for h in hits if h.fatal)
    fi = 0
    for h in sorted(hits, key=lambda h: h.index):
        if h.fatal:
            continue
        nxt = progress.finite_loss_after(h.index + 1) if h.cls == "nan_inf" and h.role != "trend" else \
            progress.after(h.index + 1)
        if nxt is not None and (h.final or h.exception or h.rule is LOG_ERROR) and progress.is_bar(nxt):
            # a crashing process flushes its progress bar once after the traceback: that is not training going on
            nxt = progress.after_next(nxt + 1)
        if nxt is None:
            continue
        while fi < len(fatal_at) and fatal_at[fi] <= h.index:
            fi += 1
        if fi < len(fatal_at) and fatal_at[fi] < nxt:
            continue
        h.survived = True


# a named component of the loss (`Value function loss: inf` among an RL trainer's surrogate and entropy terms): only a
# finite value of that same component shows it recovered, not a finite value of another term
_NAMED_LOSS = re.compile(r"([A-Za-z][A-Za-z_ ]{1,40}?)[ _]loss\b['\"]?\s*[:=]?\s*['\"]?[-+]?(?:nan|inf)\b", re.IGNORECASE)
_NOT_A_COMPONENT = re.compile(r"^(?:train\w*|the|my|total|val\w*|eval\w*|test\w*|prev\w*|last|best|mean|avg)$",
                              re.IGNORECASE)


def named_loss_recovered(text: str, hits: list[_Hit]) -> None:
    by_name: dict[str, list[_Hit]] = {}
    for h in hits:
        if h.rule.id != "nan.loss" or not h.survived or h.fatal:
            continue
        m = _NAMED_LOSS.search(h.line)
        name = m.group(1).strip() if m else ""
        if name and not _NOT_A_COMPONENT.match(name.split()[-1]):
            by_name.setdefault(name.lower(), []).append(h)
    for name, named in by_name.items():  # one pass over the text per component name, however many hits it has
        finite = re.compile(rf"{re.escape(name)}[ _]loss\b['\"]?\s*[:=]?\s*['\"]?[-+]?\d", re.IGNORECASE)
        last = max((m.start() for m in finite.finditer(text)), default=-1)
        for h in named:
            if last <= h.index:
                h.survived = False


# The run said it finished: the whole run, not an epoch ("Training finished", "FINISHED Optimization", the HF
# Trainer's summary, a final export). A native crash after it is the teardown (destructors of C++ extensions,
# simulators, TF sessions), not the run: results are already written. A Python traceback after it still counts:
# the final evaluation or export crashed.
_RUN_DONE = re.compile(
    r"(?:"
    r"\b(?:[Tt]raining|[Oo]ptimi[sz]ation|[Ff]ine-?tuning) (?:is |has )?(?:finished|completed?|done|ended)\b|"
    r"\b(?:[Ff]inished|FINISHED|[Dd]one|[Ee]nd of|[Cc]ompleted) (?:[Tt]raining|[Oo]ptimi[sz]ation|[Ff]ine-?tuning)\b|"
    r"\b[Tt]otal [Tt]raining [Tt]ime\b|'train_runtime'|\b[Mm]odels? exported\b|"
    r"\b[Ss]aving (?:the )?final (?:model|checkpoint|weights)|\b[Ff]inal (?:model|checkpoint|weights) (?:saved|written))",
)
_EPOCH_SCOPED = re.compile(r"\b[Ee]poch\s*\[?\d")  # "Epoch 3 training finished": one epoch, not the run
_TEARDOWN_CRASH = frozenset({"crash.native", "crash.abort", "signal.segv"})


_GRAD_NORM_FINITE = re.compile(r"\bg(?:rad)?_?norm\b['\"]?\s*[:=]\s*(?:tensor\()?['\"]?[-+]?\d", re.IGNORECASE)


WARMUP_NAN_NORMS = 2  # logged warm-up gradient norms, all NaN/inf with no finite one after: not the scaler's search


def grad_norm_recovered(text: str, hits: list[_Hit]) -> None:
    """A NaN/inf gradient norm followed by a finite one: the AMP scaler skipped that step and training went on.
    At warm-up one NaN norm is the loss scale searching down; every logged norm NaN, and none finite after them,
    is gradients that never became finite (a bf16 run has no scaler to search at all)."""
    nan_norms = [h for h in hits if h.rule.id == "nan.grad_norm" and not h.survived]
    warmup = [h for h in hits if h.rule.id == "nan.grad_norm_warmup"]
    if not nan_norms and len(warmup) < WARMUP_NAN_NORMS:
        return
    last_finite = max((m.start() for m in _GRAD_NORM_FINITE.finditer(text)), default=-1)  # one pass: linear
    for h in nan_norms:
        end = text.find("\n", h.index)
        if 0 <= end < last_finite:
            h.survived = True
    if len(warmup) >= WARMUP_NAN_NORMS and last_finite < warmup[0].index:
        for h in warmup:
            h.rule, h.severity, h.role = GRAD_NORM_NAN, "error", "cause"


def anomaly_explained(hits: list[_Hit]) -> None:
    """Anomaly mode's "Error detected in XBackward" warning comes before the error it found: when that error is
    printed (an in-place modification, NaN values returned), the error decides; alone, the warning stands."""
    anomalies = [h for h in hits if h.rule.id == "nan.anomaly"]
    if not anomalies:
        return
    finals = [h.index for h in hits if h.final and h.rule.id != "nan.anomaly"]
    for h in anomalies:
        if any(i > h.index for i in finals):
            h.survived = True


# (how a line says the program copes with what it reports: `log_scan.COPES`)
_COPING_CLASSES = frozenset({"import_or_config_error", "traceback", "dataloader_error", "checkpoint_corrupt",
                             "network_stall", "cuda_device_error"})


def coping(hits: list[_Hit]) -> None:
    """A non-fatal line that says the program copes with it is survived (it is reported as info)."""
    for h in hits:
        if (not h.survived and not h.fatal and not h.final and h.cls in _COPING_CLASSES and h.role != "trend"
                and COPES.search(h.line)):
            h.survived = True


# NaN in an evaluation loss while the same line shows a finite training loss, or next to the program saying there
# was nothing to evaluate: an empty or broken eval split, not a diverging run.
_EVAL_NAN = re.compile(r"\b(?:val|valid|validation|eval|test)[_/ ]loss['\"]?\s*[:=]\s*['\"]?[-+]?nan\b", re.IGNORECASE)
_FINITE_TRAIN = re.compile(r"(?:^|[\s,{'\"(/])(?:train[_/ ])?loss['\"]?\s*[:=]\s*['\"]?[-+]?\d", re.IGNORECASE)
_NOTHING_TO_EVAL = re.compile(r"\bno (?:validation|eval\w*|test) (?:batches|samples|data|examples)\b|"
                              r"\bskipping (?:validation|evaluation)\b", re.IGNORECASE)


# A NaN in some other loss-named field (`prev_loss=nan` before a first epoch, an auxiliary or eval term) while the
# training loss on the same line is finite: the optimiser is not diverging.
_OTHER_NAN_FIELD = re.compile(r"\b\w*(?:loss|ppl|perplexity)\w*['\"]?\s*[:=]\s*['\"]?[-+]?(?:nan|inf)\b", re.IGNORECASE)


def eval_nan_explained(text: str, hits: list[_Hit]) -> None:
    for h in hits:
        if h.rule.id not in ("nan.loss", "nan.value") or h.survived or h.final:
            continue
        if _EVAL_NAN.search(h.line):
            around = text[h.index:h.index + 400]
            if _FINITE_TRAIN.search(_EVAL_NAN.sub("", h.line)) or _NOTHING_TO_EVAL.search(around):
                h.survived = True
        elif _OTHER_NAN_FIELD.search(h.line) and _FINITE_TRAIN.search(_OTHER_NAN_FIELD.sub("", h.line)):
            h.survived = True


RETRIES_PILING_UP = 2


def retries_pile_up(hits: list[_Hit]) -> None:
    """One retry announced is a client coping; retries piling up with no progress between them are a stall."""
    retries = [h for h in hits if h.rule.id == "net.retrying" and not h.survived]
    if len(retries) >= RETRIES_PILING_UP:
        for h in retries:
            h.severity = "warn"


def after_done(text: str, hits: list[_Hit]) -> None:
    """Native crashes printed after the run said it finished are its teardown: survived."""
    crashes = [h for h in hits if h.rule.id in _TEARDOWN_CRASH and not h.survived]
    if not crashes:
        return  # the common case: no search at all
    done_at = None
    for m in _RUN_DONE.finditer(text, 0, max(h.index for h in crashes)):
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.end())
        if not _EPOCH_SCOPED.search(text, line_start, line_end if line_end >= 0 else len(text)):
            done_at = m.start()
            break
    if done_at is None:
        return
    for h in crashes:
        if h.index > done_at:
            h.survived = True


# Python's chaining of an exception raised while another was being handled (a `with` block's cleanup failing); the
# two tracebacks sit within a few thousand characters, and a log holding thousands of failed writes is read for its
# first ones (a hostile or looping log must not make this quadratic)
_CHAINED = "During handling of the above exception, another exception occurred"
CHAIN_CHARS = 20_000
CHAINED_WRITES = 100


def write_interrupted(text: str, hits: list[_Hit]) -> None:
    """torch.save's writer reporting a short file ("unexpected pos") while it closes the archive after another
    exception was raised mid-save (a MemoryError): the write was cut short by that exception, not by a full disk."""
    writes = [h for h in hits if h.rule.id == "disk.torch_save" and not h.survived]
    if not writes:
        return  # the common case: nothing to look at
    finals = sorted(e.index for e in hits if e.final and e.cls not in ("disk_full", "traceback"))
    for h in writes[:CHAINED_WRITES]:
        i = bisect.bisect_left(finals, h.index)
        if i and h.index - finals[i - 1] <= CHAIN_CHARS and text.find(_CHAINED, finals[i - 1], h.index) >= 0:
            h.survived = True


# how close before a GPU fault a NaN/inf may be printed to count as that fault's garbage (a few lines of a log)
NAN_BEFORE_FAULT_CHARS = 2_000


def nan_from_fault(hits: list[_Hit]) -> None:
    """A NaN/inf loss printed once or twice right before a GPU kernel fault (an illegal memory access, a
    device-side assert) is the broken kernel's output: the fault is the root cause. NaN that kept coming is not."""
    nans = [h for h in hits if h.cls == "nan_inf" and h.role == "cause" and not h.survived]
    if not nans or len(nans) > 2:
        return
    faults = [h.index for h in hits if h.cls == "cuda_device_error" and (h.final or h.fatal or h.severity != "info")
              and not h.survived]
    for h in nans:
        if any(0 < f - h.index <= NAN_BEFORE_FAULT_CHARS for f in faults):
            h.survived = True
