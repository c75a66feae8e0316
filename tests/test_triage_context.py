"""Triage verdicts that depend on the lines around a line: where a traceback was raised, what was printed after it,
what a chained exception was handling, which level a record inside a record has, what a workflow manager quotes back.

Each test pairs a log with its near twin where the context says the opposite, so that neither verdict can come from
the wording alone.
"""

from __future__ import annotations

from mcp_gpu.triage.engine import triage_text

PROGRESS = "".join(f"Epoch 3: {i}/500 [00:{i:02d}<04:10, 2.0it/s, loss=0.{60 - i}]\n" for i in range(1, 6))
MORE_PROGRESS = PROGRESS.replace("Epoch 3", "Epoch 4")


def primary(text: str) -> str:
    return triage_text(text).primary


_SPAWN_FRAMES = (
    '  File "train.py", line 49, in main\n'
    "    for i, data in enumerate(loader):\n"
    '  File "C:\\Python39\\lib\\site-packages\\torch\\utils\\data\\dataloader.py", line 368, in __iter__\n'
    "    return self._get_iterator()\n"
    '  File "C:\\Python39\\lib\\site-packages\\torch\\utils\\data\\dataloader.py", line 1040, in __init__\n'
    "    w.start()\n"
    '  File "C:\\Python39\\lib\\multiprocessing\\process.py", line 121, in start\n'
    "    self._popen = self._Popen(self)\n"
    '  File "C:\\Python39\\lib\\multiprocessing\\reduction.py", line 60, in dump\n'
    "    ForkingPickler(file, protocol).dump(obj)\n"
)


def test_a_dataset_that_does_not_pickle_when_the_loader_spawns_workers_is_a_dataloader_error() -> None:
    log = "Traceback (most recent call last):\n" + _SPAWN_FRAMES + "TypeError: cannot pickle '_thread.RLock' object\n"
    report = triage_text(log)
    assert report.primary == "dataloader_error"
    assert "pickle" in report.findings[0].evidence[0]


def test_the_same_paste_cut_above_its_traceback_header_is_read_the_same_way() -> None:
    log = _SPAWN_FRAMES + "TypeError: can't pickle module objects\n"
    assert primary(log) == "dataloader_error"


def test_a_pickling_failure_outside_the_data_loader_stays_a_code_bug() -> None:
    # the same exception raised by copy.deepcopy of a model holding a lock: no DataLoader frame, no loader verdict
    log = ("Traceback (most recent call last):\n"
           '  File "train.py", line 80, in <module>\n'
           "    ema = copy.deepcopy(model)\n"
           '  File "/usr/lib/python3.10/copy.py", line 161, in deepcopy\n'
           "    rv = reductor(4)\n"
           "TypeError: cannot pickle '_thread.RLock' object\n")
    assert primary(log) == "traceback"


_SAVE = ("Training complete. Saving checkpoint as last.ckpt\n"
         "Traceback (most recent call last):\n"
         '  File "/usr/lib/python3.10/site-packages/torch/serialization.py", line 379, in save\n'
         "    _save(obj, opened_zipfile, pickle_module, pickle_protocol)\n")
_UNEXPECTED_POS = ("RuntimeError: [enforce fail at ..\\caffe2\\serialize\\inline_container.cc:319] . unexpected pos "
                   "9926808960 vs 9926808856\n")


def test_a_checkpoint_write_cut_short_by_a_memory_error_is_host_memory_not_a_full_disk() -> None:
    log = (_SAVE + "MemoryError\n\n"
           "During handling of the above exception, another exception occurred:\n\n"
           "Traceback (most recent call last):\n"
           '  File "/usr/lib/python3.10/site-packages/torch/serialization.py", line 259, in __exit__\n'
           "    self.file_like.write_end_of_file()\n" + _UNEXPECTED_POS)
    assert primary(log) == "host_oom_killed"


def test_a_checkpoint_write_cut_short_with_nothing_before_it_is_a_full_disk() -> None:
    log = _SAVE + _UNEXPECTED_POS
    assert primary(log) == "disk_full"


def test_a_logger_that_files_stderr_under_error_does_not_make_info_records_errors() -> None:
    # FastChat's StreamToLogger: uvicorn's INFO lines arrive as "| ERROR | stderr | INFO: ..."
    log = ("2023-06-16 11:56:46 | INFO | model_worker | Send heart beat. Models: ['vicuna-7b']. global_counter: 3.\n"
           "2023-06-16 11:56:46 | ERROR | stderr | INFO:     Shutting down\n"
           "2023-06-16 11:56:47 | ERROR | stderr | INFO:     Waiting for application shutdown.\n"
           "2023-06-16 11:56:47 | ERROR | stderr | INFO:     Application shutdown complete.\n")
    assert primary(log) == "healthy"
    # the same logger passing on a real error is still one
    failing = log + "2023-06-16 11:56:48 | ERROR | stderr | RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert primary(failing) == "cuda_device_error"


def test_a_traceback_the_program_prints_and_then_says_it_copes_with_is_survived_when_training_goes_on() -> None:
    tb = ("Traceback (most recent call last):\n"
          '  File "train.py", line 12, in <module>\n'
          "    from apex import amp\n"
          "ModuleNotFoundError: No module named 'apex'\n"
          "Apex not found, falling back to native AMP.\n")
    assert primary(PROGRESS + tb + MORE_PROGRESS) == "healthy"
    # with nothing after it, it is what the log ends on
    assert primary(PROGRESS + tb) == "import_or_config_error"
    # and without the line saying it copes, an uncaught traceback is a death even if lines follow
    uncaught = tb.replace("Apex not found, falling back to native AMP.\n", "")
    assert primary(PROGRESS + uncaught + MORE_PROGRESS) == "import_or_config_error"


def test_a_workflow_manager_quoting_the_slurm_state_names_the_time_limit() -> None:
    log = ("status_of_jobs after sacct is: {'2254': 'TIMEOUT'}\n"
           "Error in rule run_model:\n"
           "    message: SLURM-job '2254' failed, SLURM status is: 'TIMEOUT'. For further error details see the "
           "cluster/cloud log and the log files of the involved rule(s).\n")
    report = triage_text(log)
    assert report.primary == "time_limit"
    # a state that is not a time limit is not read as one
    assert triage_text(log.replace("TIMEOUT", "FAILED")).primary != "time_limit"


def test_an_evicted_condor_job_and_a_terminated_instance_are_stops_from_outside() -> None:
    condor = ("07/27/11 19:42:43 Event: ULOG_EXECUTE for Condor Node train_7 (5437648.0.0)\n"
              "07/27/11 20:11:30 Event: ULOG_JOB_EVICTED for Condor Node train_7 (5437648.0.0)\n"
              "07/27/11 20:21:56   Node train_7, Condor ID 5437648, status STATUS_SUBMITTED\n")
    assert primary(condor) == "preempted"
    asg = "2019-06-16 19:25:53,133 INFO [sqswatcher] Processing EC2_INSTANCE_TERMINATE event for instance i-053275a5\n"
    assert primary(asg) == "preempted"


def test_a_site_quota_report_near_its_file_limit_names_the_inodes() -> None:
    log = ("concurrent.futures.process.BrokenProcessPool: A process in the process pool was terminated abruptly.\n"
           "$ idrquota -w\n"
           "WORK: 1121 / 5120 Gio (21.89%)\n"
           "WORK: 493163 / 500000 inodes (98.63%)\n")
    assert primary(log) == "inode_exhausted"
    assert primary(log.replace("(98.63%)", "(12.40%)")) != "inode_exhausted"


def test_gnu_time_reporting_signal_9_is_a_kill_and_signal_6_a_crash() -> None:
    report = ("Command terminated by signal {n}\n"
              '\tCommand being timed: "lstmtraining --max_image_MB 12000"\n'
              "\tMaximum resident set size (kbytes): 16282880\n"
              "\tExit status: 0\n")
    assert primary(report.format(n=9)) == "host_oom_killed"
    assert primary(report.format(n=11)) == "traceback"


def test_a_traceback_printed_as_an_indented_block_is_read_to_its_exception() -> None:
    # uv reporting a failed build: the backend's traceback sits indented under `[stderr]`, and a hint follows
    log = ("  × Failed to build `flash-attn==2.8.2`\n"
           "  ╰─▶ Call to `setuptools.build_meta:__legacy__.build_wheel` failed (exit status: 1)\n\n"
           "      [stderr]\n"
           "      Traceback (most recent call last):\n"
           '        File "<string>", line 8, in <module>\n'
           "      ModuleNotFoundError: No module named 'setuptools'\n\n"
           "      hint: This usually indicates a problem with the package or the build environment.\n")
    assert primary(log) == "import_or_config_error"


def test_a_paste_cut_on_a_module_frame_inside_an_import_chain_is_a_module_that_does_not_load() -> None:
    chain = ("Traceback (most recent call last):\n"
             '  File "examples/train_dpo.py", line 22, in <module>\n'
             "    from aligner.algorithms.dpo import DPOTrainer\n"
             '  File "/opt/lib/aligner/algorithms/dpo.py", line 22, in <module>\n'
             "    from nemo.collections.nlp.data import samplers\n"
             '  File "/opt/NeMo/nemo/collections/nlp/data/retro_dataset.py", line 55, in <module>\n')
    assert primary(chain) == "import_or_config_error"
    # cut on a frame of a function being run, not an import, it is only a traceback cut short
    running = chain.replace("line 55, in <module>", "line 55, in build_datasets").replace(
        "    from nemo.collections.nlp.data import samplers\n", "    ds = build_datasets(cfg)\n")
    assert primary(running) == "traceback"


def test_a_nan_printed_once_right_before_a_gpu_kernel_fault_is_the_faults_output() -> None:
    log = ("Batch id: 0 / 7122\n"
           "loss = -nan\n\n"
           "Check failed: error == cudaSuccess CUDA error an illegal memory access was encountered at "
           "include/core/solver.h:1539\n"
           "*** Check failure stack trace: ***\n")
    assert primary(log) == "cuda_device_error"
    # NaN that kept coming before the fault is divergence, which then broke a kernel
    diverging = "".join(f"step {i} loss = nan\n" for i in range(5)) + log
    assert primary(diverging) == "nan_inf"


def test_nan_statistics_of_a_tabular_logger_before_the_first_update_recover_when_finite_ones_follow() -> None:
    nan_rows = "".join(f"{name:<26}nan\n" for name in ("lossAverage", "lossStd", "gradNormAverage"))
    finite_rows = "lossAverage                  0.011436\nlossStd                      0.0126516\n"
    assert primary(nan_rows + "Itr #10 saving snapshot...\n" + finite_rows) == "healthy"
    assert primary(nan_rows) == "nan_inf"


def test_a_lost_heartbeat_in_the_coordination_service_is_a_peer_gone_not_a_preemption() -> None:
    # its message lists "got preempted" among what it may mean
    log = ("I1115 16:00:39.451247 140641718562816 trainer.py:501] Training: step 198\n"
           "2022-11-15 16:03:15.140058: E external/org_tensorflow/tensorflow/core/distributed_runtime/coordination/"
           "coordination_service.cc:954] /job:jax_worker/replica:0/task:37 has been set to ERROR in coordination "
           "service: UNAVAILABLE: Task /job:jax_worker/replica:0/task:37 heartbeat timeout. This indicates that the "
           "remote task has failed, got preempted, or crashed unexpectedly.\n")
    assert primary(log) == "nccl_timeout"


def test_a_model_the_hub_does_not_have_is_a_config_error_not_a_network_fault() -> None:
    log = ("2022-01-25 19:29:56,293 - __main__ - INFO -  loaded train_dataset length is: 16000\n"
           "404 Client Error: Not Found for url: https://huggingface.co/None/resolve/main/config.json\n"
           "Traceback (most recent call last):\n"
           '  File "/opt/conda/lib/python3.8/site-packages/transformers/configuration_utils.py", line 550, in get\n')
    assert primary(log) == "import_or_config_error"


def _overflow_frames(deepest: str) -> str:
    return ('  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/engine.py", line 2213, in step\n'
            "    self._take_model_step(lr_kwargs)\n"
            '  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/zero/stage3.py", line 1694, in '
            "_overflow_check_and_loss_scale_update\n"
            "    self._update_scale(self.overflow)\n" + deepest)


def test_a_paste_cut_inside_the_fp16_overflow_check_is_the_loss_scale_running_out() -> None:
    # frames pasted without their header, cut inside the loss scaler: the scale could not shrink any more
    cut = _overflow_frames('  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/fp16/loss_scaler.py", '
                           "line 181, in update_scale\n")
    assert primary(PROGRESS + cut) == "nan_inf"
    # the same frames, then training goes on: a frame line is a place in the code, not an overflow that happened
    assert primary(PROGRESS + cut + "    raise Exception('handled')\n" + MORE_PROGRESS) == "healthy"


def test_a_traceback_that_lost_its_indentation_is_read_frame_by_frame() -> None:
    # (Markdown drops leading spaces: frames and their code lines at column 0)
    def flat(code: str, error: str) -> str:
        return ('Traceback (most recent call last):\nFile "train.py", line 640, in\nmain(opt)\n'
                f'File "/home/u/proj/utils/loss.py", line 98, in __init__\n{code}\n{error}\n')
    config = triage_text(PROGRESS + flat("self.gamma = hyp['fl_gamma'] # focal loss gamma", "KeyError: 'fl_gamma'"))
    assert config.primary == "import_or_config_error"
    assert "KeyError: 'fl_gamma'" in config.findings[0].evidence[0]
    # a KeyError on the program's own data is a code bug, and the frame above it is not taken for the exception
    bug = triage_text(PROGRESS + flat("total = stats['loss'].avg", "KeyError: 'loss'"))
    assert bug.primary == "traceback"
    assert bug.findings[0].evidence[0].startswith("KeyError")
