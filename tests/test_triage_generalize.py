"""Triage rules that generalize beyond one wording: threads, teardown, source lines, topic words, trends at warm-up.

Each test is a log in a real tool's format where a naive reading gets the verdict wrong; the comment says which.
"""

from __future__ import annotations

from mcp_gpu.triage.engine import triage_text
from mcp_gpu.triage.lexicon import topic


def primary(text: str) -> str:
    return triage_text(text).primary


def test_an_unknown_wording_that_names_gpu_memory_is_a_gpu_oom_not_a_generic_crash() -> None:
    # no rule knows this allocator's wording; the subject it names does
    log = ("step 120 loss 2.31\n"
           "Traceback (most recent call last):\n"
           '  File "train.py", line 88, in <module>\n'
           "    out = model(batch)\n"
           "RuntimeError: the VRAM pool is exhausted while reserving a workspace of 2.1 GiB\n")
    report = triage_text(log)
    assert report.primary == "cuda_oom"
    assert report.confidence < 0.7  # a topic guess, weaker than a named rule


def test_a_device_word_alone_does_not_make_a_code_bug_a_gpu_fault() -> None:
    assert topic("RuntimeError: Expected all tensors to be on the same device, but found cuda:0 and cpu!") is None
    log = ("Traceback (most recent call last):\n"
           '  File "train.py", line 12, in <module>\n'
           "    y = w @ x\n"
           "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!\n")
    assert primary(log) == "traceback"


def test_a_thread_dying_after_the_final_step_does_not_fail_the_run() -> None:
    # wandb's uploader thread raising after the weights were saved: the process itself finished
    log = ("train: 100%|##########| 3000/3000 [1:18:19<00:00,  1.57s/it, loss: 2.6e-01]\n"
           "Saved to output/run/model.safetensors\n"
           "Thread SenderThread:\n"
           "Traceback (most recent call last):\n"
           '  File "/usr/lib/python3.10/site-packages/wandb/sdk/internal/internal_util.py", line 48, in run\n'
           "    self._run()\n"
           '  File "/usr/lib/python3.10/site-packages/wandb/sdk/internal/sender.py", line 398, in send\n')
    assert primary(log) == "healthy"


def test_a_cleanup_hook_failing_at_interpreter_exit_is_not_a_crash() -> None:
    log = ("Epoch 20/20 - loss: 0.0412 - val_loss: 0.0533\n"
           "Error in atexit._run_exitfuncs:\n"
           "Traceback (most recent call last):\n"
           '  File "/usr/lib/python3/site-packages/matplotlib/_pylab_helpers.py", line 78, in destroy_all\n'
           "    manager.destroy()\n"
           "RuntimeError: main thread is not in main loop\n")
    assert primary(log) == "healthy"


def test_a_segfault_after_the_run_finished_is_teardown_but_a_python_error_after_it_is_not() -> None:
    done = ("I Training of Epoch 49 - loss: 3.17\n"
            "I FINISHED Optimization - training time: 0:03:54\n"
            "I Models exported at ./export\n")
    assert primary(done + "Segmentation fault (core dumped)\n") == "healthy"
    # the final evaluation crashed: its results are lost, that is a failure
    crashed_eval = done + ("Traceback (most recent call last):\n"
                           '  File "evaluate.py", line 40, in <module>\n'
                           "    score = metrics[10]\n"
                           "IndexError: list index out of range\n")
    assert primary(crashed_eval) == "traceback"
    # the same segfault with no sign that the run had finished stays a crash
    assert primary("I Training of Epoch 49 - loss: 3.17\nSegmentation fault (core dumped)\n") == "traceback"


def test_the_source_line_a_frame_quotes_is_code_not_an_event() -> None:
    # a paste that starts at a frame (no header): `raise MisconfigurationException` is the code being shown
    log = ('File "/env/lib/python3.10/site-packages/lightning/pytorch/callbacks/model_checkpoint.py", line 382, in _save\n'
           "    raise MisconfigurationException(m)\n"
           "lightning.fabric.utilities.exceptions.MisconfigurationException: `ModelCheckpoint(monitor='val/acc')` "
           "could not find the monitored key in the returned metrics: ['train/loss', 'val/loss']\n")
    report = triage_text(log)
    assert report.primary == "traceback"  # a metric the code never logs: a bug, not a bad config
    assert all("raise MisconfigurationException" not in line for f in report.findings for line in f.evidence)


def test_an_exception_whose_message_is_on_the_lines_below_is_read_with_it() -> None:
    log = ("Traceback (most recent call last):\n"
           '  File "/env/lib/python3.7/site-packages/torch/cuda/__init__.py", line 63, in _check_driver\n'
           "    of the CUDA driver.\"\"\".format(str(torch._C._cuda_getDriverVersion())))\n"
           "AssertionError: \n"
           "The NVIDIA driver on your system is too old (found version 10010).\n"
           "Please update your GPU driver by downloading and installing a new\n")
    assert primary(log) == "import_or_config_error"


def test_an_optional_dependency_reported_under_a_warning_is_not_a_missing_module() -> None:
    probe = ("WARNING  A matching Triton is not available, some optimizations will not be enabled\n"
             "Traceback (most recent call last):\n"
             '  File "/venv/lib/site-packages/xformers/__init__.py", line 57, in _is_triton_available\n'
             "    import triton  # noqa\n"
             "ModuleNotFoundError: No module named 'triton'\n")
    assert primary(probe) == "healthy"
    crash = ("Traceback (most recent call last):\n"
             '  File "train.py", line 3, in <module>\n'
             "    import deepspeed\n"
             "ModuleNotFoundError: No module named 'deepspeed'\n")
    assert primary(crash) == "import_or_config_error"


def test_a_queue_feeder_thread_that_cannot_write_shared_memory_starves_the_loader() -> None:
    head = ("epoch:  342\n"
            "Traceback (most recent call last):\n"
            '  File "/usr/lib/python3.8/multiprocessing/queues.py", line 239, in _feed\n'
            "    obj = _ForkingPickler.dumps(obj)\n")
    assert primary(head + "RuntimeError: unable to write to file </torch_15769_1517813162>\n") == "dataloader_error"
    # the same thread failing to send to a consumer that already left is routine at shutdown
    assert primary(head + "BrokenPipeError: [Errno 32] Broken pipe\n") == "healthy"


def test_a_nan_gradient_norm_during_the_loss_scale_search_at_warm_up_is_not_divergence() -> None:
    warm = ("2025-08-15 15:35:48,180 - mmdet3d - INFO - Epoch [1][50/30895]\tlr: 7.973e-05, time: 1.921, "
            "loss: 12.0312, grad_norm: nan\n")
    assert primary(warm) == "healthy"
    later = ("2025-08-16 10:00:00,000 - mmdet3d - INFO - Epoch [4][3000/30895]\tlr: 7.973e-05, loss: nan, grad_norm: nan\n"
             "2025-08-16 10:01:00,000 - mmdet3d - INFO - Epoch [4][3050/30895]\tlr: 7.973e-05, loss: nan, grad_norm: nan\n")
    assert primary(later) == "nan_inf"


def test_tensorboards_nan_warning_alone_names_no_diverging_loss() -> None:
    log = ("WARNING:root:NaN or Inf found in input tensor.\n"
           "{'loss': 3.0489, 'learning_rate': 6e-05, 'epoch': 0.01}\n"
           "WARNING:root:NaN or Inf found in input tensor.\n")
    assert primary(log) == "healthy"
    diverged = log + ("{'loss': nan, 'learning_rate': 6e-05, 'epoch': 0.02}\n"
                      "{'loss': nan, 'learning_rate': 6e-05, 'epoch': 0.03}\n")
    assert primary(diverged) == "nan_inf"


def test_an_abort_after_a_watchdog_timeout_is_the_timeout() -> None:
    log = ("terminate called after throwing an instance of 'std::runtime_error'\n"
           "  what():  [Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=806, OpType=BROADCAST, "
           "Timeout(ms)=1800000) ran for 1801027 milliseconds before timing out.\n"
           "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 561635 closing signal SIGTERM\n"
           "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 7 (pid: 561642) of binary: "
           "/usr/bin/python\n")
    assert primary(log) == "nccl_timeout"


def test_a_fatal_check_stops_the_progress_of_a_rerun_from_hiding_the_gpu_fault() -> None:
    log = ("2019-02-04 14:54:36.245826: E tensorflow/stream_executor/cuda/cuda_timer.cc:60] Internal: error destroying "
           "CUDA event in context 0x1: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure\n"
           "2019-02-04 14:54:36.259713: F tensorflow/stream_executor/cuda/cuda_dnn.cc:231] Check failed: status == "
           "CUDNN_STATUS_SUCCESS (7 vs. 0)Failed to set cuDNN stream.\n"
           "$ python train.py 10\n"
           "Epoch 1/10\n"
           "10/500 [..............................] - ETA: 2:41 - loss: 0.6931\n"
           "20/500 [>.............................] - ETA: 2:35 - loss: 0.6912\n")
    assert primary(log) == "cuda_device_error"


def test_schedulers_and_clouds_in_their_own_words() -> None:
    assert primary("=>> PBS: job killed: walltime 259217 exceeded limit 259200\n") in ("time_limit", "preempted")
    assert primary("AzureMLCompute job failed. PreemptionError: Nodes of this job got pre-empted. Reason: Received "
                   "pre-emption warning signal\n") == "preempted"
    assert primary("Your runtime has been disconnected due to inactivity or reaching its maximum duration.\n") == "preempted"
    assert primary("TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.\nExited with exit code 143.\n") == \
        "host_oom_killed"
    # Slurm says "at some point" of a step that completed: accounting, not a kill
    assert primary("51200+0 records out\nslurmstepd: Exceeded step memory limit at some point.\n") == "healthy"
