"""Training progress from log lines, and the stall test.

Formats read (the latest wins, fields merged across lines so that an HF Trainer's bar gives the step and its
dict line the loss):
- tqdm bars                `45%|████▌     | 450/1000 [01:23<01:42,  5.38it/s, loss=0.123]`
- Lightning bars           `Epoch 3:  45%|████▌     | 450/1000 [01:23<01:42, 5.38it/s, v_num=0, train_loss=0.123]`
- HF Trainer dict lines    `{'loss': 0.4521, 'learning_rate': 4.5e-05, 'epoch': 0.45}`, `{'train_runtime': ...}` (done)
- JSON lines               `{"step": 120, "loss": 0.53, "lr": 0.0003}`
- text                     `step 120 ... loss 0.53`, `Step 120/1000 | loss 0.53 | lr 3e-4`, `iter 120: loss 2.31`

Bars for evaluation, downloads, dataset maps and checkpoint loading are not training progress and are skipped.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NamedTuple

from pydantic import BaseModel, Field

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PREFIX = re.compile(r"^(?:\[(?:rank|default)\d+\]:\s?|\d{1,4}: (?=\S))")
_NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf)"
_BAR = re.compile(
    r"(?P<pct>\d{1,3})%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+)\s*"
    r"\[(?P<elapsed>[\d:]+)<(?P<remaining>[\d:]+|\?)\s*,\s*(?P<rate>[\d.]+|\?)\s*(?P<unit>it/s|s/it)"
    r"(?:\s*,\s*(?P<postfix>[^\]]*))?\]")
_BAR_NO_TOTAL = re.compile(
    r"(?P<n>\d+)it \[(?P<elapsed>[\d:]+)\s*,\s*(?P<rate>[\d.]+|\?)\s*(?P<unit>it/s|s/it)(?:\s*,\s*(?P<postfix>[^\]]*))?\]")
_NOT_TRAINING = re.compile(r"valid|eval|test|predict|sanity|download|loading|map\b|tokeniz|filter|shard|generat", re.I)
_EPOCH_DESC = re.compile(r"\bEpoch\s+(\d+)", re.I)
_HF_PAIR = re.compile(r"'([^']+)':\s*([^,}]+)")
_STEP = re.compile(r"\b(?:global[_ ]step|step|iter(?:ation)?)\b\s*[:=#]?\s*\[?\s*(\d+)(?:\s*/\s*(\d+))?", re.I)
_LOSS = re.compile(rf"(?<![\w/])(?:train[_/ ])?loss\b\s*[:=]?\s*({_NUM})\b", re.I)
_LR = re.compile(rf"\b(?:lr|learning[_ ]rate)\b\s*[:=]?\s*({_NUM})", re.I)
_EPOCH = re.compile(r"\bepoch\b\s*[:=]?\s*(\d+(?:\.\d+)?)(?:\s*/\s*\d+)?", re.I)
_RATE = re.compile(r"([\d.]+)\s*(it/s|s/it)")
_LOSS_KEYS = ("loss", "train_loss", "train/loss", "train_loss_step", "loss_step", "train/loss_step")
_LR_KEYS = ("lr", "learning_rate", "train/learning_rate", "train/lr")
_STEP_KEYS = ("step", "global_step", "train/global_step", "iter", "iteration", "_step")
_TOTAL_KEYS = ("total", "max_steps", "total_steps", "num_steps")


class Progress(BaseModel):
    """Where a run stands, as its log says."""

    step: int | None = None
    total: int | None = None
    epoch: float | None = None
    loss: float | None = None
    lr: float | None = None
    rate: float | None = Field(default=None, description="steps per second")
    eta_s: float | None = Field(default=None, description="seconds left, when the total is known")
    finished: bool = Field(default=False, description="the trainer printed its end-of-training summary")
    source: str = Field(default="", description="tqdm | lightning | hf | json | text")
    raw: str = Field(default="", description="the line the step came from")


class Observation(NamedTuple):
    """A step and the time (epoch seconds) it was first seen."""

    step: int
    t: float


def _float(text: str) -> float | None:
    try:
        return float(text.strip().strip("'\""))
    except ValueError:
        return None


def _seconds(clock: str) -> float | None:
    if not clock or "?" in clock:
        return None
    total = 0.0
    for part in clock.split(":"):
        if not part.isdigit():
            return None
        total = total * 60 + int(part)
    return total


def _pick(values: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in values and values[key] is not None:
            return values[key]
    return None


def _loss_from(values: dict[str, Any]) -> float | None:
    picked = _pick(values, _LOSS_KEYS)
    if picked is None:
        picked = next((v for k, v in values.items() if k.endswith("loss") and not k.startswith(("val", "eval", "test"))),
                      None)
    return _as_float(picked)


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    return _float(str(value))


def _as_int(value: Any) -> int | None:
    number = _as_float(value)
    return int(number) if number is not None and math.isfinite(number) else None


def _parse_bar(line: str) -> Progress | None:
    if "it/s" not in line and "s/it" not in line:
        return None
    m = _BAR.search(line) or _BAR_NO_TOTAL.search(line)
    if m is None:
        return None
    desc = line[: m.start()]
    if _NOT_TRAINING.search(desc):
        return None
    groups = m.groupdict()
    rate = _float(groups["rate"]) if groups["rate"] != "?" else None
    if rate is not None and groups["unit"] == "s/it":
        rate = 1 / rate if rate else None
    postfix = dict(
        (k.strip(), v.strip()) for k, _, v in (item.partition("=") for item in (groups.get("postfix") or "").split(","))
        if v
    )
    epoch_match = _EPOCH_DESC.search(desc)
    total = int(groups["total"]) if groups.get("total") else None
    remaining = _seconds(groups.get("remaining") or "")
    return Progress(step=int(groups["n"]), total=total, epoch=float(epoch_match.group(1)) if epoch_match else None,
                    loss=_loss_from(postfix), lr=_as_float(_pick(postfix, _LR_KEYS)), rate=rate, eta_s=remaining,
                    source="lightning" if epoch_match else "tqdm", raw=line.strip())


def _parse_dict(line: str) -> Progress | None:
    text = line.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    values: dict[str, Any]
    source = "json"
    try:
        loaded = json.loads(text)
        values = loaded if isinstance(loaded, dict) else {}
    except ValueError:
        values = {k: v for k, v in _HF_PAIR.findall(text)}
        source = "hf"
    if not values:
        return None
    step = _as_int(_pick(values, _STEP_KEYS))
    loss = _loss_from(values)
    lr = _as_float(_pick(values, _LR_KEYS))
    epoch = _as_float(values.get("epoch"))
    finished = "train_runtime" in values
    if step is None and loss is None and lr is None and not finished:
        return None
    return Progress(step=step, total=_as_int(_pick(values, _TOTAL_KEYS)), epoch=epoch, loss=loss, lr=lr,
                    finished=finished, source=source, raw=text if step is not None else "")


def _parse_text(line: str) -> Progress | None:
    low = line.lower()
    if "step" not in low and "iter" not in low and "epoch" not in low:
        return None
    step_m = _STEP.search(line)
    loss_m = _LOSS.search(line)
    epoch_m = _EPOCH.search(line)
    if step_m is None and not (epoch_m and loss_m):
        return None
    if step_m is None and loss_m is None:
        return None
    lr_m = _LR.search(line)
    rate_m = _RATE.search(line)
    rate = None
    if rate_m:
        value = float(rate_m.group(1)) if rate_m.group(1).replace(".", "", 1).isdigit() else None
        rate = (1 / value if value else None) if rate_m.group(2) == "s/it" else value
    return Progress(step=int(step_m.group(1)) if step_m else None,
                    total=int(step_m.group(2)) if step_m and step_m.group(2) else None,
                    epoch=float(epoch_m.group(1)) if epoch_m else None,
                    loss=float(loss_m.group(1)) if loss_m else None, lr=float(lr_m.group(1)) if lr_m else None,
                    rate=rate, source="text", raw=line.strip() if step_m else "")


def parse_line(line: str) -> Progress | None:
    """Progress in one (cleaned) line, or None."""
    line = _PREFIX.sub("", _ANSI.sub("", line).strip(), count=1)
    if not line:
        return None
    return _parse_bar(line) or _parse_dict(line) or _parse_text(line)


def _segments(lines: list[str]) -> list[str]:
    out: list[str] = []
    for raw in lines:
        for physical in raw.split("\n"):
            out.extend(p for p in physical.split("\r") if p.strip())
    return out


def latest_progress(lines: list[str]) -> Progress | None:
    """The newest progress in a chunk of log lines, merged across formats; None when there is none."""
    parsed = [p for p in (parse_line(s) for s in _segments(lines)) if p is not None]
    if not parsed:
        return None
    # Evaluation bars without a description (HF Trainer) are shorter than the training bar: keep the longest.
    longest = max((p.total or 0 for p in parsed if p.source in ("tqdm", "lightning")), default=0)
    state = Progress()
    for p in parsed:
        if p.source in ("tqdm", "lightning") and p.total is not None and p.total < longest:
            continue
        if p.step is not None:
            state.step, state.total, state.rate, state.eta_s = p.step, p.total, p.rate, p.eta_s
            state.raw, state.source = p.raw, p.source
        for name in ("epoch", "loss", "lr"):
            value = getattr(p, name)
            if value is not None:
                setattr(state, name, value)
        state.finished = state.finished or p.finished
    if state.step is None and state.loss is None and not state.finished:
        return None
    if state.eta_s is None and state.total and state.step is not None and state.rate:
        state.eta_s = max(state.total - state.step, 0) / state.rate
    return state


def cadence(a: Observation, b: Observation) -> float | None:
    """Seconds per step between two observations; None when the step did not advance."""
    if b.step <= a.step or b.t <= a.t:
        return None
    return (b.t - a.t) / (b.step - a.step)


def stall_threshold(prev: Observation | None, cur: Observation, *, floor_s: float = 600, factor: float = 5) -> float:
    """How long `cur` may stand still: `factor` × the time the run took for its last observed advance, at least
    `floor_s`. The advance (not one step) is the unit because logs report every N steps."""
    per_step = cadence(prev, cur) if prev is not None else None
    if per_step is None or prev is None:
        return floor_s
    return max(floor_s, factor * per_step * (cur.step - prev.step))


def is_stalled(prev: Observation | None, cur: Observation, now: float, floor_s: float = 600, factor: float = 5) -> bool:
    """Alive but no new progress since `cur` for longer than its own cadence allows (see `stall_threshold`)."""
    return now - cur.t > stall_threshold(prev, cur, floor_s=floor_s, factor=factor)


# Stall from the job's own cadence (what patrol uses): the median interval between its log lines, sampled patrol
# to patrol. Silent past SILENT_MISSED intervals is shown as such; stalled past STALL_MISSED intervals, never before
# the floor. The default floor suits a fast job (a 0.5 s cadence is stalled after 2 min, not 10) and a slow one
# alike (a line every 10 min is allowed 50 min); a launch sets its own with `stall_floor_s`.
STALL_FLOOR_S = 120.0
STALL_MISSED = 5.0
STALL_FLOOR_NO_CADENCE = 600.0  # no interval seen yet: be patient
SILENT_MISSED = 2.0
SILENT_MIN_S = 2.0


def stall_allowance(cadence_s: float | None, floor_s: float = STALL_FLOOR_S) -> float:
    """Seconds of silence allowed before a job is stalled."""
    if cadence_s is None or cadence_s <= 0:
        return max(floor_s, STALL_FLOOR_NO_CADENCE)
    return max(floor_s, STALL_MISSED * cadence_s)


def silence(quiet_s: float, cadence_s: float | None, floor_s: float = STALL_FLOOR_S) -> str:
    """`ok`, `silent` (missed a couple of its own intervals) or `stalled` (past the allowance)."""
    if quiet_s > stall_allowance(cadence_s, floor_s):
        return "stalled"
    if quiet_s > max(SILENT_MIN_S, SILENT_MISSED * (cadence_s or floor_s)):
        return "silent"
    return "ok"
