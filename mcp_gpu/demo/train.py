#!/usr/bin/env python3
"""A tiny regression trainer for the mcp-gpu demo and tests: standalone (copied next to the job), no GPU needed.

    python -u train.py --steps 120 --ckpt-every 20 --keep 3 --out checkpoints

Prints `step N/TOTAL loss X lr Y`, saves a checkpoint every --ckpt-every steps atomically (tmp → fsync →
os.replace → fsync dir) as `ckpt_NNNNNN.npz` (numpy) or `.json` (pure Python), plus `.pt` when torch imports,
keeps the newest --keep, writes `metrics.json`, resumes from the newest checkpoint that loads, and exits 0.
SIGTERM only sets a flag: the step in flight finishes, a checkpoint is saved, and it exits 143.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import random
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

try:
    import numpy as np
except ImportError:  # pure Python fallback
    np = None  # type: ignore[assignment]

DIM = 8
CKPT_RE = re.compile(r"^ckpt_(\d{6})\.(npz|json|pt)$")
_stop = {"flag": False}


def _on_term(_sig: int, _frame: Any) -> None:
    _stop["flag"] = True


def dataset(seed: int, n: int = 256) -> tuple[list[list[float]], list[float]]:
    rng = random.Random(seed)
    w_true = [rng.uniform(-2, 2) for _ in range(DIM)]
    xs = [[rng.gauss(0, 1) for _ in range(DIM)] for _ in range(n)]
    ys = [sum(a * b for a, b in zip(x, w_true, strict=True)) + 0.5 + rng.gauss(0, 0.05) for x in xs]
    return xs, ys


def lr_at(step: int, total: int, base: float) -> float:
    return base * 0.5 * (1 + math.cos(math.pi * min(step, total) / max(total, 1)))


def sgd_step(w: list[float], b: float, xs: list[list[float]], ys: list[float], idx: list[int],
             lr: float) -> tuple[list[float], float, float]:
    """One minibatch step of least squares; returns (w, b, loss before the update)."""
    gw = [0.0] * DIM
    gb = 0.0
    loss = 0.0
    for i in idx:
        err = sum(a * c for a, c in zip(xs[i], w, strict=True)) + b - ys[i]
        loss += err * err
        for k in range(DIM):
            gw[k] += 2 * err * xs[i][k]
        gb += 2 * err
    m = len(idx)
    return [w[k] - lr * gw[k] / m for k in range(DIM)], b - lr * gb / m, loss / m


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(path.parent)


def save(out: Path, step: int, w: list[float], b: float, loss: float, torch: Any, fmt: str = "npz") -> list[Path]:
    stem = out / f"ckpt_{step:06d}"
    saved: list[Path] = []
    if np is not None and fmt == "npz":
        p = stem.with_suffix(".npz")
        atomic_write(p, lambda f: np.savez(f, step=np.array(step), w=np.array(w), b=np.array(b), loss=np.array(loss)))
    else:
        p = stem.with_suffix(".json")
        body = json.dumps({"step": step, "w": w, "b": b, "loss": loss}).encode()
        atomic_write(p, lambda f: f.write(body))
    saved.append(p)
    if torch is not None:
        pt = stem.with_suffix(".pt")
        atomic_write(pt, lambda f: torch.save({"step": step, "w": torch.tensor(w), "b": torch.tensor(b)}, f))
        saved.append(pt)
    return saved


def load(path: Path) -> tuple[int, list[float], float]:
    """Raises on a truncated or foreign file."""
    if path.suffix == ".npz":
        if np is None:
            raise ValueError("numpy is not installed")
        with np.load(path) as z:
            return int(z["step"]), [float(v) for v in z["w"]], float(z["b"])
    data = json.loads(path.read_text())
    w = [float(v) for v in data["w"]]
    if len(w) != DIM:
        raise ValueError("wrong shape")
    return int(data["step"]), w, float(data["b"])


def checkpoints(out: Path) -> dict[int, list[Path]]:
    found: dict[int, list[Path]] = {}
    if out.is_dir():
        for p in out.iterdir():
            m = CKPT_RE.match(p.name)
            if m:
                found.setdefault(int(m.group(1)), []).append(p)
    return found


def resume(out: Path) -> tuple[int, list[float], float] | None:
    for step in sorted(checkpoints(out), reverse=True):
        for p in sorted(checkpoints(out)[step]):
            if p.suffix == ".pt":
                continue
            try:
                got = load(p)
            except Exception as exc:  # any unreadable checkpoint is skipped
                print(f"skipping unreadable checkpoint {p.name}: {type(exc).__name__}", flush=True)
                continue
            print(f"resumed from {p.name} at step {got[0]}", flush=True)
            return got
    return None


def prune(out: Path, keep: int) -> None:
    steps = sorted(checkpoints(out), reverse=True)
    for step in steps[keep:]:
        for p in checkpoints(out)[step]:
            p.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--ckpt-every", type=int, default=20)
    ap.add_argument("--keep", type=int, default=3)
    ap.add_argument("--out", default="checkpoints")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sleep", type=float, default=0.0, help="seconds per step (to make a demo watchable)")
    ap.add_argument("--torch", choices=["auto", "off"], default="auto", help="also save .pt when torch imports")
    ap.add_argument("--format", choices=["auto", "json"], default="auto", help="json: no .npz even with numpy")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_term)
    torch: Any = None
    if args.torch == "auto":
        try:
            torch = importlib.import_module("torch")
        except ImportError:
            torch = None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    xs, ys = dataset(args.seed)
    w, b, start = [0.0] * DIM, 0.0, 0
    got = resume(out)
    if got is not None:
        start, w, b = got
    metrics_path = out / "metrics.json"
    history: list[dict[str, float]] = []
    if metrics_path.exists():
        try:
            history = [h for h in json.loads(metrics_path.read_text()).get("history", []) if h["step"] <= start]
        except (ValueError, KeyError, TypeError):
            history = []
    fmt = "npz" if np is not None and args.format == "auto" else "json"
    backend = "numpy" if fmt == "npz" else "python"
    print(f"training {args.steps} steps from step {start} ({backend}{' + torch' if torch else ''})", flush=True)
    loss = float("nan")
    step = start
    while step < args.steps:
        lr = lr_at(step, args.steps, args.lr)
        rng = random.Random(args.seed * 1_000_003 + step)
        idx = [rng.randrange(len(xs)) for _ in range(args.batch)]
        w, b, loss = sgd_step(w, b, xs, ys, idx, lr)
        step += 1
        print(f"step {step}/{args.steps} loss {loss:.6f} lr {lr:.6f}", flush=True)
        history.append({"step": step, "loss": loss, "lr": lr})
        last = step == args.steps
        if step % max(1, args.ckpt_every) == 0 or last or _stop["flag"]:
            saved = save(out, step, w, b, loss, torch, fmt)
            body = json.dumps({"latest": saved[0].name, "step": step, "loss": loss, "history": history}).encode()
            atomic_write(metrics_path, lambda f, body=body: f.write(body))
            prune(out, max(1, args.keep))
            print(f"saved checkpoint {saved[0].name}", flush=True)
        if _stop["flag"]:
            print(f"SIGTERM received: checkpoint saved at step {step}, exiting 143", flush=True)
            return 143
        if args.sleep:
            time.sleep(args.sleep)
    print(f"done: step {step} loss {loss:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
