"""Triage rules that generalize beyond one wording: threads, teardown, source lines, topic words, trends at warm-up.

Each test is a log in a real tool's format where a naive reading gets the verdict wrong; the comment says which.
"""

from __future__ import annotations

import pytest

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
           "RuntimeError: Expected all tensors to be on the same device, but found at least two devices,"
           " cuda:0 and cpu!\n")
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
    log = ('File "/env/lib/python3.10/site-packages/lightning/pytorch/callbacks/model_checkpoint.py", line 382, '
           'in _save\n'
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
             "2025-08-16 10:01:00,000 - mmdet3d - INFO - Epoch [4][3050/30895]\tlr: 7.973e-05, loss: nan,"
             " grad_norm: nan\n")
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


# How other tools, schedulers and clouds word each failure (from their documentation and source), one line each:
# the verdict must not depend on which stack printed it.
WORDINGS = [
 ("cuda_oom", "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"
              " when initializing the engine."),
 ("cuda_oom", "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.97 GiB total capacity)"),
 ("cuda_oom", "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to"
              " allocate 17179869184 bytes."),
 ("cuda_oom", "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 8192.00 MiB on device 0: cudaMalloc"
              " failed: out of memory"),
 ("cuda_oom", "paddle.fluid.core_avx.EnforceNotMet: ResourceExhaustedError: Out of memory error on GPU 0."
              " Cannot allocate 1.2GB memory on GPU 0"),
 ("host_oom_killed", "Container killed by YARN for exceeding memory limits. 10.4 GB of 10 GB physical memory used."),
 ("host_oom_killed", "java.lang.OutOfMemoryError: Java heap space"),
 ("host_oom_killed", "=>> PBS: job killed: mem 16777216kb exceeded limit 16777216kb"),
 ("host_oom_killed", "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit."),
 ("host_oom_killed", "error: job 123 exceeded hard memory limit (h_vmem)"),
 ("host_oom_killed", "Worker exited with SIGKILL (9). The process was killed due to memory pressure."),
 ("disk_full", "OSError: [WinError 112] There is not enough space on the disk"),
 ("disk_full", "OSError: [Errno 28] No space left on device: '/root/.cache/huggingface/hub/tmpabc'"),
 ("disk_full", "tar: ./data/shard-0001.tar: Cannot write: No space left on device"),
 ("network_stall", "Error: getaddrinfo ENOTFOUND registry.npmjs.org"),
 ("network_stall", "ssl.SSLEOFError: EOF occurred in violation of protocol (_ssl.c:2426)"),
 ("network_stall", "botocore.exceptions.EndpointConnectionError: Could not connect to the endpoint URL:"
                   " \"https://s3.amazonaws.com/bucket\""),
 ("network_stall", "fsspec.exceptions.FSTimeoutError"),
 ("network_stall", "aiohttp.client_exceptions.ServerTimeoutError: Timeout on reading data from socket"),
 ("network_stall", "huggingface_hub.errors.HfHubHTTPError: 504 Server Error: Gateway Time-out for url:"
                   " https://huggingface.co/api/models/x"),
 ("network_stall", "httpx.ConnectTimeout: timed out"),
 ("nccl_timeout", "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/2"
                  " clients joined."),
 ("nccl_timeout", "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"),
 ("nccl_timeout", "RuntimeError: NCCL communicator was aborted on rank 2. Original reason for failure was:"
                  " [Rank 2] Watchdog caught collective operation timeout"),
 ("preempted", "TERM_PREEMPT: job killed after preemption."),
 ("preempted", "slurmstepd: error: *** JOB 1234 ON gpu-17 CANCELLED AT 2024-01-01T00:00:00 DUE TO PREEMPTION ***"),
 ("preempted", "TERM_CPULIMIT: job killed after reaching LSF CPU usage limit."),
 ("preempted", "error: job 42 exceeded hard wallclock limit"),
 ("preempted", "The node was drained for maintenance; the job was requeued."),
 ("preempted", "Spot instance interruption notice received: instance will be terminated in 2 minutes"),
 ("preempted", "[E] Received SIGTERM, saving checkpoint and exiting"),
 ("ssh_disconnect", "Connection to 10.0.0.5 closed by remote host.\nConnection to 10.0.0.5 closed."),
 ("checkpoint_corrupt", "tensorflow.python.framework.errors_impl.DataLossError: not an sstable (bad magic number)"),
 ("checkpoint_corrupt", "_pickle.UnpicklingError: invalid load key, '<'."),
 ("checkpoint_corrupt", "OSError: Unable to load weights from pytorch checkpoint file for './model/pytorch_model.bin'"),
 ("import_or_config_error", "ValueError: Tokenizer class LlamaTokenizer does not exist or is not currently imported."),
 ("import_or_config_error", "RuntimeError: FlashAttention only supports Ampere GPUs or newer."),
 ("import_or_config_error", "ImportError: libGL.so.1: cannot open shared object file: No such file or directory"),
 ("import_or_config_error", "AttributeError: module 'numpy' has no attribute 'float'."),
 ("import_or_config_error", "RuntimeError: Detected that PyTorch and torchvision were compiled with different"
                            " CUDA major versions."),
 ("import_or_config_error", "ValueError: Unrecognized configuration class <class"
                            " 'transformers.models.x.XConfig'> for this kind of AutoModel"),
 ("cuda_device_error", "RuntimeError: CUDA error: uncorrectable ECC error encountered"),
 ("cuda_device_error", "RuntimeError: CUDA error: an illegal instruction was encountered"),
 ("cuda_device_error", "torch.cuda.DeferredCudaCallError: CUDA call failed lazily at initialization with"
                       " error: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED"),
 ("cuda_device_error", "RuntimeError: CUDA error: misaligned address"),
 ("nan_inf", "RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output."),
 ("nan_inf", "ValueError: Input contains NaN, infinity or a value too large for dtype('float64')."),
 ("dataloader_error", "RuntimeError: DataLoader worker (pid(s) 12345) exited unexpectedly"),
 ("dataloader_error", "ERROR: Unexpected bus error encountered in worker. This might be caused by"
                      " insufficient shared memory (shm)."),
 ("traceback", "RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x512 and 256x10)"),
 ("traceback", "IndexError: index out of range in self"),
 ("traceback", "TypeError: 'NoneType' object is not subscriptable"),
 ("traceback", "ZeroDivisionError: division by zero"),
]

WORDINGS += [
    ('host_oom_killed', 'RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not'
                        ' enough memory: you tried to allocate 4294967296 bytes.'),
    ('host_oom_killed', 'torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL'),
    ('host_oom_killed', 'Memory limit reached: the kernel was restarted'),
    ('cuda_oom', 'RuntimeError: Attempting to reserve 12.50G at the bottom of memory. That was not possible.'
                 ' There are 10.10G free, 0B reserved, and 10.10G reservable.'),
    ('nan_inf', 'RuntimeError: The loss returned in `training_step` is nan.'),
    ('nan_inf', 'Detected loss of NaN at step 1200, stopping.'),
    ('preempted', 'SignalException: Process 1234 got signal: 15'),
    ('preempted', 'ERROR: Job failed: execution took longer than 1h0m0s seconds'),
    ('nccl_timeout', '[E ProcessGroupGloo.cpp:138] Rank 1 successfully reached monitoredBarrier, but received'
                     ' errors while waiting for send/recv from rank 0.'),
    ('nccl_timeout', 'RuntimeError: Timed out initializing process group in store based barrier on rank: 3,'
                     ' for key: store_based_barrier_key:1 (world_size=8, worker_count=4, timeout=0:30:00)'),
    ('checkpoint_corrupt', 'RuntimeError: Expected hasRecord("version") to be true, but got false.  (Could'
                           ' this error message be improved?  If so, please report an enhancement request to'
                           ' PyTorch.)'),
    ('checkpoint_corrupt', '_pickle.UnpicklingError: could not find MARK'),
    ('checkpoint_corrupt', 'EOFError: Compressed file ended before the end-of-stream marker was reached'),
    ('checkpoint_corrupt', 'zlib.error: Error -3 while decompressing data: invalid stored block lengths'),
    ('import_or_config_error', 'RuntimeError: No CUDA GPUs are available'),
    ('import_or_config_error', "KeyError: 'LOCAL_RANK'"),
    ('import_or_config_error', 'ValueError: Error initializing torch.distributed using env:// rendezvous:'
                               ' environment variable RANK expected, but not set'),
    ('ssh_disconnect', 'Connection reset by 203.0.113.7 port 22'),
    ('ssh_disconnect', 'ssh_dispatch_run_fatal: Connection to 203.0.113.7 port 22: Broken pipe'),
    ('disk_full', 'Error: No space left on device (os error 28)'),
    ('disk_full', 'RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 4471616 vs 4471504'),
    ('network_stall', "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in"
                      " the cached files and it looks like bert-base-uncased is not the path to a directory containing"
                      " a file named config.json."),
    ('network_stall', 'httpcore.RemoteProtocolError: peer closed connection without sending complete message'
                      ' body (incomplete chunked read)'),
    ('cuda_device_error', 'RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered'),
    ('cuda_device_error', 'CUDA error: unspecified launch failure\nCUDA kernel errors might be asynchronously'
                          ' reported at some other API call, so the stacktrace below might be incorrect.'),
    ('dataloader_error', 'RuntimeError: DataLoader timed out after 300 seconds'),
]

WORDINGS += [
    ('import_or_config_error',
     'PreconditionNotMetError: The third-party dynamic library (libcudnn.so) that Paddle depends on is not configured correctly. (error code is libcudnn.so: cannot open shared object file: No such file or directory)'),  # noqa: E501 (a real message, kept whole)
    ('cuda_oom',
     'RuntimeError: Malloc device memory failed, size[1073741824], ret[207001]'),
    ('cuda_oom',
     'F0101 12:00:00.000000  1234 syncedmem.cpp:71] Check failed: error == cudaSuccess (2 vs. 0)  out of memory'),
    ('host_oom_killed',
     'srun: error: node17: task 0: Out Of Memory'),
    ('import_or_config_error',
     'sbatch: error: Batch job submission failed: Requested node configuration is not available'),
    ('import_or_config_error',
     'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].'),
    ('import_or_config_error',
     'nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown.'),
    ('cuda_device_error',
     'Failed to initialize NVML: Driver/library version mismatch'),
    ('cuda_device_error',
     "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."),  # noqa: E501 (a real message, kept whole)
    ('cuda_device_error',
     'RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized'),  # noqa: E501 (a real message, kept whole)
    ('network_stall',
     "E: Failed to fetch http://archive.ubuntu.com/ubuntu/dists/jammy/InRelease  Temporary failure resolving 'archive.ubuntu.com'"),  # noqa: E501 (a real message, kept whole)
    ('network_stall',
     "wget: unable to resolve host address 'download.pytorch.org'"),
    ('checkpoint_corrupt',
     'ValueError: Unable to load checkpoint: the safetensors header is corrupted'),
    ('cuda_device_error',
     "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to execute XLA Runtime executable: run time error: custom call 'xla.gpu.all_reduce' failed: CUDA_ERROR_ILLEGAL_ADDRESS"),  # noqa: E501 (a real message, kept whole)
    ('nan_inf',
     'Detected loss of NaN at step 1200, stopping.'),
    ('host_oom_killed',
     "[Errno 12] Cannot allocate memory: 'OSError'"),
    ('preempted',
     '*** SIGTERM received at time=1700000000 on cpu 3 ***'),
    ('preempted',
     'Received signal 15, shutting down gracefully'),
    ('cuda_oom',
     'torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)'),
]


@pytest.mark.parametrize(("cls", "line"), WORDINGS, ids=[f"{c}-{i}" for i, (c, _) in enumerate(WORDINGS)])
def test_each_stack_wording_of_a_failure_gets_its_class(cls: str, line: str) -> None:
    exception = line.split()[0].rstrip(":").endswith(("Error", "Exception", "Error:")) or ":" in line.split()[0]
    text = ("Traceback (most recent call last):\n  File \"train.py\", line 10, in <module>\n    main()\n" + line + "\n"
            if exception else line + "\n")
    got = triage_text(text).primary
    assert {"time_limit": "preempted", "cancelled": "preempted"}.get(got, got) == cls


# Lines healthy runs print that look alarming; before training progress or as the log's last line, none is a failure.
ROUTINE = [
 "[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot"
 " assign requested address).",
 "[W ProcessGroupNCCL.cpp:1856] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS=1 has no effect for point-to-point"
 " collectives.",
 "torch.distributed.elastic.multiprocessing.redirects: [WARNING] NOTE: Redirects are currently not supported"
 " in Windows or MacOs.",
 "Some weights of the model checkpoint at bert-base-uncased were not used when initializing BertModel:"
 " ['cls.predictions.bias']",
 "wandb: WARNING Serializing object of type dict that is 1234 bytes",
 "huggingface/tokenizers: The current process just got forked, after parallelism has already been used."
 " Disabling parallelism to avoid deadlocks...",
 "`use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`.",
 "[2024-01-01 00:00:00,000] [WARNING] [stage3.py:1850:step] 4 pytorch allocator cache flushes since last"
 " step. this happens when there is high memory pressure and is detrimental to performance.",
 "Epoch 3: val_loss did not improve from 0.41230",
 "max_memory_allocated: 70.1 GB, oom_count: 0, nan_count: 0, skipped_steps: 0",
 "[2024-01-01 00:00:00,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping"
 " step. Attempted loss scale: 65536, reducing to 32768",
 "error_rate: 0.052 | wer: 0.113 | cer: 0.041",
 "[INFO] Saving checkpoint to /ckpt/killed_runs/step_1000",
 "Process finished with exit code 0",
 "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection"
 " broken by 'NewConnectionError(...)': /simple/torch/",
 "I1201 12:00:00.000000 140 gcs_server.cc:123] Gcs Server started",
 "2024-01-01 00:00:00.000000: E external/xla/xla/stream_executor/cuda/cuda_dnn.cc:9261] Unable to register"
 " cuDNN factory: Attempting to register factory for plugin cuDNN when one has already been registered",
 "W0000 00:00:1712345678.123456 1234 gpu_timer.cc:114] Skipping the delay kernel, measurement accuracy will be reduced",
 "[rank0]:[W1201 00:00:00.000000 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been"
 " destroyed before we destruct ProcessGroupNCCL.",
 "NCCL INFO NET/IB : No device found.",
]

ROUTINE += [
    ' iteration      100/  500000 | consumed samples:        51200 | elapsed time per iteration (ms): 1234.5'
    ' | learning rate: 3.000E-04 | global batch size:   512 | lm loss: 7.123456E+00 | loss scale: 1.0 | grad'
    ' norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |',
    'Epoch 00005: reducing learning rate of group 0 to 1.0000e-04.',
    "ERROR: pip's dependency resolver does not currently take into account all the packages that are"
    " installed. This behaviour is the source of the following dependency conflicts.\ntorchaudio 2.1.0"
    " requires torch==2.1.0, but you have torch 2.1.2 which is incompatible.",
    '[2024-01-01 00:00:00,000] [INFO] [real_accelerator.py:203:get_accelerator] Setting ds_accelerator to'
    ' cuda (auto detect)',
    '/usr/lib/python3/dist-packages/torch/nn/modules/conv.py:456: UserWarning: Applied workaround for CuDNN'
    ' issue, install nvrtc.so (Triggered internally at ../aten/src/ATen/native/cudnn/Conv_v8.cpp:80.)',
    'wandb: Network error (ReadTimeout), entering retry loop.\nwandb: Network error resolved after'
    ' 0:00:12.345678, resuming normal operation.',
    'Token indices sequence length is longer than the specified maximum sequence length for this model (1034'
    ' > 1024). Running this sequence through the model will result in indexing errors',
    '[rank0]:[W reducer.cpp:1360] Warning: find_unused_parameters=True was specified in DDP constructor, but'
    ' did not find any unused parameters in the forward pass.',
    'fatal: not a git repository (or any of the parent directories): .git',
]

ROUTINE += [
    "{'train_runtime': 1234.5, 'train_samples_per_second': 41.2, 'train_steps_per_second': 1.3, 'train_loss': 0.123, 'epoch': 3.0}",  # noqa: E501 (a real message, kept whole)
    '`Trainer.fit` stopped: `max_epochs=10` reached.',
    '== Status ==\nCurrent time: 2024-01-01 00:00:00\nNumber of trials: 4/4 (4 TERMINATED)',
    '[2024-01-01 00:00:00,000] [INFO] [launch.py:351:main] Process 1234 exits successfully.',
    "nohup: ignoring input and appending output to 'nohup.out'",
    'Epoch 10: early stopping\nRestoring model weights from the end of the best epoch: 7.',
    'wandb: Run summary:\nwandb:      train/loss 0.12345\nwandb:  train/epoch 3.0\nwandb: \nwandb: Synced 5 W&B file(s), 0 media file(s), 0 artifact file(s) and 0 other file(s)',  # noqa: E501 (a real message, kept whole)
    'INFO:root:Best validation error so far: 0.0213 (epoch 12)',
    'Downloading (…)model.safetensors: 100%|██████████| 440M/440M [00:05<00:00, 80.1MB/s]',
    'Skipping the first 100 batches: resuming from checkpoint-500',
    '[rank0]: Loss: 0.312 | Err: 0.071 | LR: 1e-4',
    'Saving checkpoint to /mnt/ckpt/oom-test-run/step_2000',
    'WARNING:tensorflow:Callback method `on_train_batch_end` is slow compared to the batch time (batch time: 0.0123s vs `on_train_batch_end` time: 0.0456s). Check your callbacks.',  # noqa: E501 (a real message, kept whole)
    '/opt/conda/lib/python3.10/site-packages/torch/utils/checkpoint.py:429: UserWarning: torch.utils.checkpoint: please pass in use_reentrant=True or use_reentrant=False explicitly.',  # noqa: E501 (a real message, kept whole)
]


@pytest.mark.parametrize("line", ROUTINE, ids=[str(i) for i in range(len(ROUTINE))])
def test_a_routine_line_of_a_healthy_run_raises_no_alarm(line: str) -> None:
    progress = "\n".join(f"step {i} | loss {2.0 - i / 100:.3f} | lr 3e-4" for i in range(1, 6))
    assert primary(line + "\n" + progress + "\n") == "healthy"
    assert primary(progress + "\n" + line + "\n") == "healthy"


# How processes end, as shells, IDEs, srun and launchers print it after some training progress.
ENDINGS = [
    ('traceback', 'Trace/breakpoint trap (core dumped)'),
    ('traceback', 'Process finished with exit code 139 (interrupted by signal 11: SIGSEGV)'),
    ('traceback', 'Process finished with exit code 134 (interrupted by signal 6: SIGABRT)'),
    ('host_oom_killed', 'Process finished with exit code 137 (interrupted by signal 9: SIGKILL)'),
    ('traceback', 'Illegal instruction (core dumped)'),
    ('traceback', 'Bus error (core dumped)'),
    ('preempted', 'Hangup'),
    ('preempted', 'Terminated'),
    ('host_oom_killed', 'Killed'),
    ('traceback', 'srun: error: gpu-12: task 0: Exited with exit code 1'),
    ('traceback', 'ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0'
                  ' (pid: 123) of binary: /usr/bin/python'),
    ('traceback', "subprocess.CalledProcessError: Command '['/usr/bin/python', '-u', 'train.py']' returned"
                  " non-zero exit status 1."),
]

# Schedulers and clouds stopping a job, in their own words (time limits, owners, requeues, deadlines).
ENDINGS += [
    ('preempted',
     'slurmstepd: error: *** JOB 123 STEPD TERMINATED ON node7 AT 2024-01-01T00:00:00 DUE TO JOB NOT ENDING WITH SIGNALS ***'),
    ('preempted',
     '=>> PBS: job killed: cput 360012 exceeded limit 360000'),
    ('preempted',
     'TERM_OWNER: job killed by owner.'),
    ('preempted',
     'TERM_ADMIN: job killed by root or LSF administrator.'),
    ('preempted',
     'TERM_REQUEUE_ADMIN: job killed and requeued by root or LSF administrator.'),
    ('preempted',
     'failed       100  : assumedly after job / qmaster enforced h_rt, h_cpu, or h_vmem limit'),
    ('preempted',
     'Job was aborted by the user.'),
    ('preempted',
     'Job was active longer than specified deadline'),
    ('preempted',
     'Training job my-job-123 stopped. Reason: MaxRuntimeExceeded: Training job runtime exceeded MaxRuntimeInSeconds provided'),
    ('preempted',
     '[rank: 0] Handling signal: SIGTERM'),
    ('preempted',
     'Your session timed out. Please restart the notebook.'),
    ('preempted',
     'The actor died because its node has died. Node Id: abc123'),
    ('preempted',
     'compute.instances.preempted: Instance was preempted.'),
]

ENDINGS += [
    ('nan_inf',
     'tensorflow.python.framework.errors_impl.InvalidArgumentError: Nan in summary histogram for: conv1/weights_0'),
    ('nan_inf',
     'tensorflow.python.framework.errors_impl.InvalidArgumentError: loss/total : Tensor had NaN values'),
    ('nan_inf',
     'There are NAN or INF (num_nan=1, num_inf=0, num_zero=0) in [op=elementwise_add] [tensor=tmp_0].'),
    ('nan_inf',
     "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1.9e-05, 'epoch': 0.42}\n{'loss': nan, 'grad_norm': nan, 'learning_rate': 1.8e-05, 'epoch': 0.43}"),  # noqa: E501 (a real message, kept whole)
    ('host_oom_killed',
     '[1]    12345 killed     python train.py'),
    ('host_oom_killed',
     'The process has been killed because it exceeded memory limits'),
    ('host_oom_killed',
     'distributed.nanny - WARNING - Worker exceeded 95% memory budget. Restarting'),
    ('import_or_config_error',
     "Error: ENOSPC: System limit for number of file watchers reached, watch '/app/src'"),
    ('preempted',
     'This job was terminated because it exceeded the maximum time allowed for a job.'),
]


@pytest.mark.parametrize(("cls", "line"), ENDINGS, ids=[f"{c}-{i}" for i, (c, _) in enumerate(ENDINGS)])
def test_how_a_process_ended_names_its_class(cls: str, line: str) -> None:
    progress = "\n".join(f"step {i} | loss {2.0 - i / 100:.3f} | lr 3e-4" for i in range(1, 6))
    got = triage_text(progress + "\n" + line + "\n").primary
    assert {"time_limit": "preempted", "cancelled": "preempted"}.get(got, got) == cls


def test_a_cut_off_notebook_traceback_is_named_by_its_header() -> None:
    # IPython prints the exception's name on the header line and its frames at column 0; the paste stops before
    # the final `gaierror: ...` line
    log = ("---------------------------------------------------------------------------\n"
           "gaierror                                  Traceback (most recent call last)\n"
           "/opt/conda/lib/python3.6/urllib/request.py in do_open(self, http_class, req, **http_conn_args)\n"
           "   1317                 h.request(req.get_method(), req.selector, req.data, headers,\n"
           "-> 1318                           encode_chunked=req.has_header('Transfer-encoding'))\n"
           "\n"
           "File ~/env/lib/python3.10/http/client.py:1276, in HTTPConnection.request(self, method, url, body)\n"
           "   1275 \"\"\"Send a complete request to the server.\"\"\"\n"
           "-> 1276 self._send_request(method, url, body, headers, encode_chunked)\n")
    assert primary(log) == "network_stall"
    # the same frames under a header that names a code bug stay a code bug
    assert primary(log.replace("gaierror      ", "KeyError      ")) == "traceback"


def test_a_generic_error_is_read_by_where_it_was_raised() -> None:
    frames = ('Traceback (most recent call last):\n'
              '  File "/env/lib/site-packages/urllib3/connection.py", line 504, in _connect_tls_proxy\n'
              '    socket = ssl_wrap_socket(\n'
              '  File "/env/lib/ssl.py", line 1309, in do_handshake\n'
              '    self._sslobj.do_handshake()\n')
    assert primary(frames + "OSError: [Errno 0] Error\n") == "network_stall"
    # a code bug's own type is not re-read by its frames
    assert primary(frames + "TypeError: unsupported operand type(s) for +: 'int' and 'str'\n") == "traceback"
    user = frames.replace("urllib3/connection.py", "mylib/model.py").replace("/env/lib/ssl.py", "/app/model.py")
    assert primary(user + "OSError: [Errno 0] Error\n") == "traceback"
    # a timed-out queue get, named by the data loader whose frame called it
    loader = ("Traceback (most recent call last):\n"
              '  File "/opt/conda/lib/python3.7/site-packages/paddle/fluid/dataloader/dataloader_iter.py", line 620, in'
              " _get_data\n"
              "    data = self._data_queue.get(timeout=self._timeout)\n"
              '  File "/opt/conda/lib/python3.7/multiprocessing/queues.py", line 105, in get\n'
              "    raise Empty\n_queue.Empty\n")
    assert primary(loader) == "dataloader_error"
    assert primary(loader.replace("paddle/fluid/dataloader/dataloader_iter.py", "app/jobs.py")) == "traceback"


def test_a_paste_of_frames_without_their_header_ended_inside_the_traceback() -> None:
    log = ("Epoch 0: 100%|##########| 6238/6239 [1:20:11<00:00, 1.30it/s]\n"
           '  File "train_pixelsnail.py", line 138, in <module>\n'
           "    train(args, i, loader, model, optimizer, scheduler, device)\n"
           '  File "/env/lib/python3.6/site-packages/torch/nn/parallel/parallel_apply.py", line 83, in parallel_apply\n'
           "    raise output\n")
    assert primary(log) == "traceback"
    assert primary(log.replace("train_pixelsnail.py", "/env/lib/site-packages/urllib3/connectionpool.py")) == \
        "network_stall"


def test_a_traceback_glued_to_the_progress_bar_it_interrupted_is_walked() -> None:
    log = ("Epoch 0: 100%|#########9| 12208/12209 [1:55:15<00:00,  1.77it/s, loss=1.960]Traceback (most recent call"
           " last):\n"
           '  File "main.py", line 53, in <module>\n'
           "    trainer.fit(model)\n")
    assert primary(log) == "traceback"
    assert primary(log + "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB\n") == "cuda_oom"


def test_anomaly_modes_warning_names_the_op_that_went_nan_when_the_error_line_is_missing() -> None:
    warning = ("[W python_anomaly_mode.cpp:104] Warning: Error detected in DivBackward0. Traceback of forward call that"
               " caused the error:\n")
    assert primary("step 10 loss 0.5\n" + warning) == "nan_inf"
    # when the error it announces is printed, that error decides
    inplace = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    loss.backward()\n"
               "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace"
               " operation\n")
    assert primary("step 10 loss 0.5\n" + warning + inplace) == "traceback"


def test_a_line_that_says_how_the_program_copes_is_passed_over_but_a_crash_is_not() -> None:
    progress = "step 5 | loss 1.20\n"
    assert primary(progress + "Error loading image 000123.jpg, skipping\n") == "healthy"
    assert primary(progress + "No module named 'apex', using torch.cuda.amp instead\n") == "healthy"
    # the exception that ended a traceback is no coping, whatever its message says
    crash = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    main()\n"
             "ModuleNotFoundError: No module named 'apex', install it or use torch.cuda.amp instead\n")
    assert primary(progress + crash) == "import_or_config_error"
    # skipped updates are judged as NaN evidence, not as coping
    assert primary(progress + "The grad norm is nan. Skipping updating the model.\n" * 5) == "nan_inf"


def test_nan_in_an_eval_loss_beside_a_finite_train_loss_is_not_divergence() -> None:
    assert primary("Epoch 3: val_loss=nan (no validation batches), train_loss=0.412\n") == "healthy"
    assert primary("{'eval_loss': nan, 'epoch': 1.0}\nNo validation samples were found; skipping evaluation.\n") == \
        "healthy"
    assert primary("Epoch 3: val_loss=nan, train_loss=nan\nEpoch 4: val_loss=nan, train_loss=nan\n") == "nan_inf"


def test_too_few_gpus_is_not_too_little_gpu_memory() -> None:
    # "not enough" near a GPU word names memory only when it is about memory
    tb = 'Traceback (most recent call last):\n  File "t.py", line 1, in <module>\n    main()\n'
    assert primary(tb + "RuntimeError: not enough GPU devices for tensor parallel size 8\n") != "cuda_oom"
    assert primary(tb + "RuntimeError: not enough VRAM to allocate activation buffer\n") == "cuda_oom"


def _rl_iteration(i: int, value_loss: str) -> str:
    return (f"Learning iteration {i}/10000\n               Value function loss: {value_loss}\n"
            f"                    Surrogate loss: -0.0042\n             Mean action noise std: 0.56\n"
            f"                 Mean total reward: 25.66\n")


def test_a_loss_component_that_went_inf_is_recovered_only_by_that_component() -> None:
    # an RL trainer prints several loss terms: the surrogate staying finite says nothing about the value loss
    diverged = "".join(_rl_iteration(i, "0.81") for i in range(3)) + _rl_iteration(3, "inf")
    assert triage_text(diverged).primary == "nan_inf"
    recovered = diverged + "".join(_rl_iteration(i, "0.77") for i in range(4, 7))
    assert triage_text(recovered).primary == "healthy"


def test_a_log_ending_on_mixed_case_error_records_is_not_healthy() -> None:
    # simulators and game engines tag records `[Error]`, not `ERROR`; a run that stopped on them is not healthy
    records = "".join(f"2024-11-25 09:13:0{i} [{i}ms] [Error] [omni.sim.plugin] solver step {i} did not converge\n"
                      for i in range(3))
    assert triage_text("step 10 | loss 0.5\n" + records).primary == "traceback"
    assert triage_text("step 10 | loss 0.5\n" + records + "step 11 | loss 0.49\nstep 12 | loss 0.48\n").primary == "healthy"


_SRUN_PROGRESS = "".join(f"0: step {i} | loss {2 - i / 100:.2f}\n" for i in range(5))


@pytest.mark.parametrize(("ending", "expected"), [
    # srun kills the step's other tasks after one task failed: the failure is the cause, not the OOM killer
    ("srun: error: n1: task 2: Segmentation fault (core dumped)\nsrun: launch/slurm: _step_signal: Terminating "
     "StepId=7.0\nslurmstepd: error: *** STEP 7.0 ON n1 CANCELLED AT 2024-01-01T00:00:00 ***\n"
     "srun: error: n1: tasks 0-1,3: Killed\n", "traceback"),
    ("srun: error: n1: task 2: Exited with exit code 1\nsrun: error: n1: tasks 0-1,3: Killed\n", "traceback"),
    # the scheduler's own kill after its time limit or a cancellation belongs to that stop
    ("slurmstepd: error: *** STEP 7.0 ON n1 CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***\n"
     "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\nsrun: error: n1: tasks 0-3: Killed\n",
     "time_limit"),
    ("slurmstepd: error: *** STEP 7.0 ON n1 CANCELLED AT 2024-01-01T00:00:00 ***\nsrun: error: n1: tasks 0-3: Killed\n",
     "cancelled"),
    # with nothing before it, tasks killed are the OOM killer's work; Slurm's OOM report stays what it says
    ("srun: error: n1: tasks 0-3: Killed\n", "host_oom_killed"),
    ("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=7.0.\nsrun: error: n1: task 2: Out Of Memory\n"
     "srun: error: n1: tasks 0-1,3: Killed\n", "host_oom_killed"),
])
def test_what_srun_or_the_scheduler_kills_after_the_end_is_not_the_oom_killer(ending: str, expected: str) -> None:
    assert triage_text(_SRUN_PROGRESS + ending).primary == expected


def test_an_exception_line_glued_to_a_code_line_by_interleaved_streams_is_still_read() -> None:
    # stdout's copy of the traceback and stderr's exception line interleaved: the exception lands on a code line
    log = ("step 2000 | loss 0.61\nTraceback (most recent call last):\n"
           '  File "train_tacotron.py", line 721, in <module>\n'
           "    main(args)RuntimeError:  [!] NaN loss with decoder_loss.\n\n"
           '  File "train_tacotron.py", line 623, in main\n    scaler_st)\n'
           '  File "layers/losses.py", line 398, in forward\n    raise RuntimeError(f" [!] NaN loss with {key}.")\n')
    assert triage_text(log).primary == "nan_inf"
    # a code line that merely calls or names an exception type is code, not an event
    code = ("step 2000 | loss 0.61\nTraceback (most recent call last):\n"
            '  File "train.py", line 9, in <module>\n    raise RuntimeError("loss is nan: stop")\n'
            "KeyError: 'labels'\n")
    assert triage_text(code).primary == "traceback"


def test_an_exception_printed_at_interpreter_exit_is_not_training_going_on() -> None:
    # "Exception ignored in atexit callback" comes after the crash, while Python shuts down
    crash = ("RuntimeError: DataLoader worker (pid 56811) is killed by signal: Bus error. It is possible that "
             "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.\n")
    log = (crash + "Exception ignored in atexit callback: <function _MultiProcessingDataLoaderIter._clean_up_worker>\n"
           "Traceback (most recent call last):\n"
           '  File "/usr/lib/python3.10/multiprocessing/popen_fork.py", line 40, in wait\n'
           "    if not wait([self.sentinel], timeout):\n")
    assert triage_text(log).primary == "dataloader_error"


def _hf_log(i: int, grad_norm: str) -> str:
    return f"{{'loss': {1.7 - i / 100:.4f}, 'grad_norm': {grad_norm}, 'learning_rate': 1.3e-06, 'epoch': 0.0{i}}}\n"


def test_a_gradient_norm_that_is_never_finite_from_the_start_is_not_the_loss_scale_search() -> None:
    # one NaN norm at warm-up is the fp16 scaler searching down; every logged norm NaN is gradients that stay bad
    bars = "".join(f"  2%|▏         | {20 + i}/1233 [14:{40 + i}<13:43:48, 40.75s/it]\n" for i in range(6))
    assert triage_text(_hf_log(1, "nan") + _hf_log(2, "nan") + bars).primary == "nan_inf"
    assert triage_text(_hf_log(1, "nan") + bars).primary == "healthy"
    assert triage_text(_hf_log(1, "nan") + _hf_log(2, "nan") + _hf_log(3, "0.91") + bars).primary == "healthy"


@pytest.mark.parametrize(("frames", "expected"), [
    # a traceback cut inside DeepSpeed's op builder (looking for CUDA_HOME) or a package's version check
    ('  File "/env/lib/python3.10/site-packages/deepspeed/ops/op_builder/builder.py", line 51, in installed_cuda_version\n'
     "    raise MissingCUDAException('CUDA_HOME does not exist, unable to compile CUDA op(s)')\n",
     "import_or_config_error"),
    ('  File "/env/Lib/site-packages/jax/_src/lib/__init__.py", line 68, in check_jaxlib_version\n'
     "    raise RuntimeError(msg)\n", "import_or_config_error"),
    # ... or while writing a checkpoint (a full disk, most often), or setting up the process group
    ('  File "/env/lib/python3.10/site-packages/torch/serialization.py", line 372, in save\n'
     "    _save(obj, opened_zipfile, pickle_module, pickle_protocol)\n", "disk_full"),
    ('  File "/env/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 932, in init_process_group\n'
     "    _store_based_barrier(rank, store, timeout)\n", "nccl_timeout"),
    # ... or inside another stack's NCCL communicator
    ('  File "/env/lib/python2.7/site-packages/chainermn/communicators/pure_nccl_communicator.py", line 78, in '
     "allreduce_grad\n    self.nccl_comm.allReduce(\n", "nccl_timeout"),
])
def test_a_traceback_cut_inside_a_subsystems_code_names_that_subsystem(frames: str, expected: str) -> None:
    log = "step 3 loss 1.2\nTraceback (most recent call last):\n" + '  File "train.py", line 9, in <module>\n    main()\n'
    assert triage_text(log + frames).primary == expected


def test_equal_width_rows_do_not_swallow_the_kill_notice_after_them() -> None:
    # a tensor dump's rows share one length by chance; bash's `Killed` after them is its own line, not their tail
    names = ("attn_qkv.bias", "attn_qkv.weight", "attn_output.weight", "attn_norm.weight", "ffn_norm.weight",
             "ffn_up.weight", "ffn_down.weight", "ffn_gate.weight")
    rows = "".join(f"blk.{b}.{name}, n_dims = {1 + (name.endswith('weight') and 'norm' not in name)}, torch.bfloat16 --> "
                   f"{'float16' if 'norm' not in name and 'bias' not in name else 'float32'}\n"
                   for b in range(30, 36) for name in names)
    rows += "blk.36.ffn_gate.weight, n_dims = 2, torch.bfloat16 --> float16\n"  # of the most common width
    assert triage_text(rows + "Killed\n").primary == "host_oom_killed"


def test_a_paste_cut_inside_an_import_chain_is_a_module_that_does_not_load() -> None:
    # the exception line is missing; the last code line shown is an import statement
    log = ("Traceback (most recent call last):\n"
           '  File "C:\\ComfyUI\\custom_nodes\\trainer\\train_network.py", line 26, in <module>\n'
           "    from diffusers import DDPMScheduler\n"
           '  File "C:\\other_env\\lib\\site-packages\\diffusers\\__init__.py", line 4, in <module>\n'
           "    from .utils import is_inflect_available, is_transformers_available\n")
    assert triage_text(log).primary == "import_or_config_error"
    # cut on an ordinary call, it stays an unclassified crash
    assert triage_text(log.rsplit("    from .utils", 1)[0] + "    model = build(cfg)\n").primary == "traceback"


def test_an_old_notebook_traceback_is_walked_to_the_exception_its_header_names() -> None:
    # IPython before 8 names a cell frame `<ipython-input-N-hash> in <module>`; the header names the exception
    log = ("INFO:tensorflow:\t replay_capacity: 1000000\n" + "-" * 75 + "\n"
           "MemoryError                               Traceback (most recent call last)\n"
           "<ipython-input-6-416281258c80> in <module>\n"
           "     28                                           training_steps=10,\n")
    assert triage_text(log).primary == "host_oom_killed"


def test_where_a_cut_traceback_stopped_is_weaker_evidence_than_a_line_that_names_a_cause() -> None:
    # anomaly mode named the NaN; the paste then stops inside the optimizer's step (a guess at memory, no more)
    log = ("[W python_anomaly_mode.cpp:104] Warning: Error detected in DivBackward0. Traceback of forward call that "
           "caused the error:\n"
           "Traceback (most recent call last):\n"
           '  File "train.py", line 40, in train_step\n    loss, loss_dict = self.optimizer.step(closure=closure)\n'
           '  File "/env/lib/python3.8/site-packages/torch/optim/adam.py", line 66, in step\n    loss = closure()\n')
    assert triage_text(log).primary == "nan_inf"
    # with nothing named, the optimizer's first step is where memory usually runs out
    cut = log.split("\n", 2)[2]
    assert triage_text(cut).primary == "cuda_oom"
