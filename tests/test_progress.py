"""Progress parsing from the common training-log formats, cadence and the stall test."""

from __future__ import annotations

import math

import pytest

from mcp_gpu.triage.progress import Observation, cadence, is_stalled, latest_progress, parse_line, stall_threshold


def test_a_tqdm_bar_gives_step_total_rate_eta_and_postfix_loss() -> None:
    p = parse_line(" 45%|████▌     | 450/1000 [01:23<01:42,  5.38it/s, loss=0.123]")
    assert p is not None
    assert (p.step, p.total, p.rate, p.eta_s, p.loss, p.source) == (450, 1000, 5.38, 102.0, 0.123, "tqdm")


def test_a_slow_tqdm_bar_in_seconds_per_iteration_is_turned_into_a_rate() -> None:
    p = parse_line("Training:  10%|█         | 10/100 [00:40<06:00,  4.00s/it, loss=1.5, lr=3e-4]")
    assert p is not None
    assert (p.step, p.rate, p.eta_s, p.lr) == (10, 0.25, 360.0, 3e-4)


def test_a_lightning_bar_gives_the_epoch_and_train_loss() -> None:
    p = parse_line("Epoch 3:  45%|████▌     | 450/1000 [01:23<01:42, 5.38it/s, v_num=0, train_loss=0.123]")
    assert p is not None
    assert (p.epoch, p.step, p.total, p.loss, p.source) == (3.0, 450, 1000, 0.123, "lightning")


def test_hf_trainer_dict_lines_give_loss_lr_and_epoch() -> None:
    p = parse_line("{'loss': 0.4521, 'grad_norm': 1.73, 'learning_rate': 4.5e-05, 'epoch': 0.45}")
    assert p is not None
    assert (p.loss, p.lr, p.epoch, p.step, p.source) == (0.4521, 4.5e-05, 0.45, None, "hf")


def test_the_hf_train_runtime_line_marks_the_run_finished() -> None:
    p = parse_line("{'train_runtime': 1234.5, 'train_samples_per_second': 50.2, 'train_steps_per_second': 3.1, "
                   "'train_loss': 0.4321, 'epoch': 3.0}")
    assert p is not None and p.finished and p.loss == 0.4321


def test_a_nan_loss_in_an_hf_dict_line_is_parsed_as_nan() -> None:
    p = parse_line("{'loss': nan, 'learning_rate': 4.5e-05, 'epoch': 0.45}")
    assert p is not None and p.loss is not None and math.isnan(p.loss)


@pytest.mark.parametrize(("line", "step", "total", "loss", "lr"), [
    ("step 120 ... loss 0.53", 120, None, 0.53, None),
    ("Step 120/1000 | loss 0.53 | lr 3e-4", 120, 1000, 0.53, 3e-4),
    ("iter 120: loss 2.3456, time 123.45ms, mfu 45.6%", 120, None, 2.3456, None),
    ("global_step=120 train_loss=0.61 learning_rate=1e-05", 120, None, 0.61, 1e-05),
    ('{"step": 120, "loss": 0.53, "lr": 0.0003}', 120, None, 0.53, 0.0003),
    ('{"global_step": 7, "max_steps": 50, "train/loss": 1.25}', 7, 50, 1.25, None),
])
def test_step_and_loss_lines_in_text_and_json(line: str, step: int, total: int | None, loss: float,
                                             lr: float | None) -> None:
    p = parse_line(line)
    assert p is not None
    assert (p.step, p.total, p.loss, p.lr) == (step, total, loss, lr)


@pytest.mark.parametrize("line", [
    "Map: 45%|████▌     | 450/1000 [00:01<00:01, 300.00 examples/s]",
    "Loading checkpoint shards:  50%|█████     | 1/2 [00:05<00:05,  5.20s/it]",
    "model.safetensors:  45%|████▌     | 2.1G/4.6G [00:30<00:35, 70.2MB/s]",
    "Validation DataLoader 0:  40%|████      | 20/50 [00:02<00:03, 9.10it/s]",
    "val_loss improved from inf to 0.41230",
    "Saving model checkpoint to out/checkpoint-500",
    "",
])
def test_lines_that_are_not_training_progress_give_none(line: str) -> None:
    assert parse_line(line) is None


def test_the_latest_progress_merges_the_bar_step_with_the_dict_loss_and_skips_eval_bars() -> None:
    chunk = [
        " 10%|█         | 100/1000 [00:20<03:00,  5.00it/s]\r 20%|██        | 200/1000 [00:40<02:40,  5.00it/s]",
        "{'loss': 0.4521, 'learning_rate': 4.5e-05, 'epoch': 0.45}",
        "100%|██████████| 50/50 [00:05<00:00, 10.00it/s]",
    ]
    p = latest_progress(chunk)
    assert p is not None
    assert (p.step, p.total, p.loss, p.lr, p.epoch, p.rate, p.eta_s) == (200, 1000, 0.4521, 4.5e-05, 0.45, 5.0, 160.0)
    assert p.raw.startswith("20%|")


def test_the_eta_is_computed_from_the_rate_when_the_log_does_not_give_it() -> None:
    p = latest_progress(["Step 100/1000 | loss 0.5 | 2.00 it/s"])
    assert p is not None and p.eta_s == 450.0


def test_a_chunk_without_progress_gives_none() -> None:
    assert latest_progress(["Loading dataset", "wandb: Syncing run x"]) is None


def test_cadence_is_seconds_per_step_and_none_without_advance() -> None:
    assert cadence(Observation(100, 1000.0), Observation(200, 1500.0)) == 5.0
    assert cadence(Observation(200, 1000.0), Observation(200, 1500.0)) is None


def test_a_run_is_stalled_only_after_the_floor_when_its_cadence_is_fast() -> None:
    prev, cur = Observation(100, 0.0), Observation(200, 100.0)
    assert stall_threshold(prev, cur) == 600
    assert not is_stalled(prev, cur, now=100.0 + 599)
    assert is_stalled(prev, cur, now=100.0 + 601)


def test_a_run_that_logs_rarely_gets_factor_times_its_own_interval() -> None:
    prev, cur = Observation(0, 0.0), Observation(2000, 2000.0)
    assert stall_threshold(prev, cur, floor_s=600, factor=5) == 10_000
    assert not is_stalled(prev, cur, now=2000.0 + 2100)
    assert is_stalled(prev, cur, now=2000.0 + 10_001)


def test_without_a_previous_observation_the_floor_decides() -> None:
    assert not is_stalled(None, Observation(5, 0.0), now=500.0)
    assert is_stalled(None, Observation(5, 0.0), now=700.0, floor_s=600)
