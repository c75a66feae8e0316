"""The gotcha catalogue validates, and lookup finds the right entry for real error lines (and nothing for healthy ones)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_gpu import gotchas
from mcp_gpu.errors import ConfigError, NotFoundError
from mcp_gpu.gotchas.catalogue import load_catalogue
from mcp_gpu.models import TRIAGE_CLASSES

REPO = Path(__file__).resolve().parent.parent

REAL_ERRORS = {
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity; "
    "75.30 GiB already allocated; 1.20 GiB free; 76.00 GiB reserved in total by PyTorch) If reserved memory is >> "
    "allocated memory try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True": "universal.U10",
    "[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=4212, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800095 "
    "milliseconds before timing out.": "distributed.D20",
    "OSError: [Errno 28] No space left on device": "universal.U6",
    "Killed": "universal.U9",
    "/bin/bash: line 1:  4242 Killed                  python train.py --cfg a.yaml": "universal.U9",
    "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory": "checkpoint.C2",
    "run_one.sh: line 2: $'\\r': command not found": "universal.U26",
    "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.": "universal.U22",
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
    "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).": "distributed.D4",
    "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error "
    "indicates that your module has parameters that were not used in producing loss.": "distributed.D8",
    "RuntimeError: DataLoader worker (pid 123) is killed by signal: Bus error. It is possible that dataloader's "
    "workers are out of shared memory. Please try to raise your shared memory limit.": "data.DP15",
    "AssertionError: No inf checks were recorded for this optimizer.": "checkpoint.C15",
    "ValueError: Asking to pad but the tokenizer does not have a padding token.": "llm.L3",
    "Host key verification failed.": "transport.T6",
    "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4242.batch.": "slurm.SLURM4",
}

HEALTHY = [
    "step 100 loss 0.23 lr 1e-4",
    "eval mean_squared_error=0.01 error_rate=0.02",
    "epoch 3/20 train_loss=0.412 val_acc=0.871 time=312s",
    "Saving checkpoint to /workspace/runs/r1/ckpt-400.pt",
    "100%|██████████| 500/500 [02:13<00:00,  3.75it/s]",
]


def test_every_catalogue_entry_loads_validates_and_ids_are_family_qualified() -> None:
    cat = load_catalogue()
    assert len(cat) >= 250
    for g in cat.entries:
        family, short = g.id.split(".", 1)
        assert family == g.family and short
        assert g.cls is None or g.cls in TRIAGE_CLASSES
    assert {f"universal.U{i}" for i in range(1, 45)} <= set(cat.by_id)
    fams = cat.families()
    for fam in ("autodl", "runpod", "vastai", "lambda", "paperspace", "china", "hengyuan", "matpool", "featurize",
                "lanrui", "generic-ssh", "slurm", "kubernetes", "colab-kaggle", "local", "memory", "precision",
                "distributed", "multinode", "checkpoint", "throughput", "data", "convergence", "transport"):
        assert fams.get(fam, 0) >= 2, fam


def test_colliding_short_ids_stay_distinct_and_bare_ids_resolve_only_when_unique() -> None:
    cat = load_catalogue()
    assert cat.get("transport.T1") is not cat.get("throughput.T1")
    assert cat.get("M17").id == "memory.M17"
    assert cat.get("Universal.u9").id == "universal.U9"
    with pytest.raises(NotFoundError, match="no gotcha") as err:
        cat.get("T1")
    assert "transport.T1" in (err.value.hint or "") and "throughput.T1" in (err.value.hint or "")


@pytest.mark.parametrize(("line", "expected"), list(REAL_ERRORS.items()), ids=[v for v in REAL_ERRORS.values()])
def test_lookup_puts_the_right_entry_first_for_a_real_error_line(line: str, expected: str) -> None:
    result = gotchas.lookup(line)
    assert result.confident
    top = result.matches[0]
    assert top.id == expected, [(m.id, m.confidence) for m in result.matches]
    assert top.confident and top.confidence >= 0.8 and top.fix and top.matched


@pytest.mark.parametrize("line", HEALTHY)
def test_lookup_finds_nothing_confident_in_a_healthy_log_line(line: str) -> None:
    result = gotchas.lookup(line)
    assert not result.confident
    assert all(not m.confident and m.confidence <= 0.5 for m in result.matches)


def test_a_symptom_in_words_gets_suggestions_that_are_not_confident() -> None:
    result = gotchas.lookup("wandb sync keeps timing out on autodl", platform="autodl")
    assert result.matches and result.matches[0].id == "autodl.AD1"
    assert not result.matches[0].confident


def test_a_log_tail_matches_the_line_that_matters_and_limits_the_answer() -> None:
    tail = "\n".join(["step 1 loss 2.3", "step 2 loss 2.1", "Traceback (most recent call last):",
                      '  File "train.py", line 9, in <module>', "torch.OutOfMemoryError: CUDA out of memory."])
    result = gotchas.lookup(tail, limit=1)
    assert [m.id for m in result.matches] == ["universal.U10"]
    assert result.query == "step 1 loss 2.3"


def test_numeric_signals_fire_on_probe_numbers() -> None:
    u9 = gotchas.get("universal.U9")
    numeric = next(s for s in u9.signals if s.kind == "numeric")
    assert numeric.fires({"exit_code": 137}) and not numeric.fires({"exit_code": 1}) and not numeric.fires({})


def test_a_broken_catalogue_file_fails_naming_file_and_field(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('[[memory]]\nid = "M99"\ntitle = "x is broken"\nsymptom = "sym"\n'
                                       'signals = [{kind = "regex", value = "(unclosed"}]\ncause = "why"\n'
                                       'fix = "fix it"\nphase = ["patrol"]\nseverity = "error"\n')
    with pytest.raises(ConfigError, match=r"bad\.toml: memory\[0\]\.signals\[0\].*regex does not compile"):
        load_catalogue(tmp_path)


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcp_gpu", *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO, input=stdin, env=dict(os.environ))


def test_lookup_verb_prints_the_fix_for_an_argument_or_stdin_and_exits_1_on_nothing() -> None:
    by_arg = _cli("lookup", "OSError: [Errno 28] No space left on device")
    assert by_arg.returncode == 0 and by_arg.stdout.startswith("universal.U6") and "fix:" in by_arg.stdout
    by_stdin = _cli("lookup", "-", stdin="some noise\nKilled\n")
    assert by_stdin.returncode == 0 and "universal.U9" in by_stdin.stdout and "confident" in by_stdin.stdout
    healthy = _cli("lookup", "step 100 loss 0.23 lr 1e-4")
    assert healthy.returncode == 1 and "no known failure" in healthy.stdout
