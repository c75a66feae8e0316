"""Log triage on excerpts in the real formats of PyTorch, HF, DeepSpeed, Lightning, NCCL, torchrun and Slurm."""

from __future__ import annotations

import pytest

from mcp_gpu.models import TRIAGE_CLASSES, Finding
from mcp_gpu.triage.engine import TriageResult, triage
from mcp_gpu.triage.rules import EXTRA_CLASSES, RULES


def lines(text: str) -> list[str]:
    return text.strip("\n").splitlines()


def only(result: TriageResult, cls: str) -> Finding:
    matches = [f for f in result.findings if f.cls == cls]
    assert len(matches) == 1, result.findings
    return matches[0]


TORCH_OOM = """\
Traceback (most recent call last):
  File "/workspace/train.py", line 212, in <module>
    main()
  File "/workspace/train.py", line 188, in main
    loss.backward()
  File "/opt/conda/lib/python3.10/site-packages/torch/_tensor.py", line 522, in backward
    torch.autograd.backward(
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 79.15 GiB of \
which 1.02 GiB is free. Process 2811 has 78.12 GiB memory in use. Of the allocated memory 74.53 GiB is allocated by \
PyTorch, and 2.97 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting \
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  \
(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
"""

OLD_TORCH_OOM = ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.76 GiB total capacity; "
                 "9.60 GiB already allocated; 2.56 MiB free; 9.85 GiB reserved in total by PyTorch)")

TORCHRUN_SIGKILL = """\
[2026-05-01 10:00:00,101] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 2346 closing signal SIGTERM
[2026-05-01 10:00:00,102] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 2347 closing signal SIGTERM
[2026-05-01 10:00:01,310] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 0 \
(pid: 2345) of binary: /usr/bin/python3
Traceback (most recent call last):
  File "/usr/local/bin/torchrun", line 8, in <module>
    sys.exit(main())
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 263, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-05-01_10:00:01
  host      : node01
  rank      : 1 (local_rank: 1)
  exitcode  : -15 (pid: 2346)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 2346
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-05-01_10:00:00
  host      : node01
  rank      : 0 (local_rank: 0)
  exitcode  : -9 (pid: 2345)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 2345
============================================================
"""

WATCHDOG = """\
[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=15331, \
OpType=ALLREDUCE, NumelIn=8388608, NumelOut=8388608, Timeout(ms)=1800000) ran for 1800048 milliseconds before timing out.
[rank0]:[E ProcessGroupNCCL.cpp:577] [Rank 0] Some NCCL operations have failed or timed out. Due to the asynchronous \
nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
[rank0]:[E ProcessGroupNCCL.cpp:583] [Rank 0] To avoid data inconsistency, we are taking the entire process down.
"""


# --- PyTorch

def test_a_cuda_oom_traceback_is_cuda_oom_with_the_allocation_line_as_evidence() -> None:
    result = triage(lines(TORCH_OOM), exit_code=1)
    assert result.primary == "cuda_oom"
    oom = result.findings[0]
    assert (oom.cls, oom.gotcha, oom.severity) == ("cuda_oom", "U10", "error")
    assert oom.evidence[0].startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB")
    assert len(oom.evidence[0]) <= 320
    assert "expandable_segments" in oom.remedy


def test_the_older_cuda_oom_message_is_cuda_oom_too() -> None:
    assert triage([OLD_TORCH_OOM]).primary == "cuda_oom"


def test_cuda_oom_beats_the_trailing_generic_traceback_of_torchrun() -> None:
    tail = TORCHRUN_SIGKILL.replace("exitcode  : -9", "exitcode  : 1").replace("Signal 9 (SIGKILL) received by PID 2345",
                                                                                 "<N/A>")
    tail = tail.replace("failed (exitcode: -9)", "failed (exitcode: 1)")
    result = triage(lines(TORCH_OOM) + lines(tail), exit_code=1)
    assert result.primary == "cuda_oom"
    assert result.findings[0].cls == "cuda_oom"
    assert all(f.severity == "info" for f in result.findings[1:])
    assert "preempted" not in [f.cls for f in result.findings if f.severity != "info"]


def test_an_illegal_memory_access_is_a_cuda_device_error() -> None:
    result = triage(lines("""\
Traceback (most recent call last):
  File "train.py", line 90, in <module>
    out = model(x)
RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
"""))
    assert result.primary == "cuda_device_error"
    assert only(result, "cuda_device_error").evidence == ["RuntimeError: CUDA error: an illegal memory access was encountered"]


def test_a_device_side_assert_points_at_labels_out_of_range() -> None:
    result = triage(lines("""\
../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [3,0,0] \
Assertion `t >= 0 && t < n_classes` failed.
Traceback (most recent call last):
  File "train.py", line 77, in <module>
    loss = criterion(logits, target)
RuntimeError: CUDA error: device-side assert triggered
"""))
    assert result.primary == "cuda_device_error"
    assert only(result, "cuda_device_error").gotcha == "train.O14"


def test_the_final_exception_line_decides_not_the_code_shown_in_frames() -> None:
    result = triage(lines("""\
Traceback (most recent call last):
  File "train.py", line 40, in step
    except torch.cuda.OutOfMemoryError:  # No space left on device, loss = nan
  File "train.py", line 41, in step
    raise ValueError("shapes (4, 3) and (2,) do not align")
ValueError: shapes (4, 3) and (2,) do not align
"""))
    assert result.primary == "traceback"
    tb = only(result, "traceback")
    assert tb.evidence == ['ValueError: shapes (4, 3) and (2,) do not align']
    assert tb.gotcha is None


def test_a_chained_traceback_reports_one_unclassified_crash() -> None:
    result = triage(lines("""\
Traceback (most recent call last):
  File "train.py", line 10, in <module>
    stats["loss"]
KeyError: 'loss'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "train.py", line 12, in <module>
    raise ValueError("no loss was recorded")
ValueError: no loss was recorded
"""))
    # (a KeyError reading a config mapping, `cfg["model"]`, is a config error: test_triage_context)
    assert result.primary == "traceback"
    assert only(result, "traceback").evidence == ["KeyError: 'loss'", "ValueError: no loss was recorded"]


def test_a_ddp_unused_parameter_error_carries_its_catalogue_entry() -> None:
    result = triage(["RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. "
                     "This error indicates that your module has parameters that were not used in producing loss."])
    assert (result.primary, result.findings[0].gotcha) == ("traceback", "train.D8")


# --- host memory and the OOM cascade

def test_one_worker_sigkilled_and_the_rest_sigtermed_is_host_oom_not_preemption() -> None:
    result = triage(lines(TORCHRUN_SIGKILL), exit_code=1)
    assert result.primary == "host_oom_killed"
    oom = result.findings[0]
    assert oom.gotcha == "U9"
    assert "exitcode  : -9 (pid: 2345)" in oom.evidence or any("exitcode: -9" in e for e in oom.evidence)
    assert all(f.severity == "info" for f in result.findings if f.cls == "preempted")


def test_a_bare_killed_then_ranks_sigtermed_with_exit_143_is_host_oom() -> None:
    log = lines("""\
 45%|████▌     | 450/1000 [01:23<01:42,  5.38it/s, loss=0.123]
/workspace/run.sh: line 4:  2345 Killed                  python train.py --local_rank 0
[rank1]: Received SIGTERM: 15
""")
    result = triage(log, exit_code=143)
    assert result.primary == "host_oom_killed"
    assert only(result, "host_oom_killed").evidence[0] == "/workspace/run.sh: line 4:  2345 Killed                  " \
                                                          "python train.py --local_rank 0"


def test_a_plain_exit_143_with_a_cgroup_oom_delta_is_oom() -> None:
    result = triage([], exit_code=143, oom_kill_delta=1)
    assert result.primary == "host_oom_killed"
    assert "oom_kill_delta=1" in result.findings[0].evidence
    assert [f.severity for f in result.findings if f.cls == "preempted"] == ["info"]


def test_sigterm_with_no_crash_and_no_oom_is_preemption() -> None:
    result = triage(["step 100 loss 0.5"], exit_code=143)
    assert result.primary == "preempted"
    assert result.findings[0].evidence == ["exit_code=143"]


def test_exit_137_alone_is_a_sigkill_read_as_host_oom() -> None:
    result = triage(["step 100 loss 0.5"], exit_code=137)
    assert (result.primary, result.findings[0].gotcha) == ("host_oom_killed", "U9")


def test_slurm_oom_kill_events_point_at_slurm_memory_requests() -> None:
    result = triage(["slurmstepd: error: Detected 1 oom-kill event(s) in StepId=123.batch. Some of your processes may "
                     "have been killed by the cgroup out-of-memory handler."])
    assert (result.primary, result.findings[0].gotcha) == ("host_oom_killed", "SLURM4")
    assert triage([], scheduler_state="OUT_OF_MEMORY").primary == "host_oom_killed"


def test_a_dataloader_worker_killed_by_sigkill_is_a_dataloader_error_with_the_host_ram_remedy() -> None:
    # The maintainers in the real threads (tests/corpus/logs/dataloader_error) call this a DataLoader failure; the
    # remedy still points at host RAM, the usual reason the kernel killed the worker.
    result = triage(["RuntimeError: DataLoader worker (pid 4321) is killed by signal: Killed."])
    assert result.primary == "dataloader_error"
    assert "RAM" in result.findings[0].remedy


# --- Slurm verdicts

def test_a_slurm_time_limit_is_its_own_finding_not_preemption() -> None:
    result = triage(["slurmstepd: error: *** JOB 123 ON node01 CANCELLED AT 2026-11-30T04:00:00 DUE TO TIME LIMIT ***",
                     "[rank0]: Received SIGTERM: 15"], exit_code=143)
    assert result.primary == "time_limit"
    assert [f.cls for f in result.findings if f.severity != "info"] == ["time_limit"]


def test_slurm_preemption_is_preempted() -> None:
    result = triage(["slurmstepd: error: *** JOB 124 ON node02 CANCELLED AT 2026-11-30T04:00:00 DUE TO PREEMPTION ***"])
    assert result.primary == "preempted"
    assert triage([], scheduler_state="PREEMPTED").primary == "preempted"


def test_a_kubernetes_eviction_is_preemption_unless_it_was_for_memory_or_disk() -> None:
    assert triage(["  Status:  Failed", "  Reason:  Evicted"]).primary == "preempted"
    assert triage(["The node was low on resource: memory. Container trainer was using 30Gi, which exceeds its request "
                   "of 16Gi."]).primary == "host_oom_killed"
    evicted_disk = triage(["The node was low on resource: ephemeral-storage. Container trainer was using 52Gi."])
    assert (evicted_disk.primary, evicted_disk.findings[0].gotcha) == ("disk_full", "K8S5")


def test_a_plain_scancel_is_cancelled_not_preempted() -> None:
    result = triage(["slurmstepd: error: *** JOB 125 ON node01 CANCELLED AT 2026-11-30T04:00:00 ***"], exit_code=143)
    assert result.primary == "cancelled"


# --- collectives

def test_a_deepspeed_nccl_watchdog_timeout_is_nccl_timeout() -> None:
    result = triage(lines(WATCHDOG))
    assert result.primary == "nccl_timeout"
    found = only(result, "nccl_timeout")
    assert found.gotcha == "train.D20"
    assert found.evidence[0].startswith("[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout")


def test_an_nccl_timeout_after_another_ranks_error_points_at_that_error() -> None:
    result = triage([f"[rank1]: {OLD_TORCH_OOM}", *lines(WATCHDOG)])
    assert result.primary == "cuda_oom"
    nccl = only(result, "nccl_timeout")
    assert nccl.severity == "info" and "cascade of cuda_oom" in nccl.title


def test_an_unclassified_crash_on_one_rank_explains_the_others_watchdog_timeout() -> None:
    result = triage(["[rank1]: Traceback (most recent call last):", '[rank1]:   File "train.py", line 3, in <module>',
                     "[rank1]: ZeroDivisionError: division by zero", *lines(WATCHDOG)])
    assert result.primary == "traceback"


def test_nccl_unhandled_cuda_error_is_a_cuda_fault_and_its_out_of_memory_cause_wins() -> None:
    result = triage(lines("""\
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, unhandled \
cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3
ncclUnhandledCudaError: Call to CUDA function failed.
Last error:
Cuda failure 'out of memory'
"""))
    assert result.primary == "cuda_oom"
    assert only(result, "cuda_device_error").severity == "error"


def test_nccl_system_error_and_nccl_warn_are_nccl_findings() -> None:
    result = triage(lines("""\
node01:2411:2476 [1] transport/shm.cc:114 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-vzIpS6 (size 9637888)
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, unhandled \
system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.14.3
ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
"""))
    assert result.primary == "nccl_timeout"
    assert only(result, "nccl_timeout").gotcha == "train.MN2"
    warn_only = triage(["node01:2411:2476 [1] NCCL WARN NET/Socket : Connect to 10.0.0.2<40613> failed : Connection refused"])
    assert (warn_only.primary, warn_only.findings[0].severity) == ("nccl_timeout", "warn")


# --- disk and checkpoints

def test_torch_save_unexpected_pos_is_disk_full_at_critical() -> None:
    result = triage(lines("""\
Traceback (most recent call last):
  File "train.py", line 300, in save
    torch.save(state, path)
  File "/usr/lib/python3/dist-packages/torch/serialization.py", line 476, in __exit__
    self.file_like.write_end_of_file()
RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598
"""))
    assert result.primary == "disk_full"
    found = only(result, "disk_full")
    assert (found.gotcha, found.severity) == ("U6", "critical")


def test_an_iostream_error_from_a_native_abort_is_disk_full() -> None:
    result = triage(["terminate called after throwing an instance of 'std::__ios_failure'",
                     "  what():  basic_ios::clear: iostream error", "Aborted (core dumped)"], exit_code=134)
    assert result.primary == "disk_full"


def test_no_space_left_is_disk_full_unless_inodes_ran_out() -> None:
    line = "OSError: [Errno 28] No space left on device: '/root/autodl-tmp/ckpt/step_1200.pt'"
    assert triage([line]).primary == "disk_full"
    by_inodes = triage([line], inodes_free=0)
    assert by_inodes.primary == "inode_exhausted"
    assert only(by_inodes, "inode_exhausted").gotcha == "U7"
    assert triage([line], disk_free_bytes=40 * 1024**3).primary == "inode_exhausted"


def test_free_space_facts_raise_disk_findings_without_log_lines() -> None:
    assert triage([], disk_free_bytes=100 * 1024**2).findings[0].severity == "critical"
    assert triage([], disk_free_bytes=1024**3).findings[0].severity == "warn"
    assert triage([], disk_free_bytes=500 * 1024**3).primary == "healthy"


def test_a_truncated_checkpoint_is_checkpoint_corrupt_but_a_full_disk_explains_it() -> None:
    corrupt = "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory"
    result = triage([corrupt])
    assert (result.primary, result.findings[0].gotcha) == ("checkpoint_corrupt", "train.C2")
    assert triage(["OSError: [Errno 28] No space left on device", corrupt]).primary == "disk_full"


# --- NaN

@pytest.mark.parametrize("line", [
    "step 1200 | loss: nan | lr 3e-4",
    "{'loss': nan, 'grad_norm': nan, 'learning_rate': 4.5e-05, 'epoch': 0.45}",
    "Loss is nan, stopping training",
    "Epoch 3:  45%|████▌     | 450/1000 [01:23<01:42, 5.38it/s, v_num=0, train_loss=inf]",
    "FloatingPointError: Loss became infinite or NaN at iteration=1234!",
    "Monitored metric val_loss = nan is not finite. Previous best value was inf. Signaling Trainer to stop.",
])
def test_a_loss_that_turns_nan_or_inf_is_nan_inf(line: str) -> None:
    result = triage([line])
    assert (result.primary, result.findings[0].gotcha) == ("nan_inf", "train.P8")


def test_a_deepspeed_loss_scale_at_its_minimum_is_nan_inf_but_overflow_skips_are_routine() -> None:
    assert triage(["Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."]).primary == "nan_inf"
    assert triage(["[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768"]).primary \
        == "healthy"


# --- DataLoader

def test_a_bus_error_in_a_dataloader_worker_is_shared_memory() -> None:
    result = triage([
        "RuntimeError: DataLoader worker (pid 4321) is killed by signal: Bus error. It is possible that dataloader's "
        "workers are out of shared memory. Please try to raise your shared memory limit.",
        "RuntimeError: DataLoader worker (pid(s) 4321) exited unexpectedly",
    ])
    assert result.primary == "dataloader_error"
    assert only(result, "dataloader_error").gotcha == "train.DP15"


def test_a_worker_that_exited_unexpectedly_with_a_cgroup_oom_is_host_oom() -> None:
    result = triage(["RuntimeError: DataLoader worker (pid(s) 123) exited unexpectedly"], oom_kill_delta=2)
    assert result.primary == "host_oom_killed"
    assert only(result, "dataloader_error").severity == "info"
    assert triage(["RuntimeError: DataLoader worker (pid(s) 123) exited unexpectedly"]).primary == "dataloader_error"


# --- imports and configs

@pytest.mark.parametrize(("line", "gotcha"), [
    ("ModuleNotFoundError: No module named 'flash_attn'", "U5"),
    ("KeyError: \"Override path 'model.optim' is not a mapping\"", "U27"),
    ("hydra.errors.ConfigCompositionException: Could not override 'trainer.max_epoch'.", "U27"),
    ("omegaconf.errors.ConfigAttributeError: Key 'lr_sched' is not in struct", "U27"),
    ("AssertionError: Torch not compiled with CUDA enabled", "U31"),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "U28"),
    ("CUDA failure 804: forward compatibility was attempted on non supported HW", "RP9"),
    ("train.py: error: unrecognized arguments: --lr_sched cosine", None),
    ("huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-65f)", "train.L10"),
])
def test_import_and_config_errors_are_import_or_config(line: str, gotcha: str | None) -> None:
    result = triage([line])
    assert (result.primary, result.findings[0].gotcha) == ("import_or_config_error", gotcha)


def test_crlf_scripts_are_named_by_their_bash_messages() -> None:
    result = triage(["train.sh: line 2: $'\\r': command not found"])
    assert (result.primary, result.findings[0].gotcha) == ("import_or_config_error", "U26")
    raw_cr = triage(["run.sh: line 3: set: -\r: invalid option"])
    assert (raw_cr.primary, raw_cr.findings[0].gotcha) == ("import_or_config_error", "U26")


# --- warnings that are not crashes, and healthy logs

def test_wandb_sync_errors_while_training_goes_on_are_survived_not_a_problem() -> None:
    result = triage(["wandb: ERROR Error while calling W&B API: An internal error occurred. (<Response [500]>)",
                     "wandb: Network error (ReadTimeout), entering retry loop.",
                     " 46%|████▌     | 460/1000 [01:25<01:40,  5.38it/s, loss=0.121]"])
    assert result.primary == "healthy"
    assert [(f.cls, f.severity) for f in result.findings] == [("network_stall", "info")]
    stuck = triage(["wandb: Network error (ReadTimeout), entering retry loop."])
    assert (stuck.primary, stuck.findings[0].severity) == ("network_stall", "warn")


def test_a_network_error_that_ends_the_run_is_an_error() -> None:
    result = triage(lines("""\
Traceback (most recent call last):
  File "train.py", line 5, in <module>
    model = AutoModel.from_pretrained("meta-llama/Llama-3.1-8B")
requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. (read timeout=10)
"""))
    assert (result.primary, result.findings[0].severity) == ("network_stall", "error")


def test_a_dropped_ssh_session_is_a_warning() -> None:
    result = triage(["client_loop: send disconnect: Broken pipe"])
    assert (result.primary, result.findings[0].severity) == ("ssh_disconnect", "warn")


HEALTHY = """\
 45%|████▌     | 450/1000 [01:23<01:42,  5.38it/s, loss=0.123]
{'loss': 0.4521, 'grad_norm': 1.734, 'learning_rate': 4.5e-05, 'epoch': 0.45}
{'eval_loss': 0.3981, 'eval_runtime': 12.3, 'eval_samples_per_second': 81.2, 'epoch': 1.0}
{'train_runtime': 1234.5, 'train_samples_per_second': 50.2, 'train_steps_per_second': 3.1, 'train_loss': 0.4321, 'epoch': 3.0}
Epoch 3:  45%|████▌     | 450/1000 [01:23<01:42, 5.38it/s, v_num=0, train_loss=0.123]
epoch 3 | val_error=0.1 | error_rate=0.021 | mean_squared_error: 0.0132
Errors: 0
Validation finished with 0 errors, best_loss: inf -> 0.41
Epoch 00003: val_loss improved from inf to 0.41230, saving model to ckpt/best.pt
node01:2411:2411 [0] NCCL INFO NCCL version 2.19.3+cuda12.3
wandb: Syncing run glamorous-sun-12
[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768
Step 120/1000 | loss 0.53 | lr 3e-4
{"step": 120, "loss": 0.53, "lr": 0.0003}
Saving model checkpoint to out/checkpoint-500
Evicted 3 entries from the tokenizer cache
UserWarning: cannot import name 'fused_adam' from 'apex', falling back to torch.optim.AdamW
"""


def test_healthy_logs_with_error_words_in_metrics_raise_nothing() -> None:
    result = triage(lines(HEALTHY), exit_code=0)
    assert result.primary == "healthy"
    assert result.findings == []


def test_a_logged_exception_line_in_a_running_job_is_not_a_crash() -> None:
    assert triage(["ValueError: skipping corrupt sample 1234"]).primary == "healthy"
    assert triage(["ValueError: skipping corrupt sample 1234"], exit_code=1).primary == "traceback"


def test_a_non_zero_exit_without_any_evidence_is_an_unclassified_crash() -> None:
    result = triage(["step 10 loss 2.0"], exit_code=1)
    assert result.primary == "traceback"
    assert result.findings[0].evidence == ["exit_code=1"]


# --- re-escalation

def test_lines_already_reported_do_not_re_escalate() -> None:
    first = triage(lines(TORCH_OOM), exit_code=1)
    again = triage(lines(TORCH_OOM), exit_code=1, seen=set(first.fingerprints))
    assert again.findings == []
    assert again.repeated == ["cuda_oom"]
    assert again.primary == "cuda_oom"
    assert set(again.fingerprints) == set(first.fingerprints)


def test_the_same_failure_at_a_later_step_does_not_re_escalate_but_a_new_class_does() -> None:
    first = triage(["step 1200 | loss: nan | lr 3e-4"])
    later = triage(["step 1300 | loss: nan | lr 3e-4", "OSError: [Errno 28] No space left on device"],
                   seen=set(first.fingerprints))
    assert [f.cls for f in later.findings] == ["disk_full"]
    assert later.repeated == ["nan_inf"]


# --- the rule table itself

def test_every_rule_speaks_the_fixed_vocabulary_and_has_a_remedy() -> None:
    vocabulary = set(TRIAGE_CLASSES) | set(EXTRA_CLASSES)
    for rule in RULES:
        assert rule.cls in vocabulary, rule.id
        assert rule.role == "ignore" or rule.remedy, rule.id
    assert len({r.id for r in RULES}) == len(RULES)


def test_a_rule_whose_regex_matches_a_line_always_passes_its_cheap_needle_test() -> None:
    corpus = [*lines(TORCH_OOM), OLD_TORCH_OOM, *lines(TORCHRUN_SIGKILL), *lines(WATCHDOG), *lines(HEALTHY),
              "/workspace/run.sh: line 4:  2345 Killed                  python train.py", "Killed",
              "slurmstepd: error: *** JOB 123 ON node01 CANCELLED AT 2026-11-30T04:00:00 DUE TO TIME LIMIT ***",
              "train.sh: line 2: $'\\r': command not found", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off",
              "RuntimeError: CUDA error: unspecified launch failure", "{'loss': nan, 'grad_norm': inf}"]
    checked = 0
    for line in corpus:
        for rule in RULES:
            if rule.pattern.search(line):
                checked += 1
                assert rule.needles is None or any(n in line.lower() for n in rule.needles), (rule.id, line)
    assert checked > 20


# --- issue 12: judged as a whole log, by kind (formats as real tools print them)

def text_of(s: str) -> str:
    return s.strip("\n")


def test_fp16_overflow_shrinking_the_loss_scale_toward_zero_is_nan_inf() -> None:
    from mcp_gpu.triage.engine import triage_text

    log = "\n".join(f"| WARNING: overflow detected, setting loss scale to: {2.0 ** -k}" for k in range(1, 7))
    report = triage_text(log)
    assert report.primary == "nan_inf"
    assert "loss scale" in report.findings[0].evidence[0]


def test_one_overflow_at_warm_up_followed_by_training_is_healthy() -> None:
    from mcp_gpu.triage.engine import triage_text

    log = text_of("""
[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768
[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 32768, reducing to 16384
Step 20/1000 | loss 2.53 | lr 3e-4
Step 40/1000 | loss 2.31 | lr 3e-4
""")
    assert triage_text(log).primary == "healthy"


def test_a_caught_and_logged_traceback_followed_by_training_is_healthy_with_an_info_finding() -> None:
    from mcp_gpu.triage.engine import triage_text

    log = text_of("""
step 100 | loss 0.53
ERROR:root:could not upload metrics, will retry
Traceback (most recent call last):
  File "/app/metrics.py", line 40, in push
    r = session.post(url, json=payload, timeout=5)
requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='metrics.example', port=443): Read timed out. (read timeout=5)
step 120 | loss 0.51
step 140 | loss 0.50
""")
    report = triage_text(log)
    assert report.primary == "healthy"
    assert "network_stall" in [f.cls for f in report.findings]
    assert all(f.severity == "info" and "survived" in f.title for f in report.findings)


def test_a_traceback_that_ends_the_log_is_never_healthy() -> None:
    from mcp_gpu.triage.engine import triage_text

    cut_off = text_of("""
step 100 | loss 0.53
Traceback (most recent call last):
  File "/app/train.py", line 88, in <module>
    main()
  File "/app/train.py", line 70, in main
    trainer.fit()
""")
    report = triage_text(cut_off)
    assert report.primary == "traceback"
    assert "ends inside a traceback" in report.findings[0].evidence[0]


@pytest.mark.parametrize("line", [
    "Segmentation fault (core dumped)",
    "Fatal Python error: Aborted",
    "[ERROR] process terminated with signal SIGABRT",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "srun: error: node07: task 3: Exited with exit code 1",
])
def test_a_fatal_sign_without_a_known_cause_is_a_traceback_with_its_evidence(line: str) -> None:
    from mcp_gpu.triage.engine import triage_text

    report = triage_text(f"step 10 | loss 2.0\nstep 20 | loss 1.9\n{line}")
    assert report.primary == "traceback"
    assert report.findings[0].evidence and report.confidence > 0


def test_the_named_cause_a_few_lines_above_beats_the_generic_crash_that_follows() -> None:
    from mcp_gpu.triage.engine import triage_text

    log = text_of("""
[rank3]: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB
[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, \
OpType=ALLREDUCE) ran for 600020 milliseconds before timing out.
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
""")
    report = triage_text(log)
    assert report.primary == "cuda_oom"
    assert all(f.severity == "info" for f in report.findings[1:])


def test_collective_timeouts_seen_only_through_the_watchdog_frames_are_nccl_timeout() -> None:
    from mcp_gpu.triage.engine import triage_text

    log = text_of("""
terminate called after throwing an instance of 'c10::DistBackendError'
Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:565 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f4a in libc10.so)
frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >)
""")
    assert triage_text(log).primary == "nccl_timeout"


@pytest.mark.parametrize(("line", "cls"), [
    ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access", "cuda_device_error"),
    ("2024-01-02 W external/xla/stream_executor/cuda/cuda_driver.cc: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure",
     "cuda_device_error"),
    ("requests.exceptions.ConnectionError: ('Connection aborted.', RemoteDisconnected('Remote end closed connection "
     "without response'))", "network_stall"),
    ("OSError: We couldn't connect to 'https://huggingface.co' to load this file", "network_stall"),
    ("ConnectionResetError: [Errno 104] Connection reset by peer", "network_stall"),
    ("2024-05-01T10:00:00Z Spot instance interruption notice received; instance-action: terminate", "preempted"),
    ("torch.distributed.elastic.multiprocessing.api.SignalException: Process 4113 got signal: 1", "preempted"),
    ("RuntimeError: DataLoader worker (pid 3012) is killed by signal: Segmentation fault.", "dataloader_error"),
    ("RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory",
     "checkpoint_corrupt"),
    ("safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge", "checkpoint_corrupt"),
    ("_pickle.UnpicklingError: pickle data was truncated", "checkpoint_corrupt"),
    ("tensorflow.python.framework.errors_impl.InternalError: Failed copying input tensor from CPU:0 to GPU:0 in order "
     "to run _EagerConst: Dst tensor is not initialized.", "cuda_oom"),
    ("Process finished with exit code -1073741819 (0xC0000005)", "traceback"),
    ("torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL", "host_oom_killed"),
    ("BrokenPipeError: [Errno 32] Broken pipe", "traceback"),
    ("/opt/conda/lib/python3.10/site-packages/torch/cuda/__init__.py:173: UserWarning: NVIDIA H100 80GB HBM3 with CUDA "
     "capability sm_90 is not compatible with the current PyTorch installation.", "import_or_config_error"),
    ("train.py:196: FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated.", "healthy"),
    ("WARNING: unrecognized option 'fused_adam' in the config, ignoring it", "healthy"),
    ("[WARNING] flash-attn is not installed, falling back to the eager attention", "healthy"),
    ("ImportError: flash_attn requires torch>=2.1 but you have torch 2.0.1", "import_or_config_error"),
    ("ValueError: --lr_scheduler must be one of ['cosine', 'linear']", "import_or_config_error"),
])
def test_kinds_worded_by_other_frameworks_clouds_and_launchers(line: str, cls: str) -> None:
    from mcp_gpu.triage.engine import triage_text

    assert triage_text(f"step 10 | loss 2.0\n{line}").primary == cls


def test_a_pasted_df_table_with_a_full_filesystem_is_disk_full_and_a_full_inode_table_is_inodes() -> None:
    from mcp_gpu.triage.engine import triage_text

    df = text_of("""
Filesystem      Size  Used Avail Use% Mounted on
/dev/sda1       104G  104G     0 100% /
/dev/loop0       99M   99M     0 100% /snap/core/8935
tmpfs           7.9G     0  7.9G   0% /dev/shm
""")
    assert triage_text(df).primary == "disk_full"
    dfi = text_of("""
Filesystem     Inodes IUsed IFree IUse% Mounted on
/dev/vda1        640K  640K     0  100% /
tmpfs            126K     1  126K    1% /dev/shm
""")
    assert triage_text(dfi).primary == "inode_exhausted"


def test_every_finding_carries_a_confidence_and_the_report_the_primarys() -> None:
    from mcp_gpu.triage.engine import TriageFinding, triage_text

    report = triage_text(TORCH_OOM)
    assert all(isinstance(f, TriageFinding) for f in report.findings)
    assert report.confidence == report.findings[0].confidence >= 0.8  # type: ignore[attr-defined]


def test_a_progress_bar_flushed_once_after_the_crash_does_not_make_it_survived() -> None:
    from mcp_gpu.triage.engine import triage_text

    log = text_of("""
Epoch 3:  45%|████▌     | 450/1000 [01:23<01:42,  5.38it/s, loss=0.123]
Traceback (most recent call last):
  File "/app/train.py", line 88, in <module>
    main()
ValueError: too many values to unpack (expected 2)
Epoch 3:  45%|████▌     | 451/1000 [01:23<01:42,  5.38it/s, loss=0.122]
""")
    assert triage_text(log).primary == "traceback"


def test_nan_that_persists_is_nan_inf_and_nan_beside_a_finite_loss_is_not() -> None:
    from mcp_gpu.triage.engine import triage_text

    persisting = "\n".join(f"Epoch(train) [1][{i}/735]  loss: 2.{i}  grad_norm: nan" for i in range(240, 300, 10))
    assert triage_text("Epoch(train) [1][230/735]  loss: 2.7  grad_norm: 2.5\n" + persisting).primary == "nan_inf"
    running_average = "INFO Train: [0/300][4050/5004]  lr 0.000500  loss 3.2572 (3.3279)  grad_norm 1.0323 (nan)"
    assert triage_text(running_average).primary == "healthy"


def test_across_restarts_the_first_failure_is_the_root_cause() -> None:
    from mcp_gpu.triage.engine import triage_text

    log = text_of("""
step 100 | loss 0.53
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB
[WARNING] torchelastic: Worker group failed; restarting worker group, restart_count=1
step 90 | loss 0.55
step 100 | loss 0.53
OSError: [Errno 98] Address already in use
""")
    report = triage_text(log)
    assert report.primary == "cuda_oom"


def test_a_value_at_the_very_end_of_the_log_is_seen() -> None:
    from mcp_gpu.triage.engine import triage_text

    assert triage_text("step 1 | loss 2.0\nstep 2 | loss inf").primary == "nan_inf"


@pytest.mark.parametrize("prefix", ["[1,0]<stderr>:", "worker-1: ", "10.0.0.2: ", "[rank1]:", "3: "])
def test_tracebacks_behind_launcher_prefixes_are_walked_to_their_exception_line(prefix: str) -> None:
    from mcp_gpu.triage.engine import triage_text

    log = "\n".join(prefix + line for line in [
        "Traceback (most recent call last):", '  File "train.py", line 9, in <module>', "    loss.backward()",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"])
    report = triage_text(log)
    assert report.primary == "cuda_oom"
    assert report.findings[0].evidence[0].startswith("torch.OutOfMemoryError")


def test_a_log_of_one_endless_progress_bar_line_is_read_redraw_by_redraw() -> None:
    from mcp_gpu.triage.engine import triage_text

    bar = "".join(f"\r{i % 100}%|████▌     | {i}/100000 [01:23<01:42,  5.38it/s, loss=0.{i % 97}]" for i in range(2000))
    assert triage_text(bar).primary == "healthy"
    assert triage_text(bar + "\rRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB").primary == "cuda_oom"
    assert triage_text("run.sh: line 3: set: -\r: invalid option").primary == "import_or_config_error"


def test_progress_flushed_from_a_buffered_stdout_after_an_uncaught_traceback_is_not_survival() -> None:
    from mcp_gpu.triage.engine import triage_text

    log = text_of("""
step 100 | loss 0.53
Traceback (most recent call last):
  File "/app/train.py", line 88, in <module>
    main()
KeyError: 'labels'
step 101 | loss 0.52
step 102 | loss 0.52
""")
    report = triage_text(log)
    assert report.primary == "traceback"
    assert report.findings[0].evidence == ["KeyError: 'labels'"]


def test_no_space_left_while_the_pasted_df_shows_room_is_inode_exhaustion() -> None:
    from mcp_gpu.triage.engine import triage_text

    log = text_of("""
OSError: [Errno 28] No space left on device: '/data/cache/shard-00017.arrow'
$ df -h
Filesystem      Size  Used Avail Use% Mounted on
/dev/sda1       1.8T  900G  900G  50% /data
tmpfs           7.9G     0  7.9G   0% /dev/shm
""")
    assert triage_text(log).primary == "inode_exhausted"


def test_an_assertion_guarding_finiteness_is_nan_inf() -> None:
    from mcp_gpu.triage.engine import triage_text

    log = text_of("""
Traceback (most recent call last):
  File "/app/train.py", line 120, in train_step
    assert not torch.isnan(loss).any(), "loss is nan"
AssertionError
""")
    report = triage_text(log)
    assert report.primary == "nan_inf"
    assert "isnan" in report.findings[0].evidence[0]
