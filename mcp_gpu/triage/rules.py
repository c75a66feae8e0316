"""Log-triage rules as data: which line means which failure class, its gotcha id, and the fixed next step.

Each `Rule` maps one family of log lines (matched by `pattern`) to a class of the fixed vocabulary
(`mcp_gpu.models.TRIAGE_CLASSES`, plus `EXTRA_CLASSES` below). The engine tries the rules in order and the
FIRST match decides a line, so specific rules sit above general ones (a CUDA OOM inside an NCCL warning is an
OOM; a `Killed` DataLoader worker is a host OOM, not a DataLoader bug).

`role` says how a match counts:
- `cause`   evidence of a root cause;
- `sigterm` the process was asked to stop (SIGTERM): preemption evidence only when nothing crashed;
- `cascade` the consequence of a failure elsewhere (torchrun's ChildFailedError, "worker exited unexpectedly");
            it can be the answer only when nothing else is;
- `ignore`  a line that looks alarming but is routine (torchrun telling the other workers to stop, fp16 loss-scale
            overflow skips): it matches so that no later rule claims it, and is then dropped.

Gotcha ids follow the catalogue: `U1..U44` universal, platform ids (`RP9`, `AD1`, `SLURM4`, `K8S5`) and training
entries as `train.<entry>` (`train.D20`, `train.C2`, `train.P8`, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from mcp_gpu.models import Severity
from mcp_gpu.triage.needles import needles_of

Role = Literal["cause", "sigterm", "cascade", "ignore"]

# Classes the engine adds to the ARCHITECTURE vocabulary (extend, never rename): a scheduler time limit and a
# deliberate cancellation are neither crashes nor preemptions, and a relaunch policy must not read them as either.
EXTRA_CLASSES: tuple[str, ...] = ("time_limit", "cancelled")


@dataclass(frozen=True)
class Rule:
    id: str
    cls: str
    severity: Severity
    title: str
    pattern: re.Pattern[str]
    remedy: str
    gotcha: str | None = None
    role: Role = "cause"
    # Lower-case literals, one of which every match contains: a cheap test before the regex (None: always run it).
    needles: tuple[str, ...] | None = None


def _re(pattern: str, ignore_case: bool = False) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE if ignore_case else 0)


# Fixed remedies, one per failure family.
FIX_CUDA_OOM = ("Lower the micro-batch (keep the effective batch with gradient accumulation), then bf16, activation "
                "checkpointing, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; check nvidia-smi for other holders first.")
FIX_HOST_OOM = ("Host/cgroup RAM ran out: size DataLoader workers and caches to the cgroup memory.max (not the host's RAM), "
                "then relaunch from the last checkpoint.")
FIX_SLURM_OOM = "Slurm's cgroup killed the job for memory: request --mem of MaxRSS x 1.2 (sacct) and resume."
FIX_NAN = ("Resume from the last finite checkpoint with a lower peak LR or longer warmup, clip gradients to 0.5-1.0, prefer "
           "bf16 over fp16; same step every time means bad data (assert torch.isfinite on the batch).")
FIX_FP16_SCALE = "The fp16 loss scale collapsed: switch to bf16, or find the op that overflows before resuming."
FIX_WATCHDOG = ("A collective waited out its timeout: another rank failed or hung about that long earlier, so read the "
                "first error of every rank; set TORCH_NCCL_ASYNC_ERROR_HANDLING=1 and NCCL_DEBUG=INFO.")
FIX_NCCL = ("Rerun with NCCL_DEBUG=INFO: check NCCL_SOCKET_IFNAME (not docker0/lo), /dev/shm size (--shm-size=8g) and "
            "whether a peer rank died first.")
FIX_NCCL_INIT = ("Ranks never met: check MASTER_ADDR/port reachability, nvidia-fabricmanager on every node and "
                 "NCCL_SOCKET_IFNAME.")
FIX_DISK = ("Free space on the run disk (prune old checkpoints, move HF/pip caches to the data disk) and gate each save "
            "on df free space; the newest checkpoint may be truncated, so verify it before resuming.")
FIX_QUOTA = "Disk quota exceeded: move outputs and caches to a volume with quota left, then verify the newest checkpoint."
FIX_EVICT_DISK = "The pod was evicted for ephemeral storage: write outputs and caches to a PVC, not the container layer."
FIX_INODES = ("Inodes are exhausted while bytes may be free (df -i): pack small files into tar/WebDataset shards and "
              "delete per-step files.")
FIX_CKPT = ("The checkpoint file is truncated or not a checkpoint: fall back to the previous one, and write checkpoints "
            "atomically (tmp, fsync, os.replace).")
FIX_XID = "The GPU reported a hardware fault (Xid / ECC / off the bus): stop using this machine and re-rent."
FIX_XID_SOFT = "The GPU driver logged an Xid: check dmesg and nvidia-smi -q; re-rent if it repeats or training misbehaves."
FIX_CUDA_FAULT = ("Rerun with CUDA_LAUNCH_BLOCKING=1 for the real stack; if it moves between ops or repeats on other code, "
                  "check dmesg for Xid and re-rent.")
FIX_DEVICE_ASSERT = ("A kernel assertion fired, usually a label/index out of range: rerun on CPU or with "
                     "CUDA_LAUNCH_BLOCKING=1 and check targets lie in [0, num_classes).")
FIX_CUDA_VERSION = ("The torch build does not match this GPU/driver: install a wheel for the box's CUDA and compute "
                    "capability, and drop torch pins from requirements.")
FIX_DRIVER_FORWARD = "The image needs a newer CUDA than the host driver: pick a CUDA-version filter/image matching the driver."
FIX_NO_GPU = "torch sees no GPU: check the container has --gpus all (nvidia-container-toolkit), the driver, and a CUDA wheel."
FIX_SHM = ("/dev/shm is too small for DataLoader workers: run the container with --shm-size=8g (or more), or "
           "torch.multiprocessing.set_sharing_strategy('file_system').")
FIX_DATALOADER = ("Fix the exception raised inside the DataLoader worker (its original traceback is in the log); test "
                  "with num_workers=0.")
FIX_COLLATE = "Samples differ in shape: pad or crop in the dataset, or pass a collate_fn that pads."
FIX_PICKLE = "Workers cannot pickle a lambda/local object: move it to module level (spawn start method)."
FIX_DL_TIMEOUT = "A DataLoader worker hung: look for slow storage or a deadlock in __getitem__; raise timeout only after."
FIX_MODULE = ("Install the missing package into the environment the job runs in (activate it inside the launch "
              "command), then re-run the smoke test.")
FIX_IMPORT = "A package version does not match the code: pin the versions from a working lockfile and re-run the smoke test."
FIX_OVERRIDE = ("Fix the config/override: use overlay files instead of null-parent dot overrides, and check with "
                "--cfg job before launch.")
FIX_ARGS = "The command line does not match the script's arguments: fix the launch command and re-run the smoke test."
FIX_CRLF = "The script has Windows line endings: run sed -i 's/\\r$//' on it (or dos2unix) and relaunch."
FIX_CMD_NOT_FOUND = ("The command is not on PATH in the job's shell: activate the env (conda activate / source venv) "
                     "inside the launch command.")
FIX_NO_FILE = "The script or file is not on the box at that path: re-sync the code and verify the deploy (sha256) before launch."
FIX_HF_AUTH = "Gated or private model: export HF_TOKEN (from env or file, never on the command line) before the Trainer starts."
FIX_PAD = "Set tokenizer.pad_token (e.g. to eos_token) before building the collator."
FIX_PORT = "Another job holds the rendezvous port: give each job its own --master-port."
FIX_STATE_DICT = "Keys do not match the model: strip 'module.'/'_orig_mod.' prefixes or build the same architecture before load."
FIX_SIZE = "The checkpoint's shapes do not match the model config: load with the config it was trained with."
FIX_WANDB_KEY = "W&B has no API key on the box: push WANDB_API_KEY (env/stdin) or run offline and sync later."
FIX_WANDB = "The tracker cannot reach its server; training goes on. Sync later with wandb sync, or fix the proxy."
FIX_NETWORK = "A download or upload timed out: pre-fetch models/datasets to the box (or use a mirror), then relaunch."
FIX_SSH = "The SSH session dropped, not necessarily the job: re-check with a fresh connection before concluding anything."
FIX_HOSTKEY = "The host key changed or is unknown: verify the fingerprint out of band before connecting again."
FIX_PREEMPT = "The job was preempted: relaunch on a new machine and resume from the newest verified checkpoint."
FIX_SIGTERM = ("The job received SIGTERM with no crash before it: a preemption or a stop from outside. Resume from the newest "
               "verified checkpoint.")
FIX_TIME_LIMIT = ("The scheduler's time limit ended the job: resume from the last checkpoint with a longer --time, and "
                  "checkpoint on --signal=B:SIGTERM@360.")
FIX_CANCELLED = "The job was cancelled on purpose (scancel / Ctrl-C): relaunch only if that was not intended."
FIX_DDP_UNUSED = ("Some parameters got no gradient: make every output feed the loss; find_unused_parameters=True only "
                  "as a last resort.")
FIX_NO_GRAD = "The loss is detached from the graph: look for .detach(), torch.no_grad() or a frozen model around the forward."
FIX_TARGETS = "Targets have the wrong dtype/shape/range for the loss: check label dtype (long), shape and [0, num_classes)."
FIX_SCALER = "Restore the GradScaler state with the optimizer when resuming (or recreate both)."
FIX_SEGV = "A native crash (segfault/abort): check library versions (torch vs CUDA vs extensions) and run the smoke test."
FIX_TORCHRUN = "torchrun only reports that a worker failed: read that worker's own error above (the 'Root Cause' rank)."
FIX_TRACEBACK = ("An unclassified Python exception ended the run: fix the code at the last frame of the traceback and "
                 "re-run the smoke test.")
FIX_EXIT = "The process exited non-zero without a recognisable error in these lines: read the full log tail and stderr."

_R: list[Rule] = []


def _rule(rule_id: str, cls: str, severity: Severity, title: str, pattern: str, remedy: str, *,
          gotcha: str | None = None, role: Role = "cause", ignore_case: bool = False) -> None:
    needles = needles_of(pattern)
    _R.append(Rule(rule_id, cls, severity, title, _re(pattern, ignore_case), remedy, gotcha, role, needles))


# --- routine lines that only look alarming (first, so that nothing below claims them)
_rule("ignore.torchrun_sigterm_workers", "traceback", "info", "torchrun stopping the other workers",
      r"Sending process \d+ closing signal SIGTERM|Unable to shutdown process \d+ via", "", role="ignore")
_rule("ignore.fp16_overflow", "nan_inf", "info", "fp16 loss-scale overflow skip",
      r"OVERFLOW! Rank \d+ Skipping step|Gradient overflow\.\s+Skipping step", "", role="ignore")
_rule("ignore.elastic_hint", "traceback", "info", "torchrun hint", r"To enable traceback see: https://pytorch\.org", "",
      role="ignore")

# --- CRLF scripts (U26); the engine renders a carriage return inside a message as a visible \r
_rule("config.crlf", "import_or_config_error", "error", "the script has Windows (CRLF) line endings",
      r"\$'\\r'|\\r: (?:command not found|invalid option|No such file)|\^M: bad interpreter|/bin/(?:ba)?sh\^M|"
      r"unexpected token `?\$'[^']*\\r'", FIX_CRLF, gotcha="U26")

# --- disk space (U6, U7) before anything that a full disk can cause
_rule("disk.gate", "disk_full", "critical", "the launch disk gate aborted: too little free space", r"\bDISK_GATE_ABORT\b",
      FIX_DISK, gotcha="U6")
_rule("disk.torch_save", "disk_full", "critical", "torch.save failed mid-write: the disk filled",
      r"inline_container\.cc.*(?:unexpected pos|file write failed)|PytorchStreamWriter failed|basic_ios::clear: iostream error",
      FIX_DISK, gotcha="U6")
_rule("disk.enospc", "disk_full", "critical", "no space left on device", r"No space left on device|\[Errno 28\]|\bENOSPC\b",
      FIX_DISK, gotcha="U6")
_rule("disk.quota", "disk_full", "critical", "disk quota exceeded", r"Disk quota exceeded|\[Errno 122\]|\bEDQUOT\b",
      FIX_QUOTA, gotcha="U6")
_rule("disk.k8s_evicted", "disk_full", "error", "pod evicted: node low on ephemeral storage",
      r"low on resource: ephemeral-storage", FIX_EVICT_DISK, gotcha="K8S5")

# --- VRAM (U10) above the NCCL and CUDA-error rules that wrap it
_rule("cuda_oom.torch", "cuda_oom", "error", "CUDA out of memory",
      r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|"
      r"Cuda failure '?out of memory|HIP out of memory|RESOURCE_EXHAUSTED: Out of memory", FIX_CUDA_OOM, gotcha="U10")

# --- checkpoint files (train.C2)
_rule("ckpt.zip", "checkpoint_corrupt", "error", "checkpoint is truncated or corrupt",
      r"PytorchStreamReader failed|failed finding central directory|invalid header or archive is corrupted|"
      r"UnpicklingError: (?:invalid load key|pickle data was truncated)|SafetensorError: Error while deserializing|"
      r"HeaderTooLarge|MetadataIncompleteBuffer|^EOFError: Ran out of input", FIX_CKPT, gotcha="train.C2")

# --- host / cgroup memory (U9, SLURM4)
_rule("host_oom.slurm", "host_oom_killed", "error", "Slurm's cgroup OOM handler killed the job",
      r"Detected \d+ oom[-_ ]kill events?|\bOUT_OF_MEMORY\b", FIX_SLURM_OOM, gotcha="SLURM4")
_rule("host_oom.kernel", "host_oom_killed", "error", "the kernel OOM killer killed a process",
      r"Out of memory: Kill(?:ed)? process|Memory cgroup out of memory|invoked oom-killer|\boom-kill:|\bOOMKilled\b|"
      r"low on resource: memory", FIX_HOST_OOM, gotcha="U9")
_rule("host_oom.dataloader", "host_oom_killed", "error", "a DataLoader worker was killed (SIGKILL): host RAM",
      r"DataLoader worker \(pid \d+\) is killed by signal: Killed", FIX_HOST_OOM, gotcha="U9")
_rule("host_oom.sigkill", "host_oom_killed", "error", "a process was SIGKILLed: the OOM killer, unless someone ran kill -9",
      r"^Killed$|: line \d+:\s+\d+ Killed\b|^zsh: killed\b|exitcode\s*:\s*-9\b|Signal 9 \(SIGKILL\) received by PID|"
      r"return code = -9\b|died with <Signals\.SIGKILL: 9>", FIX_HOST_OOM, gotcha="U9")
_rule("host_oom.alloc", "host_oom_killed", "error", "host RAM exhausted (allocation failed)",
      r"^(?:\w+\.)*MemoryError\b|Cannot allocate memory|\[Errno 12\]|DefaultCPUAllocator: can't allocate memory|std::bad_alloc",
      FIX_HOST_OOM, gotcha="U9")

# --- NaN / inf (train.P8, train.P10)
_rule("nan.loss", "nan_inf", "error", "the loss became NaN/inf",
      r"\b(?:train_|val_|valid_|eval_|test_)?loss\b['\"]?(?:\s*[:=]\s*|\s+)['\"]?[-+]?(?:nan|inf(?:inity)?)\b|"
      r"\bloss (?:is|became|was|=) (?:nan|inf|infinite)|returned nan values in its|\bis not finite\b|non-finite|"
      r"found invalid values|probability tensor contains either|^(?:\w+\.)*FloatingPointError\b", FIX_NAN,
      gotcha="train.P8", ignore_case=True)
_rule("nan.scaler", "nan_inf", "error", "the fp16 loss scale hit its minimum", r"loss scale already at minimum", FIX_FP16_SCALE,
      gotcha="train.P10", ignore_case=True)
_rule("nan.grad_norm", "nan_inf", "warn", "the gradient norm is NaN/inf",
      r"\bgrad_?norm\b['\"]?\s*[:=]\s*['\"]?[-+]?(?:nan|inf)\b", FIX_NAN, gotcha="train.P8", ignore_case=True)

# --- CUDA environment (U28, U31, RP9) above the generic CUDA-error rule
_rule("config.cuda_kernel_image", "import_or_config_error", "error", "the torch build has no kernels for this GPU/CUDA",
      r"no kernel image is available for execution|mismatches the version that was used to compile PyTorch|"
      r"CUDA driver version is insufficient", FIX_CUDA_VERSION, gotcha="U28")
_rule("config.cuda_forward_compat", "import_or_config_error", "error", "the image's CUDA is newer than the host driver",
      r"forward compatibility was attempted on non supported HW|CUDA failure 804|cuda>=[\d.]+.*please update your driver|"
      r"OCI runtime create failed", FIX_DRIVER_FORWARD, gotcha="RP9")
_rule("config.no_gpu", "import_or_config_error", "error", "torch sees no CUDA GPU",
      r"Torch not compiled with CUDA enabled|Found no NVIDIA driver on your system|no CUDA-capable device is detected",
      FIX_NO_GPU, gotcha="U31")

# --- GPU faults (U22) and device-side errors
_rule("gpu.xid_fatal", "cuda_device_error", "critical", "the GPU reported a fatal Xid / ECC fault",
      r"NVRM: Xid \([^)]*\): (?:48|63|64|74|79|92|94|95)\b|fallen off the bus|uncorrectable ECC error", FIX_XID, gotcha="U22")
_rule("gpu.xid", "cuda_device_error", "warn", "the GPU driver logged an Xid", r"NVRM: Xid\b", FIX_XID_SOFT, gotcha="U22")
_rule("gpu.device_assert", "cuda_device_error", "error", "a CUDA device-side assertion fired (index/label out of range)",
      r"device-side assert(?:ion)? triggered|Assertion `[^`]*(?:n_classes|srcIndex|index out of bounds|idx_dim)[^`]*` failed",
      FIX_DEVICE_ASSERT, gotcha="train.O14")
_rule("gpu.cuda_fault", "cuda_device_error", "error", "a CUDA kernel faulted",
      r"illegal memory access|CUDA error: (?:unspecified launch failure|misaligned address|unknown error|"
      r"an illegal instruction|launch timed out)|CUBLAS_STATUS_(?:EXECUTION_FAILED|INTERNAL_ERROR)|"
      r"CUDNN_STATUS_(?:EXECUTION_FAILED|INTERNAL_ERROR|MAPPING_ERROR)|cudaErrorIllegalAddress|"
      r"ncclUnhandledCudaError|unhandled cuda error", FIX_CUDA_FAULT, gotcha="U22")

# --- collectives (train.D20, train.MN1, train.MN2)
_rule("nccl.watchdog", "nccl_timeout", "error", "an NCCL collective timed out (watchdog)",
      r"Watchdog caught collective operation timeout|collective operation timeout|Timeout at NCCL work|"
      r"Some NCCL operations have failed or timed out", FIX_WATCHDOG, gotcha="train.D20")
_rule("nccl.init", "nccl_timeout", "error", "ranks timed out meeting at initialisation",
      r"Timed out initializing process group|store based barrier|Socket Timeout|timed out waiting for all ranks",
      FIX_NCCL_INIT, gotcha="train.MN1", ignore_case=True)
_rule("nccl.error", "nccl_timeout", "error", "an NCCL communication error",
      r"nccl(?:System|Internal|Remote|InvalidUsage)Error|NCCL error in:|NCCL communicator was aborted|DistBackendError",
      FIX_NCCL, gotcha="train.MN2")
_rule("nccl.warn", "nccl_timeout", "warn", "NCCL warned", r"NCCL WARN\b", FIX_NCCL, gotcha="train.MN2")

# --- DataLoader (train.DP15, DP4, DP6)
_rule("dataloader.shm", "dataloader_error", "error", "DataLoader workers ran out of shared memory (/dev/shm)",
      r"killed by signal: Bus error|Unexpected bus error encountered in worker|unable to write to file </torch_|"
      r"received 0 items of ancdata|out of shared memory|Too many open files", FIX_SHM, gotcha="train.DP15")
_rule("dataloader.collate", "dataloader_error", "error", "batch samples have different shapes",
      r"stack expects each tensor to be equal size", FIX_COLLATE, gotcha="train.DP4")
_rule("dataloader.pickle", "dataloader_error", "error", "DataLoader workers cannot pickle the dataset",
      r"Can't pickle local object|Can't get attribute '[^']+' on <module '__main__'", FIX_PICKLE, gotcha="train.DP6")
_rule("dataloader.worker_exc", "dataloader_error", "error", "an exception inside a DataLoader worker",
      r"Caught \w+ in DataLoader worker process \d+", FIX_DATALOADER)
_rule("dataloader.timeout", "dataloader_error", "error", "a DataLoader worker timed out", r"DataLoader timed out after \d+",
      FIX_DL_TIMEOUT)
_rule("dataloader.exited", "dataloader_error", "error", "a DataLoader worker exited unexpectedly",
      r"DataLoader worker \(pid\(s\) [^)]*\) exited unexpectedly", FIX_HOST_OOM, gotcha="train.DP9", role="cascade")

# --- imports, configs, credentials
_rule("config.module", "import_or_config_error", "error", "a Python module is missing",
      r"^(?:\w+\.)*ModuleNotFoundError: ", FIX_MODULE, gotcha="U5")
_rule("config.import", "import_or_config_error", "error", "an import failed (version mismatch)",
      r"^(?:\w+\.)*ImportError: ", FIX_IMPORT, gotcha="U29")
_rule("config.override", "import_or_config_error", "error", "a config override is invalid",
      r"KeyError: .?Override path|is not a mapping|ConfigCompositionException|MissingConfigException|Could not override '|"
      r"\bomegaconf\.errors\.|ConfigAttributeError|ConfigKeyError|MissingMandatoryValue|InterpolationResolutionError|"
      r"is not in struct|Error merging override|Could not append to config|MisconfigurationException",
      FIX_OVERRIDE, gotcha="U27")
_rule("config.argparse", "import_or_config_error", "error", "the command-line arguments are invalid",
      r": error: (?:unrecognized arguments|the following arguments are required|argument )", FIX_ARGS)
_rule("config.cmd_not_found", "import_or_config_error", "error", "a command is not on PATH",
      r"\b(?:python3?|torchrun|accelerate|deepspeed|pip3?|conda|srun|nvidia-smi): command not found", FIX_CMD_NOT_FOUND,
      gotcha="U5")
_rule("config.no_script", "import_or_config_error", "error", "the script is not on the box",
      r"can't open file '[^']*': \[Errno 2\]", FIX_NO_FILE, gotcha="U42")
_rule("config.hf_auth", "import_or_config_error", "error", "the model is gated or the HF token is missing",
      r"GatedRepoError|401 Client Error|Invalid user token|Repository Not Found for url", FIX_HF_AUTH, gotcha="train.L10")
_rule("config.pad", "import_or_config_error", "error", "the tokenizer has no padding token",
      r"Asking to pad but the tokenizer does not have a padding token", FIX_PAD, gotcha="train.L3")
_rule("config.port", "import_or_config_error", "error", "the rendezvous port is already in use",
      r"Address already in use|\bEADDRINUSE\b", FIX_PORT, gotcha="train.D4")
_rule("config.state_dict", "import_or_config_error", "error", "checkpoint keys do not match the model",
      r"(?:Missing|Unexpected) key\(s\) in state_dict", FIX_STATE_DICT, gotcha="train.C18")
_rule("config.size_mismatch", "import_or_config_error", "error", "checkpoint shapes do not match the model",
      r"size mismatch for [\w.]+", FIX_SIZE, gotcha="train.O20")
_rule("config.wandb_key", "import_or_config_error", "warn", "W&B is disabled: no API key",
      r"No API key configured|Disabled WandB due to initialization error", FIX_WANDB_KEY, gotcha="U35")

# --- code bugs with a catalogue entry (class `traceback`)
_rule("code.ddp_unused", "traceback", "error", "DDP: parameters received no gradient",
      r"Expected to have finished reduction in the prior iteration", FIX_DDP_UNUSED, gotcha="train.D8")
_rule("code.no_grad", "traceback", "error", "the loss does not require grad",
      r"element 0 of tensors does not require grad", FIX_NO_GRAD, gotcha="train.O3")
_rule("code.targets", "traceback", "error", "loss targets have the wrong dtype/shape/range",
      r"Target -?\d+ is out of bounds|expected scalar type Long but found|multi-target not supported", FIX_TARGETS,
      gotcha="train.O14")
_rule("code.scaler", "traceback", "error", "the GradScaler state was not restored",
      r"No inf checks were recorded for this optimizer", FIX_SCALER, gotcha="train.C15")

# --- scheduler verdicts (before the SIGTERM rules: a time limit also sends SIGTERM)
_rule("sched.time_limit", "time_limit", "error", "the scheduler's time limit ended the job",
      r"DUE TO TIME LIMIT|\bDeadlineExceeded\b", FIX_TIME_LIMIT, gotcha="SLURM2")
_rule("sched.preempted", "preempted", "error", "the scheduler or cloud preempted the job",
      r"DUE TO PREEMPTION|\bPREEMPTED\b|spot/instance-action|[Ss]pot (?:instance )?interruption|[Pp]reemption notice|"
      r"[Ii]nstance was preempted|Reason:\s*Evicted|[Pp]od (?:was )?evicted|low on resource", FIX_PREEMPT, gotcha="SLURM2")
_rule("sched.cancelled", "cancelled", "warn", "the job was cancelled",
      r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT|^KeyboardInterrupt\b|got signal: 2\b", FIX_CANCELLED)

# --- SIGTERM from outside: preemption only when nothing crashed
_rule("signal.sigterm", "preempted", "error", "the job received SIGTERM",
      r"Received SIGTERM|received signal SIGTERM|SIGTERM received|Received Signals\.SIGTERM|Received 15 death signal|"
      r"got signal: 15\b|Signal 15 \(SIGTERM\) received by PID|exitcode\s*:\s*-15\b|^Terminated$|: line \d+:\s+\d+ Terminated\b",
      FIX_SIGTERM, role="sigterm")

# --- SSH session (U1, GEN8), then the network
_rule("ssh.hostkey", "ssh_disconnect", "error", "the SSH host key is unknown or changed",
      r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED", FIX_HOSTKEY)
_rule("ssh.drop", "ssh_disconnect", "warn", "the SSH session dropped",
      r"client_loop: send disconnect|packet_write_wait|Connection to \S+ closed by remote host|ssh: connect to host|"
      r"kex_exchange_identification|ssh_exchange_identification|Read from remote host|Timeout, server \S+ not responding",
      FIX_SSH, gotcha="U1")
_rule("net.wandb_init", "network_stall", "warn", "W&B could not start its run (network)",
      r"Run initialization has timed out|wandb: ERROR .*(?:timed out|[Tt]imeout)", FIX_WANDB, gotcha="AD1")
_rule("net.wandb", "network_stall", "warn", "W&B cannot reach its server",
      r"wandb: ERROR|wandb: Network error|wandb: .*retry", FIX_WANDB)
_rule("net.proxy", "network_stall", "warn", "a proxy refused the connection", r"ProxyError", FIX_NETWORK, gotcha="GS2")
_rule("net.timeout", "network_stall", "warn", "a network request failed or timed out",
      r"ReadTimeout|ConnectTimeout|ConnectionResetError|ConnectionRefusedError|requests\.exceptions\.ConnectionError|"
      r"Max retries exceeded with url|Temporary failure in name resolution|Name or service not known|"
      r"couldn't connect to 'https?://|LocalEntryNotFoundError|Network is unreachable|Connection reset by peer",
      FIX_NETWORK, gotcha="AD2")

# --- native crashes and launcher cascades
_rule("crash.native", "traceback", "error", "the process crashed natively (segfault/abort)",
      r"Segmentation fault|core dumped|Fatal Python error|^Bus error\b", FIX_SEGV)
_rule("cascade.torchrun", "traceback", "error", "torchrun: a worker failed",
      r"ChildFailedError|SignalException|failed \(exitcode: -?\d+\) local_rank|terminate called after throwing", FIX_TORCHRUN,
      role="cascade")

RULES: tuple[Rule, ...] = tuple(_R)


# The unclassified crash: an exception line no rule above explains.
GENERIC_TRACEBACK = Rule("traceback.generic", "traceback", "error", "the run crashed with an unclassified exception",
                         _re(r"$^"), FIX_TRACEBACK)


def _synthetic(rule_id: str, cls: str, severity: Severity, title: str, remedy: str, *,
               gotcha: str | None = None, role: Role = "cause") -> Rule:
    return Rule(rule_id, cls, severity, title, _re(r"$^"), remedy, gotcha, role)


# Rules for facts that come from the caller rather than from log lines (exit status, cgroup, scheduler, disk).
SIGNALS: dict[str, Rule] = {
    "sigkill": _synthetic("signal.sigkill", "host_oom_killed", "error",
                          "killed by SIGKILL (exit 137): the OOM killer, unless someone ran kill -9", FIX_HOST_OOM, gotcha="U9"),
    "oom_delta": _synthetic("signal.oom_delta", "host_oom_killed", "error", "the cgroup OOM killer fired during the run",
                            FIX_HOST_OOM, gotcha="U9"),
    "sigterm": _synthetic("signal.exit_sigterm", "preempted", "error", "terminated by SIGTERM (exit 143)", FIX_SIGTERM,
                          role="sigterm"),
    # the job said it got SIGTERM and then died of SIGKILL: the stop's grace window ran out (spot reclaim, scancel)
    "sigkill_after_term": _synthetic("signal.sigkill_after_term", "preempted", "error",
                                     "killed by SIGKILL (exit 137) after it received SIGTERM: the grace window ran out",
                                     FIX_SIGTERM, role="sigterm"),
    "sigint": _synthetic("signal.sigint", "cancelled", "warn", "interrupted by SIGINT (exit 130)", FIX_CANCELLED),
    "segv": _synthetic("signal.segv", "traceback", "error", "the process crashed natively (SIGSEGV/SIGABRT)", FIX_SEGV),
    "sigbus": _synthetic("signal.sigbus", "dataloader_error", "error", "SIGBUS: shared memory (/dev/shm) ran out", FIX_SHM,
                         gotcha="train.DP15"),
    "exit": _synthetic("signal.exit", "traceback", "error", "the process exited non-zero", FIX_EXIT, role="cascade"),
    "sched_oom": _synthetic("sched.state_oom", "host_oom_killed", "error", "the scheduler reports OUT_OF_MEMORY",
                            FIX_SLURM_OOM, gotcha="SLURM4"),
    "sched_preempted": _synthetic("sched.state_preempted", "preempted", "error", "the scheduler reports the job preempted",
                                  FIX_PREEMPT, gotcha="SLURM2"),
    "sched_node_fail": _synthetic("sched.state_node_fail", "preempted", "error", "the node failed under the job (NODE_FAIL)",
                                  FIX_PREEMPT),
    "sched_timeout": _synthetic("sched.state_timeout", "time_limit", "error", "the scheduler reports a time-limit kill",
                                FIX_TIME_LIMIT, gotcha="SLURM2"),
    "sched_cancelled": _synthetic("sched.state_cancelled", "cancelled", "warn", "the scheduler reports the job cancelled",
                                  FIX_CANCELLED),
    "sched_failed": _synthetic("sched.state_failed", "traceback", "error", "the scheduler reports the job failed", FIX_EXIT,
                               role="cascade"),
    "disk_low": _synthetic("disk.low", "disk_full", "warn", "the run disk is nearly full", FIX_DISK, gotcha="U6"),
    "disk_out": _synthetic("disk.out", "disk_full", "critical", "the run disk is full", FIX_DISK, gotcha="U6"),
    "inodes_low": _synthetic("inodes.low", "inode_exhausted", "warn", "the run disk is nearly out of inodes", FIX_INODES,
                             gotcha="U7"),
    "inodes_out": _synthetic("inodes.out", "inode_exhausted", "critical", "the run disk is out of inodes", FIX_INODES,
                             gotcha="U7"),
    "enospc_inodes": _synthetic("disk.enospc_inodes", "inode_exhausted", "critical",
                                "no space left on device while bytes are free: inodes ran out", FIX_INODES, gotcha="U7"),
}
