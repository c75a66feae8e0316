"""Log-triage rules as data: which line means which failure class, its gotcha id, and the fixed next step.

Each `Rule` maps one family of log lines (matched by `pattern`) to a class of the fixed vocabulary
(`mcp_gpu.models.TRIAGE_CLASSES`, plus `EXTRA_CLASSES` below). The engine tries the rules in order and the
FIRST match decides a line, so specific rules sit above general ones (a CUDA OOM inside an NCCL warning is an
OOM; Ray's node-memory OutOfMemoryError is host RAM, above the GPU rule). A rule is tried only on lines holding
one of its `needles` (lower-case literals every match contains; given explicitly where a pattern's own literals
are too short or too common).

`role` says how a match counts:
- `cause`   evidence of a root cause;
- `sigterm` the process was asked to stop (SIGTERM): preemption evidence only when nothing crashed;
- `cascade` the consequence of a failure elsewhere (torchrun's ChildFailedError, "worker exited unexpectedly");
            it can be the answer only when nothing else is;
- `ignore`  a line that looks alarming but is routine (torchrun telling the other workers to stop): it matches so
            that no later rule claims it, and is then dropped;
- `trend`   a line that means something only as part of a trend (an fp16 overflow that shrinks the loss scale): the
            engine collects them and judges the series (`engine._overflow_collapse`).

`fatal` marks a line that by itself says a process died (a segfault, `Killed`, a non-zero worker exit code,
torchrun's ChildFailedError): a log holding one is never `healthy`. Other lines count only if the run did not go on
making progress after them (a caught-and-logged error followed by more training steps is not a failure).

Gotcha ids follow the catalogue: `U1..U44` universal, platform ids (`RP9`, `AD1`, `SLURM4`, `K8S5`) and training
entries as `train.<entry>` (`train.D20`, `train.C2`, `train.P8`, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from mcp_gpu.models import Severity
from mcp_gpu.triage.needles import needles_of

Role = Literal["cause", "sigterm", "cascade", "ignore", "trend"]

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
    fatal: bool = False
    confidence: float = 0.85


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
# "inf" as a value, not inside "info": the literal with what may follow it
_INF = ("inf ", "inf,", "inf)", "inf'", 'inf"', "inf}", "inf]", "inf|", "inf;", "inf\n", "inf\t", "infinit", "inf.")


def _rule(rule_id: str, cls: str, severity: Severity, title: str, pattern: str, remedy: str, *,
          gotcha: str | None = None, role: Role = "cause", ignore_case: bool = False, fatal: bool = False,
          needles: tuple[str, ...] | None = None, confidence: float = 0.85) -> None:
    found = needles if needles is not None else needles_of(pattern)
    if found is None:
        raise ValueError(f"rule {rule_id}: give needles (no literal of 3+ characters in every alternative)")
    _R.append(Rule(rule_id, cls, severity, title, _re(pattern, ignore_case), remedy, gotcha, role,
                   tuple(n.lower() for n in found), fatal, confidence))


# --- routine lines that only look alarming (first, so that nothing below claims them)
_rule("ignore.exception_ignored", "traceback", "info", "Python printed and ignored an exception",
      r"^Exception ignored in\b|^Error in atexit\._run_exitfuncs", "", role="ignore",
      needles=("exception ignored in", "error in atexit._run_exitfuncs"))
_rule("ignore.mlock", "host_oom_killed", "info", "optional memory locking failed (mlock): loading goes on",
      r"failed to mlock|RLIMIT_MLOCK", "", role="ignore", needles=("failed to mlock", "rlimit_mlock"))
# NCCL falling back from InfiniBand/OFI/a plugin to sockets at init, TensorFlow not finding optional TensorRT/GPU
# libraries (it says so at W level and goes on): startup notices of a run that works
_rule("ignore.nccl_transport", "nccl_timeout", "info", "NCCL fell back to another transport",
      r"NCCL WARN (?:Failed to open libibverbs|NET/OFI|NET/IB ?: No device|NET/Plugin|Could not find real path)",
      "", role="ignore", needles=("nccl warn",))
_rule("ignore.tf_dso", "import_or_config_error", "info", "TensorFlow could not load an optional library",
      r"(?:dso_loader|cuda_dnn|cuda_blas|cuda_fft)\.cc:\d+\] (?:Could not load dynamic library|Unable to register)|"
      r"TF-TRT Warning", "", role="ignore", needles=("dso_loader", "cuda_dnn", "cuda_blas", "cuda_fft", "tf-trt warning"))
# cudaErrorCudartUnloading ("driver shutting down"): CUDA calls made by destructors while the process exits;
# xformers' own "Error caught was: No module named 'triton'" is its probe of an optional dependency
_rule("ignore.cuda_unloading", "cuda_device_error", "info", "CUDA calls during process exit",
      r"driver shutting down|cudaErrorCudartUnloading|Error caught was: No module named", "", role="ignore",
      needles=("driver shutting down", "cudaerrorcudartunloading", "error caught was: no module named"))
_rule("ignore.torchrun_sigterm_workers", "traceback", "info", "torchrun stopping the other workers",
      r"Sending process \d+ closing signal SIGTERM|Unable to shutdown process \d+ via", "", role="ignore")
_rule("ignore.elastic_hint", "traceback", "info", "torchrun hint", r"To enable traceback see: https://pytorch\.org", "",
      role="ignore")
_rule("ignore.deprecation", "traceback", "info", "a deprecation or future warning",
      # (not when the warning itself names a failure: a full disk, no memory, a GPU this torch cannot drive)
      r"^(?!.*(?:\[Errno \d|No space|[Oo]ut of memory|Killed|CUDA (?:unknown )?error|not compatible with|NVIDIA driver))"
      r".*(?:(?:Deprecation|Future|User|Runtime|Resource)Warning\b|\bwarnings\.warn\(|is deprecated|will be removed in)",
      "", role="ignore", needles=("deprecationwarning", "futurewarning", "userwarning", "runtimewarning",
                                 "resourcewarning", "warnings.warn", "deprecated", "will be removed in"))
_rule("ignore.zero_counters", "nan_inf", "info", "a counter of NaN/inf events that reads zero",
      r"\b(?:nan|inf)[\w/.-]*['\"]?\s*[:=]\s*['\"]?0(?:\.0+)?\b(?![.\d])(?!.*\b(?:loss|"
      r"grad_?norm)\b['\"]?\s*[:=]\s*['\"]?[-+]?(?:nan|inf)\b)",
      "", role="ignore", ignore_case=True, needles=("nan", *_INF))

# --- mixed-precision overflow: judged as a trend of the loss scale, not line by line
_rule("trend.fp16_overflow", "nan_inf", "info", "fp16 overflow: the loss scale was reduced",
      r"OVERFLOW!|[Gg]radient overflow|overflow detected|[Oo]verflow(?: found)?.*(?:[Ss]kipping|loss.?scale)|"
      r"[Aa]ttempted loss scale|reducing (?:the )?loss scale|[Dd]ecreasing loss scale|[Rr]educ(?:e|ing) loss[_ ]scale",
      FIX_FP16_SCALE, role="trend", gotcha="train.P10",
      needles=("overflow", "attempted loss scale", "loss scale", "loss_scale"))

# --- CRLF scripts (U26); the engine renders a carriage return inside a message as a visible \r
_rule("config.crlf", "import_or_config_error", "error", "the script has Windows (CRLF) line endings",
      r"\$'\\r'|\\r: (?:command not found|invalid option|No such file)|\^M: bad interpreter|/bin/(?:ba)?sh\^M|"
      r"unexpected token `?\$'[^']*\\r'", FIX_CRLF, gotcha="U26", needles=("\\r", "^m"))

# --- inodes and disk space (U6, U7) before anything that a full disk can cause
_rule("inodes.df", "inode_exhausted", "critical", "the filesystem is out of inodes",
      r"[Oo]ut of inodes|no (?:free )?inodes|inodes? (?:are |is )?(?:exhausted|full|used up)|IUse%.*\b100%|"
      r"[Ii]node (?:quota|limit) (?:exceeded|reached)|[Ff]ile (?:count|number) (?:quota|limit)|"
      r"files? quota exceeded|exceeded (?:the )?(?:file|inode) (?:quota|limit)|[Tt]oo many files",
      FIX_INODES, gotcha="U7", needles=("inode", "iuse%", "file count", "file number", "files quota",
                                        "file quota", "file limit", "too many files"))
_rule("disk.gate", "disk_full", "critical", "the launch disk gate aborted: too little free space", r"\bDISK_GATE_ABORT\b",
      FIX_DISK, gotcha="U6")
_rule("disk.torch_save", "disk_full", "critical", "torch.save failed mid-write: the disk filled",
      r"inline_container\.cc.*(?:unexpected pos|file write failed)|PytorchStreamWriter failed|basic_ios::clear: iostream error|"
      r"write\(\): fd \d+ failed",
      FIX_DISK, gotcha="U6", needles=("inline_container.cc", "pytorchstreamwriter failed", "basic_ios::clear", "write(): fd"))
_rule("disk.enospc", "disk_full", "critical", "no space left on device",
      r"No space left on device|\[Errno 28\]|\bENOSPC\b|[Nn]ot enough (?:free )?(?:disk )?space|[Dd]isk (?:is )?full|"
      r"insufficient (?:disk )?space|out of disk space|[Nn]o space left|Write failed.*space|is over \d+% full|"
      r"(?:[Dd]isk|[Ff]ilesystem|[Vv]olume|[Pp]artition|[Ss]torage).{0,60}\b(?:9\d|100)% (?:full|used)",
      FIX_DISK, gotcha="U6", needles=("space", "[errno 28]", "enospc", "disk full", "disk is full", "% full", "% used"))
_rule("disk.quota", "disk_full", "critical", "disk quota exceeded", r"Disk quota exceeded|\[Errno 122\]|\bEDQUOT\b",
      FIX_QUOTA, gotcha="U6")
_rule("disk.k8s_evicted", "disk_full", "error", "pod evicted: node low on ephemeral storage",
      r"low on resource: ephemeral-storage|DiskPressure|ephemeral[- ](?:local )?storage (?:usage )?exceed", FIX_EVICT_DISK,
      gotcha="K8S5", needles=("ephemeral-storage", "diskpressure", "ephemeral local storage", "ephemeral storage"))

# --- host RAM worded like a GPU OOM (Ray's OutOfMemoryError is the node's RAM), before the VRAM rule
_rule("host_oom.ray", "host_oom_killed", "error", "the node ran low on RAM and its tasks were killed",
      r"killed due to (?:the node running low on memory|memory pressure)|[Nn]ode (?:is )?(?:running )?low on memory|"
      r"ray\.exceptions\.OutOfMemoryError|[Ww]orkers? (?:\(tasks / actors\) )?(?:have been |were )?killed due to memory",
      FIX_HOST_OOM, gotcha="U9", fatal=True,
      needles=("killed due to", "low on memory", "ray.exceptions.outofmemoryerror"))

# --- VRAM (U10) above the NCCL and CUDA-error rules that wrap it
_rule("host_oom.tf_cpu", "host_oom_killed", "error", "host RAM ran out (TensorFlow's CPU allocator)",
      r"OOM when allocating .{0,200}(?:device:CPU|by allocator cpu)|[Aa]llocator \(cpu\) ran out of memory",
      FIX_HOST_OOM, gotcha="U9", needles=("oom when allocating", "allocator (cpu) ran out"))
_rule("cuda_oom.torch", "cuda_oom", "error", "GPU memory ran out",
      r"CUDA out of memory|CUDA: out of memory|OutOfMemoryError|CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|"
      r"Cuda failure '?out of memory|HIP out of memory|RESOURCE_EXHAUSTED|[Rr]esource exhausted: Out|CUDA_ERROR_OUT_OF_MEMORY|"
      r"OOM when allocating|OOM [Dd]etected|No executable batch size found|[Oo]ut of memory (?:while|"
      r"trying to allocate|on device|allocating)|"
      r"[Ff]ailed to allocate .*(?:device|GPU|from device)|[Rr]an out of memory trying to allocate|"
      r"BFCAllocator.*(?:ran out|[Oo]ut of memory)|cudaErrorMemoryAllocation|hipErrorOutOfMemory|"
      r"CUDNN_STATUS_ALLOC_FAILED|CUDNN_STATUS_NOT_ENOUGH_WORKSPACE|DNNL.*out of memory|"
      r"[Nn]ot enough (?:GPU|device|CUDA) memory|GPU memory (?:is )?(?:full|exhausted|insufficient)",
      FIX_CUDA_OOM, gotcha="U10",
      needles=("out of memory", "outofmemoryerror", "cublas_status_alloc_failed", "resource_exhausted",
               "cuda_error_out_of_memory", "oom when allocating", "oom detected",
               "no executable batch size found", "resource exhausted: out",
               "failed to allocate", "ran out of memory",
               "bfcallocator", "cudaerrormemoryallocation", "hiperroroutofmemory", "cudnn_status_alloc_failed",
               "cudnn_status_not_enough_workspace", "gpu memory", "device memory", "cuda memory"))

# --- checkpoint files (train.C2)
_rule("ckpt.zip", "checkpoint_corrupt", "error", "checkpoint is truncated or corrupt",
      r"PytorchStreamReader failed|failed finding central directory|invalid header or archive is corrupted|"
      r"UnpicklingError|pickle data was truncated|unexpected EOF|SafetensorError|safetensors_rust|"
      r"Error while deserializing header|HeaderTooLarge|HeaderTooSmall|MetadataIncompleteBuffer|InvalidHeader|"
      r"incomplete metadata|^(?:\w+\.)*EOFError\b|Ran out of input|BadZipFile|[Nn]ot a zip file|"
      r"(?:checkpoint|weights|state.dict|model file|archive|\.pth?|\.ckpt|\.bin|\.safetensors).{0,80}(?:corrupt|truncated)|"
      r"(?:corrupt|truncated).{0,80}(?:checkpoint|weights|archive|\.pth?|\.ckpt|\.bin|\.safetensors)|"
      r"[Uu]nable to (?:load|open) (?:weights|file).*(?:checkpoint|truncated)|truncated file|file signature not found|"
      r"storage has wrong byte size|invalid load key", FIX_CKPT, gotcha="train.C2",
      needles=("pytorchstreamreader failed", "central directory", "archive is corrupted", "unpicklingerror",
               "pickle data was truncated", "unexpected eof", "safetensorerror", "safetensors_rust",
               "deserializing header", "headertoo", "metadataincompletebuffer", "invalidheader",
               "incomplete metadata", "eoferror", "ran out of input", "badzipfile", "not a zip file", "corrupt",
               "truncated", "file signature not found", "wrong byte size", "invalid load key", "unable to load",
               "unable to open"))

# --- host / cgroup memory (U9, SLURM4)
_rule("host_oom.slurm", "host_oom_killed", "error", "Slurm's cgroup OOM handler killed the job",
      r"Detected \d+ oom[-_ ]kill events?|\bOUT_OF_MEMORY\b|oom[-_]kill event", FIX_SLURM_OOM, gotcha="SLURM4",
      needles=("oom-kill", "oom_kill", "oom kill", "out_of_memory"), fatal=True)
_rule("host_oom.kernel", "host_oom_killed", "error", "the kernel OOM killer killed a process",
      r"Out of memory: Kill(?:ed)? process|Memory cgroup out of memory|invoked oom-killer|\boom-kill:|\bOOMKilled\b|"
      r"low on resource: memory|[Kk]illed process \d+|\boom_reaper\b|[Mm]emory pressure|memory (?:usage )?threshold|"
      r"[Ww]orkers? (?:have been |were )?killed due to memory|OutOfMemoryError: Task was killed|"
      r"[Nn]ode (?:is )?(?:running )?low on memory|exceeded (?:its |the )?memory limit|[Mm]emory limit exceeded|"
      r"[Rr]eason: OOMKilled|[Ee]xit [Cc]ode:?\s*137\b|status:? ?137|TERM_MEMLIMIT|reaching LSF memory usage limit|Tasks state \(memory values in pages\)|"
      r"\boom_score_adj name\b|Memory cgroup stats for",
      FIX_HOST_OOM, gotcha="U9", fatal=True,
      needles=("out of memory: kill", "memory cgroup out of memory", "oom-kill", "oomkilled", "low on resource: memory",
               "killed process", "oom_reaper", "memory pressure", "memory threshold", "memory usage threshold",
               "killed due to memory", "task was killed", "low on memory", "memory limit", "code 137", "code: 137",
               "code:137", "exit code:", "status 137", "status: 137", "status:137", "tasks state (memory values",
               "oom_score_adj name", "memory cgroup stats for", "term_memlimit",
               "lsf memory usage limit"))
# Slurm's accounting counts page cache: "at some point" is said of steps that completed (a kill says "killed")
_rule("host_oom.limit_note", "host_oom_killed", "info", "the step's memory use touched its limit (not killed)",
      r"Exceeded (?:job |step )?memory limit at some point", FIX_SLURM_OOM, gotcha="SLURM4",
      needles=("memory limit at some point",))
_rule("host_oom.limits", "host_oom_killed", "error", "a memory limit was exceeded and the process killed",
      r"[Ee]xceeded (?:job |step )?memory limit|out-of-memory handler|excessive memory|exited on signal 9\b|"
      r"[Kk]illed: 9\b|signal 9 \(Killed\)|[Kk]illed by the OOM killer|oom.killer", FIX_HOST_OOM, gotcha="U9", fatal=True,
      needles=("memory limit", "out-of-memory handler", "excessive memory", "exited on signal 9", "killed: 9",
               "signal 9 (killed)", "oom killer", "oom-killer", "oom_killer"))
_rule("dataloader.killed", "dataloader_error", "error", "a DataLoader worker was killed (SIGKILL): usually host RAM",
      r"DataLoader worker \(pid[^)]*\) is killed by signal: Killed", FIX_HOST_OOM, gotcha="U9", fatal=True)
_rule("host_oom.sigkill", "host_oom_killed", "error", "a process was SIGKILLed: the OOM killer, unless someone ran kill -9",
      r"^\W*Killed\b|已杀死|: line \d+:\s+\d+ Killed\b|^zsh: killed\b|exitcode\s*:\s*-9\b|Signal 9 \(SIGKILL\) received by PID|"
      r"return code = -9\b|died with <Signals\.SIGKILL: 9>|killed by signal: Killed|[Kk]illed by signal 9\b|"
      r"signal 9 \(SIGKILL\)|\(SIGKILL\)|exit (?:code|status):? -9\b|\bsignal: killed\b|task \d+: Killed|"
      r"terminated with signal SIGKILL|Signals\.SIGKILL|SIGKILL: 9",
      FIX_HOST_OOM, gotcha="U9", fatal=True,
      needles=("killed", "已杀死", "exitcode", "sigkill", "return code = -9", "signal 9", "code -9", "code: -9",
               "status -9", "status: -9"))
_rule("host_oom.alloc", "host_oom_killed", "error", "host RAM exhausted (allocation failed)",
      r"^(?:\w+\.)*MemoryError\b|Cannot allocate memory|\[Errno 12\]|DefaultCPUAllocator: can't allocate memory|std::bad_alloc|"
      r"Unable to allocate [\d.]+ [KMGT]i?B|can't allocate memory|[Oo]ut of (?:host|CPU|system) memory",
      FIX_HOST_OOM, gotcha="U9",
      needles=("memoryerror", "cannot allocate memory", "[errno 12]", "can't allocate memory", "std::bad_alloc",
               "unable to allocate", "out of host memory", "out of cpu memory", "out of system memory"))

# --- NaN / inf (train.P8, train.P10)
# fp16/AMP: the first steps overflow while the dynamic loss scale searches down from 2**16, and the logged gradient
# norm of those skipped steps is nan/inf: a grad-norm NaN on a line of the first 100 iterations is that search.
_rule("nan.grad_norm_warmup", "nan_inf", "info", "the gradient norm is NaN/inf at warm-up (loss-scale search)",
      r"^(?=.*\bg(?:rad)?_?norm\b['\"]?\s*[:=]\s*(?:tensor\()?['\"]?[-+]?(?:nan|inf)\b)(?=.*(?:[Ee]poch(?:\(train\))?\s*"
      r"\[1\]\s*\[(?:\d{1,2}|100)/|'epoch':\s*0\.0[0-2]\d*\b|\b(?:[Ss]tep|[Ii]ter(?:ation)?)\s*[:=]?\s*(?:\d{1,2}|100)\b))",
      FIX_FP16_SCALE, gotcha="train.P10", needles=("nan", *_INF))
_rule("nan.tensorboard", "nan_inf", "info", "a logged scalar was NaN/inf (tensorboard's warning names no metric)",
      r"NaN or Inf found in input tensor", FIX_NAN, gotcha="train.P8", needles=("nan or inf found in input tensor",))
_rule("nan.loss", "nan_inf", "error", "the loss became NaN/inf",
      r"(?:\b|_)(?:train_|val_|valid_|eval_|test_|total_|train/|val/)?loss(?:_\w+|es)?\b['\"]?(?:\s*[:=]\s*|"
      r"\s+)(?:tensor\()?['\"]?"
      r"[-+]?(?:nan|inf(?:inity)?)\b(?!\s*(?:->|to\b))|"
      r"\bloss (?:is|became|was|=|has become|went to) (?:nan|inf|infinite)|returned nan values in its|"
      r"\bis not finite\b|non-finite|found invalid values|probability tensor contains either|"
      r"^(?:\w+\.)*FloatingPointError\b|\bNaN (?:or Inf )?(?:loss|detected|found|encountered|values?)|"
      r"(?:loss|gradient|grad)s? (?:is |are |contains? )?NaN|nan loss|Loss is nan|[Dd]etected (?:nan|inf)|"
      r"NaN or Inf found|loss is infinite|Encountered (?:a )?NaN|[Ll]oss (?:exploded|diverged)|"
      r"\bnan\b.*\bloss\b.*\bnan\b",
      FIX_NAN, gotcha="train.P8", ignore_case=True, needles=("nan", *_INF, "non-finite", "not finite",
                                                            "invalid values", "probability tensor",
                                                            "floatingpointerror", "exploded", "diverged"))
_rule("nan.scaler", "nan_inf", "error", "the fp16 loss scale hit its minimum",
      r"loss scale already at minimum|[Mm]inimum loss scale reached|loss[_ ]scale (?:has )?(?:reached|hit) (?:the )?min",
      FIX_FP16_SCALE, gotcha="train.P10", ignore_case=True, needles=("loss scale", "loss_scale"), fatal=True)
_rule("nan.grad_norm", "nan_inf", "warn", "the gradient norm is NaN/inf",
      r"\bg(?:rad)?_?norm\b['\"]?\s*[:=]\s*(?:tensor\()?['\"]?[-+]?(?:nan|inf)\b", FIX_NAN, gotcha="train.P8",
      ignore_case=True, needles=("nan", *_INF))

# --- CUDA environment (U28, U31, RP9) above the generic CUDA-error rule
_rule("config.cuda_kernel_image", "import_or_config_error", "error", "the torch build has no kernels for this GPU/CUDA",
      r"no kernel image is available for execution|mismatches the version that was used to compile PyTorch|"
      r"CUDA driver version is insufficient|NVIDIA driver on your system is too old|"
      r"driver version (?:is )?(?:too old|older than)|CUDA_ERROR_NO_BINARY_FOR_GPU|not compatible with the current PyTorch installation|"
      r"CUDA_ERROR_UNSUPPORTED_PTX_VERSION", FIX_CUDA_VERSION, gotcha="U28")
_rule("config.cuda_forward_compat", "import_or_config_error", "error", "the image's CUDA is newer than the host driver",
      r"forward compatibility was attempted on non supported HW|CUDA failure 804|cuda>=[\d.]+.*please update your driver|"
      r"OCI runtime create failed", FIX_DRIVER_FORWARD, gotcha="RP9",
      needles=("forward compatibility", "cuda failure 804", "please update your driver", "oci runtime create failed"))
_rule("config.no_gpu", "import_or_config_error", "error", "torch sees no CUDA GPU",
      r"Torch not compiled with CUDA enabled|Found no NVIDIA driver on your system|no CUDA-capable device is detected|"
      r"CUDA_ERROR_NO_DEVICE", FIX_NO_GPU, gotcha="U31")

# --- GPU faults (U22) and device-side errors
_rule("gpu.xid_fatal", "cuda_device_error", "critical", "the GPU reported a fatal Xid / ECC fault",
      r"NVRM: Xid \([^)]*\): (?:48|63|64|74|79|92|94|95)\b|fallen off the bus|uncorrectable ECC error|"
      r"CUDA_ERROR_ECC_UNCORRECTABLE|ECC error|GPU is lost|GPU has fallen", FIX_XID, gotcha="U22",
      needles=("nvrm: xid", "fallen off the bus", "ecc error", "ecc_uncorrectable", "gpu is lost", "gpu has fallen"))
_rule("gpu.xid", "cuda_device_error", "warn", "the GPU driver logged an Xid", r"NVRM: Xid\b", FIX_XID_SOFT, gotcha="U22")
_rule("gpu.device_assert", "cuda_device_error", "error", "a CUDA device-side assertion fired (index/label out of range)",
      r"device-side assert(?:ion)? triggered|Assertion `[^`]*(?:n_classes|srcIndex|index out of bounds|idx_dim)[^`]*` failed|"
      r"CUDA_ERROR_ASSERT|cudaErrorAssert|\.cu:\d+: .*Assertion `[^`]*` failed|block: \[\d+,\d+,\d+\], thread: \[",
      FIX_DEVICE_ASSERT, gotcha="train.O14", needles=("device-side assert", "assertion `", "cuda_error_assert",
                                                       "cudaerrorassert", "block: ["))
_rule("gpu.other_stacks", "cuda_device_error", "error", "the GPU failed (ROCm, Vulkan, NVML)",
      r"Memory access fault by GPU|ErrorDeviceLost|DeviceLostError|VK_ERROR_DEVICE_LOST|"
      r"NVMLError_(?:Unknown|GpuIsLost|Timeout|Uninitialized)|HSA_STATUS_ERROR_\w+|hipErrorIllegalAddress",
      FIX_CUDA_FAULT, gotcha="U22", needles=("memory access fault by gpu", "devicelost", "vk_error_device_lost",
                                           "nvmlerror_", "hsa_status_error_", "hiperrorillegaladdress"))
_rule("gpu.cuda_fault", "cuda_device_error", "error", "a CUDA kernel or the GPU failed",
      r"illegal memory access|unspecified launch failure|CUDA error: (?:misaligned address|unknown error|"
      r"an illegal instruction|launch timed out|the launch timed out|operation not permitted|an illegal)|"
      r"CUBLAS_STATUS_(?:EXECUTION_FAILED|INTERNAL_ERROR|NOT_INITIALIZED|MAPPING_ERROR)|"
      r"CUDNN_STATUS_(?:EXECUTION_FAILED|INTERNAL_ERROR|MAPPING_ERROR|NOT_INITIALIZED)|cudaError(?!MemoryAllocation)\w+|"
      r"CUDA_ERROR_(?!OUT_OF_MEMORY|NO_BINARY|UNSUPPORTED_PTX|NO_DEVICE|ASSERT)\w+|hipError(?!OutOfMemory)\w+|"
      r"ncclUnhandledCudaError|unhandled cuda error|CUDA error: (?!out of memory)|"
      r"\bcuda(?:Launch|Memcpy\w*|DeviceSynchronize|StreamSynchronize)\b.*(?:fail|error)|"
      r"CUDA driver error|[Cc][Uu][Dd][Aa] failure \d+|[Cc]uda[Ee]rror|GPU (?:hang|fault|reset)|"
      r"failed to (?:query|synchronize|initialize|launch).{0,40}(?:CUDA|GPU|device)|CUresult|"
      r"Unexpected (?:CUDA|GPU) error|XLA.*(?:Internal|INTERNAL).*(?:CUDA|cuda|GPU)|[Cc]uda error \d+",
      FIX_CUDA_FAULT, gotcha="U22",
      needles=("illegal memory access", "unspecified launch failure", "cuda error", "cublas_status_", "cudnn_status_",
               "cudaerror", "cuda_error_", "hiperror", "ncclunhandledcudaerror", "unhandled cuda error",
               "cudalaunch", "cudamemcpy", "cudadevicesynchronize",
               "cudastreamsynchronize", "cuda driver error", "cuda failure", "gpu hang", "gpu fault", "gpu reset",
               "failed to", "curesult", "unexpected cuda error", "unexpected gpu error", "xla"))

# --- the network under the collectives: InfiniBand / RoCE / socket transport failures, a peer gone
_rule("nccl.net", "network_stall", "error", "the network between ranks failed (NCCL transport)",
      r"ncclRemoteError|remote process exited or there was a network error|NET/IB ?: .*(?:[Ee]rror|[Ff]ailed)|"
      r"[Gg]ot completion (?:from peer )?with error|[Gg]ot completion from peer \S+ with (?:error|"
      r"status=[1-9])|completion error|ibv_\w+ failed|IBV_WC_\w+_ERR|"
      r"Connection closed by (?:remote )?peer|transport retry counter exceeded|NCCL_IB.*error",
      FIX_NCCL, gotcha="train.MN2",
      needles=("ncclremoteerror", "remote process exited or there was a network error", "net/ib", "completion",
               "ibv_", "connection closed by", "transport retry counter exceeded", "nccl_ib"))

# --- collectives (train.D20, train.MN1, train.MN2)
_rule("nccl.horovod_stall", "nccl_timeout", "error", "Horovod ranks stalled in a collective",
      r"Stalled ranks:|stall_inspector\.cc|waiting for remainder of ranks|Stalled ops", FIX_WATCHDOG, gotcha="train.MN2",
      needles=("stalled ranks", "stall_inspector", "waiting for remainder of ranks", "stalled ops"))
_rule("nccl.watchdog", "nccl_timeout", "error", "a collective timed out (watchdog)",
      r"Watchdog caught collective operation timeout|collective operation timeout|Timeout at NCCL work|"
      r"Some NCCL operations have failed or timed out|ran for \d+ milliseconds before timing out|"
      r"ProcessGroupNCCL.*(?:[Ww]atchdog|timeout|[Tt]imed out|[Hh]eartbeat|aborting|terminated)|"
      r"checkTimeout|ncclCommWatchdog|workCleanupLoop|[Hh]eartbeat ?[Mm]onitor|watchdog (?:got stuck|thread)|"
      r"NCCL (?:operation|work|collective).*(?:timed out|timeout)|(?:all_?reduce|all_?gather|broadcast|barrier|"
      r"reduce_scatter|alltoall|ALLREDUCE|ALLGATHER|BROADCAST|_ALLGATHER_BASE|REDUCE_SCATTER)\w*.*[Tt]imeout|"
      r"Timed out waiting for.*(?:collective|rank|NCCL|[Bb]arrier)|DistNetworkError|[Gg]loo.*[Tt]imed out|"
      r"(?:NCCL|collective|process group).{0,40}(?: hang|stuck|timed out)|TORCH_NCCL_ASYNC_ERROR_HANDLING",
      FIX_WATCHDOG, gotcha="train.D20",
      needles=("watchdog", "collective operation timeout", "timeout at nccl work", "ran for", "processgroupnccl",
               "checktimeout", "workcleanuploop", "heartbeat", "nccl operation", "nccl work", "nccl collective",
               "timeout", "timed out", "distnetworkerror", " hang", "stuck", "torch_nccl_async_error_handling"))
_rule("nccl.init", "nccl_timeout", "error", "ranks timed out meeting at initialisation",
      r"Timed out initializing process group|store based barrier|Socket Timeout|timed out waiting for all ranks|"
      r"[Rr]endezvous.*(?:timed out|timeout|[Cc]losed)|RendezvousTimeoutError|TCPStore.*(?:timed out|timeout)|"
      r"(?:wait|Wait) timeout|Connection closed by peer \[",
      FIX_NCCL_INIT, gotcha="train.MN1", ignore_case=True,
      needles=("timed out initializing", "store based barrier", "socket timeout", "timed out waiting for all ranks",
               "rendezvous", "tcpstore", "wait timeout", "connection closed by peer ["))
_rule("nccl.error", "nccl_timeout", "error", "an NCCL communication error",
      r"nccl(?:System|Internal|Remote|InvalidUsage|InvalidArgument)Error|NCCL error in:|NCCL communicator was aborted|"
      r"DistBackendError|NCCL error|NCCL failure|NCCL_ERROR|ncclCommAbort|NCCL Error \d|[Cc]ommunicator (?:was )?aborted",
      FIX_NCCL, gotcha="train.MN2",
      needles=("ncclsystemerror", "ncclinternalerror", "ncclremoteerror", "ncclinvalidusageerror",
               "ncclinvalidargumenterror", "nccl error", "distbackenderror", "communicator", "nccl failure", "nccl_error",
               "ncclcommabort"))
_rule("nccl.warn", "nccl_timeout", "warn", "NCCL warned", r"NCCL WARN\b", FIX_NCCL, gotcha="train.MN2")

# --- DataLoader (train.DP15, DP4, DP6)
_rule("dataloader.shm", "dataloader_error", "error", "DataLoader workers ran out of shared memory (/dev/shm)",
      r"killed by signal: Bus error|Unexpected bus error encountered in worker|unable to write to file </torch_|"
      r"received (?:0|%d) items of ancdata|could not unlink the shared memory file|out of shared memory|Too many open files|insufficient shared memory|"
      r"/dev/shm.{0,80}(?:[Nn]o space|full|too small|[Ii]nsufficient|[Bb]us error)",
      FIX_SHM, gotcha="train.DP15",
      needles=("bus error", "unable to write to file </torch_", "ancdata", "could not unlink the shared memory", "shared memory", "too many open files",
               "/dev/shm"))
_rule("dataloader.collate", "dataloader_error", "error", "batch samples have different shapes",
      r"stack expects each tensor to be equal size", FIX_COLLATE, gotcha="train.DP4")
_rule("dataloader.pickle", "dataloader_error", "error", "DataLoader workers cannot pickle the dataset",
      r"Can't pickle local object|Can't get attribute '[^']+' on <module '__main__'", FIX_PICKLE, gotcha="train.DP6",
      needles=("can't pickle local object", "can't get attribute"))
_rule("net.in_worker", "network_stall", "error", "a DataLoader worker's download or stream timed out",
      r"Caught \w*(?:Timeout|Connection|ReadTimeout|HTTP|RemoteDisconnected|ChunkedEncoding|IncompleteRead|SSL)\w* in "
      r"DataLoader worker", FIX_NETWORK, gotcha="AD2", needles=("in dataloader worker",))
_rule("dataloader.worker_exc", "dataloader_error", "error", "an exception inside a DataLoader worker",
      r"Caught \w+ in DataLoader worker process \d+|in DataLoader worker process|DataLoader worker.*(?:failed|error)|"
      r"DataLoader(?:Iter)? .*worker.*(?:exception|crashed)", FIX_DATALOADER, needles=("dataloader",))
_rule("dataloader.timeout", "dataloader_error", "error", "a DataLoader worker timed out",
      r"DataLoader timed out after \d+", FIX_DL_TIMEOUT)
_rule("dataloader.signal", "dataloader_error", "error", "a DataLoader worker was killed by a signal",
      r"DataLoader worker \(pid[^)]*\) is killed by signal|worker \(pid[^)]*\) is killed by signal|"
      r"(?:dataloader|data loader|data_loader).{0,60}(?:killed|terminated|signal)",
      FIX_DATALOADER, gotcha="train.DP9", fatal=True, ignore_case=True,
      needles=("worker (pid", "dataloader", "data loader", "data_loader"))
_rule("dataloader.exited", "dataloader_error", "error", "a DataLoader worker exited unexpectedly",
      r"worker \(pid\(?s?\)?[^)]*\)? exited unexpectedly|_worker_loop|pin_memory_thread",
      FIX_DATALOADER, gotcha="train.DP9", role="cascade", fatal=True,
      needles=("exited unexpectedly", "_worker_loop", "pin_memory_thread"))

# --- imports, configs, credentials
_rule("code.framework_bug", "traceback", "error", "a bug in the training code (shapes, devices, autograd, tracing)",
      r"modified by an inplace operation|mat1 and mat2 shapes cannot be multiplied|Expected all tensors to be on the same "
      r"device|Trying to backward through the graph a second time|[Tt]he size of tensor a \(\d+\) must match|"
      r"Expected input batch_size \(\d+\) to match target batch_size|TracerBoolConversionError|ConcretizationTypeError|"
      r"TracerArrayConversionError|UnexpectedTracerError|Sizes of tensors must match",
      FIX_TRACEBACK, needles=("modified by an inplace operation", "mat1 and mat2 shapes", "on the same device",
                              "backward through the graph a second time", "the size of tensor a", "expected input batch_size",
                              "tracerboolconversionerror", "concretizationtypeerror", "tracerarrayconversionerror",
                              "unexpectedtracererror", "sizes of tensors must match"))
_rule("config.module", "import_or_config_error", "error", "a Python module is missing",
      r"ModuleNotFoundError\b|No module named ", FIX_MODULE, gotcha="U5",
      needles=("modulenotfounderror", "no module named"))
_rule("config.import", "import_or_config_error", "error", "an import failed (version mismatch)",
      r"^(?:\w+\.)*ImportError\b|cannot import name|undefined symbol|DLL load failed|\bimport of \w+ halted|"
      r"VersionConflict|has no attribute '__version__'|\.so: cannot open shared object file|GLIBC\w*'? not found",
      FIX_IMPORT, gotcha="U29",
      needles=("importerror", "cannot import name", "undefined symbol", "dll load failed", "import of",
               "versionconflict", "'__version__'", "cannot open shared object file", "glibc"))
# Version talk ("is not installed", "requires X but you have Y") is often a warning a run survives: only on an
# error line.
_rule("config.versions", "import_or_config_error", "error", "a package version does not fit",
      r"^(?=.*(?:Error\b|Exception\b|error:|ERROR|[Ee]rror:))(?:.*?)(?:version conflict|requires .{1,60} but you have|"
      r"is not installed|[Pp]lease install|incompatible (?:version|with)|is not supported (?:with|by|in|on) "
      r"(?:this|the|your))",
      FIX_IMPORT, gotcha="U29",
      needles=("version conflict", "but you have", "is not installed", "please install", "incompatible",
               "is not supported"))
_rule("config.argparse", "import_or_config_error", "error", "the command-line arguments are invalid",
      r": error: (?:unrecognized arguments|the following arguments are required|argument |invalid choice)|^usage: \S+ \[-h\]",
      FIX_ARGS, needles=(": error: ", "usage: "))
_rule("code.monitor_key", "traceback", "error", "a callback monitors a metric the code never logs",
      r"could not find the monitored key", FIX_TRACEBACK)
_rule("config.override", "import_or_config_error", "error", "a config override is invalid",
      r"KeyError: .?Override path|is not a mapping|ConfigCompositionException|MissingConfigException|Could not override '|"
      r"\bomegaconf\.errors\.|ConfigAttributeError|ConfigKeyError|MissingMandatoryValue|InterpolationResolutionError|"
      r"is not in struct|Error merging override|Could not append to config|MisconfigurationException|ValidationError|"
      r"FileNotFoundError|does not appear to have a file named|is not a valid model identifier|"
      r"Can't load (?:tokenizer|config|the model)|got an unexpected keyword argument|missing \d+ required positional argument",
      FIX_OVERRIDE, gotcha="U27",
      needles=("override", "is not a mapping", "configcompositionexception", "missingconfigexception",
               "omegaconf.errors.", "configattributeerror", "configkeyerror", "missingmandatoryvalue",
               "interpolationresolutionerror", "is not in struct", "could not append to config",
               "misconfigurationexception", "validationerror", "filenotfounderror",
               "does not appear to have a file named", "is not a valid model identifier", "can't load",
               "unexpected keyword argument", "required positional argument"))
# The same kind worded loosely ("invalid option", "must be one of", "No such file"): only on a line that is an
# error (an exception, error:, ERROR), since warnings say these words about things a run survives.
_rule("config.invalid", "import_or_config_error", "error", "a config or option is invalid",
      r"^(?=.*(?:Error\b|Exception\b|error:|ERROR|[Ee]rror:))(?:.*?)(?:"
      r"[Ii]nvalid (?:config|configuration|value for|argument|option)|[Uu]nknown (?:argument|option|config)|"
      r"[Uu]nsupported (?:argument|option|config|value)|[Cc]onfig(?:uration)? (?:error|file not found)|"
      r"must be (?:one of|set|specified|provided|divisible|a multiple)|is required but|mutually exclusive|"
      r"[Nn]o such file or directory|is not a (?:valid|local folder)|\[Errno 2\]|"
      r"not (?:a )?valid (?:model|path|option|choice)|invalid choice|not recognized|unrecognized)",
      FIX_OVERRIDE, gotcha="U27",
      needles=("invalid ", "unknown ", "unsupported ", "config", "must be ", "is required but", "mutually exclusive",
               "no such file or directory", "is not a ", "[errno 2]", "not a valid", "not valid", "invalid choice",
               "not recognized", "unrecognized"))
_rule("config.cmd_not_found", "import_or_config_error", "error", "a command is not on PATH",
      r": command not found|: not found$|executable file not found|No such file or directory: '[^']*(?:python|torchrun|"
      r"accelerate|deepspeed|nvcc|ninja|gcc)", FIX_CMD_NOT_FOUND,
      gotcha="U5", needles=("command not found", ": not found", "executable file not found", "no such file or directory"))
_rule("config.no_script", "import_or_config_error", "error", "the script is not on the box",
      r"can't open file '[^']*': \[Errno 2\]", FIX_NO_FILE, gotcha="U42", needles=("can't open file",))
_rule("config.hf_auth", "import_or_config_error", "error", "the model is gated or the HF token is missing",
      r"GatedRepoError|401 Client Error|Invalid user token|Repository Not Found for url|403 Client Error|"
      r"[Aa]ccess to model .* is restricted|You are trying to access a gated repo", FIX_HF_AUTH, gotcha="train.L10",
      needles=("gatedrepoerror", "401 client error", "invalid user token", "repository not found for url",
               "403 client error", "access to model", "gated repo"))
_rule("config.pad", "import_or_config_error", "error", "the tokenizer has no padding token",
      r"Asking to pad but the tokenizer does not have a padding token", FIX_PAD, gotcha="train.L3")
_rule("config.port", "import_or_config_error", "error", "the rendezvous port is already in use",
      r"Address already in use|\bEADDRINUSE\b", FIX_PORT, gotcha="train.D4")
_rule("config.state_dict", "import_or_config_error", "error", "checkpoint keys do not match the model",
      r"(?:Missing|Unexpected) key\(s\) in state_dict|Error\(s\) in loading state_dict", FIX_STATE_DICT,
      gotcha="train.C18", needles=("key(s) in state_dict", "in loading state_dict"))
_rule("config.size_mismatch", "import_or_config_error", "error", "checkpoint shapes do not match the model",
      r"size mismatch for [\w.]+", FIX_SIZE, gotcha="train.O20")
_rule("config.wandb_key", "import_or_config_error", "warn", "W&B is disabled: no API key",
      r"No API key configured|Disabled WandB due to initialization error", FIX_WANDB_KEY, gotcha="U35",
      needles=("no api key configured", "disabled wandb"))

# --- code bugs with a catalogue entry (class `traceback`)
_rule("code.ddp_unused", "traceback", "error", "DDP: parameters received no gradient",
      r"Expected to have finished reduction in the prior iteration", FIX_DDP_UNUSED, gotcha="train.D8")
_rule("code.no_grad", "traceback", "error", "the loss does not require grad",
      r"element 0 of tensors does not require grad", FIX_NO_GRAD, gotcha="train.O3")
_rule("code.targets", "traceback", "error", "loss targets have the wrong dtype/shape/range",
      r"Target -?\d+ is out of bounds|expected scalar type Long but found|multi-target not supported", FIX_TARGETS,
      gotcha="train.O14", needles=("is out of bounds", "expected scalar type long", "multi-target not supported"))
_rule("code.scaler", "traceback", "error", "the GradScaler state was not restored",
      r"No inf checks were recorded for this optimizer", FIX_SCALER, gotcha="train.C15")

# --- scheduler verdicts (before the SIGTERM rules: a time limit also sends SIGTERM)
_rule("sched.time_limit", "time_limit", "error", "the scheduler's time limit ended the job",
      r"DUE TO TIME LIMIT|\bDeadlineExceeded\b|[Ww]all ?time \d+ exceeded limit|TERM_RUNLIMIT|"
      r"exceeded (?:the |its )?(?:wall ?time|run ?time) limit|job killed: walltime|[Ww]all ?clock limit|"
      r"exceeded the maximum execution time", FIX_TIME_LIMIT, gotcha="SLURM2", fatal=True, needles=("walltime", "wall time", "wall clock limit", "wallclock limit", "maximum execution time", "term_runlimit", "time limit", "runtime limit", "due to time limit",
                                                                                          "deadlineexceeded"))
_rule("sched.preempted", "preempted", "error", "the scheduler or cloud preempted the job",
      r"DUE TO PREEMPTION|\bPREEMPTED\b|[Pp]re-empt(?:ed|ion)\b|PreemptionError|(?:due to|by|because of) (?:\w+ )?[Pp]reemption|"
      r"INTERRUPTED_BY_\w+|Job reconnection failed|Job was evicted|JobEvictedEvent|spot/instance-action|[Ss]pot (?:instance )?interruption|[Pp]reemption notice|"
      r"[Ii]nstance was preempted|Reason:\s*Evicted|[Pp]od (?:was )?evicted|low on resource|\b[Pp]reempted\b|"
      r"[Pp]reemption (?:notice|signal|detected|event|warning)|\b[Pp]reempting\b|"
      r"[Tt]ermination [Nn]otice|instance-action|[Ss]pot (?:instance|node|VM|cluster|job|recovery)|"
      r"interruption notice|[Rr]ecovering (?:the )?(?:spot|cluster|job)|\bRECOVERING\b|"
      r"[Rr]eplicas? (?:\S+ )?(?:failing|preempted)|"
      r"[Nn]ode (?:was )?(?:drained|terminated|reclaimed|deleted|shut down|shutting down|removed|lost|failed)|"
      r"NODE_FAIL|NodeNotReady|[Nn]ode .{0,40}(?:marked dead|has been marked dead|died)|"
      r"[Ii]nstance (?:\S+ )?(?:was |is being |has been )?(?:terminated|reclaimed|stopped by|interrupted)|"
      r"[Mm]aintenance event|hostError|[Rr]eclaim(?:ed|ing) (?:the )?(?:instance|node|capacity)|ScheduledEvents|"
      r"[Ss]hutdown (?:signal|notice)|shutting down (?:the )?(?:instance|node|VM)|\bEVICTED\b|"
      r"(?:[Pp]od|[Nn]ode|[Ii]nstance|[Jj]ob|[Ww]orker|VM)\S* (?:\S+ )?(?:was |has been |is being )?evicted",
      FIX_PREEMPT, gotcha="SLURM2", fatal=True,
      needles=("preempt", "pre-empt", "interrupted_by_", "job reconnection failed", "job was evicted",
               "jobevictedevent", "spot", "termination notice", "instance-action", "interruption", "reason:", "evicted",
               "low on resource", "recovering", "replica", "node was", "node drained", "node terminated",
               "node reclaimed", "node deleted", "node shut", "node removed", "node lost", "node failed", "node_fail",
               "nodenotready", "marked dead", "died", "instance", "maintenance event", "hosterror", "reclaim",
               "scheduledevents", "shutdown signal", "shutdown notice", "shutting down"))
_rule("sched.cancelled", "cancelled", "warn", "the job was cancelled",
      r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT|^KeyboardInterrupt\b|got signal: 2\b", FIX_CANCELLED,
      needles=("cancelled at", "keyboardinterrupt", "got signal: 2"))

# --- the controlling terminal went away: every worker got SIGHUP (the SSH session or the tty closed)
_rule("signal.sighup", "preempted", "error", "the terminal went away: the job got SIGHUP",
      r"\bSIGHUP\b|got signal: 1\b|Received 1 death signal|Signals\.SIGHUP|[Hh]angup\b|signal 1 \(SIGHUP\)",
      "The job died with its terminal (SIGHUP): run it under tmux/screen or nohup/setsid so that an SSH drop "
      "does not kill it, then resume from the newest checkpoint.", gotcha="U1", fatal=True,
      needles=("sighup", "got signal: 1", "received 1 death signal", "hangup"))

# --- SIGTERM from outside: preemption only when nothing crashed
_rule("signal.sigterm", "preempted", "error", "the job received SIGTERM",
      r"Received SIGTERM|received signal SIGTERM|SIGTERM received|Received Signals\.SIGTERM|Received 15 death signal|"
      r"got signal: 15\b|Signal 15 \(SIGTERM\) received by PID|exitcode\s*:\s*-15\b|^Terminated$|: line \d+:\s+\d+ Terminated\b|"
      r"[Cc]aught SIGTERM|SIGTERM (?:signal )?(?:received|caught|detected)|[Rr]eceived (?:signal )?(?:15|SIGTERM)|"
      r"Signals\.SIGTERM|[Tt]erminated by signal SIGTERM",
      FIX_SIGTERM, role="sigterm", fatal=True, needles=("sigterm", "death signal", "got signal: 15", "exitcode", "terminated",
                                            "received signal 15", "received 15"))

# --- SSH session (U1, GEN8), then the network
_rule("ssh.hostkey", "ssh_disconnect", "error", "the SSH host key is unknown or changed",
      r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED", FIX_HOSTKEY,
      needles=("host key verification failed", "remote host identification"))
_rule("ssh.drop", "ssh_disconnect", "warn", "the SSH session dropped",
      r"client_loop: send disconnect|packet_write_wait|Connection to \S+ closed by remote host|ssh: connect to host|"
      r"kex_exchange_identification|ssh_exchange_identification|Read from remote host|Timeout, server \S+ not responding|"
      r"Connection closed by (?:remote host|\d)|ssh.*(?:[Cc]onnection (?:reset|refused|timed out|closed))|"
      r"remote side unexpectedly closed|[Ss]ession (?:closed|terminated|ended|disconnected)|[Dd]isconnected from|"
      r"client_loop|Write failed: Broken pipe|Corrupted MAC|[Cc]onnection (?:to .* )?lost|[Ll]ost connection|"
      r"during banner exchange",
      FIX_SSH, gotcha="U1",
      needles=("client_loop", "packet_write_wait", "closed by remote host", "ssh", "kex_exchange_identification",
               "read from remote host", "timeout, server", "broken pipe", "connection closed by", "remote side",
               "session", "disconnected from", "corrupted mac", "lost connection", "connection",
               "during banner exchange"))
_rule("net.wandb_init", "network_stall", "warn", "W&B could not start its run (network)",
      r"Run initialization has timed out|wandb: ERROR .*(?:timed out|[Tt]imeout)", FIX_WANDB, gotcha="AD1",
      needles=("run initialization has timed out", "wandb: error"))
_rule("net.wandb", "network_stall", "warn", "W&B cannot reach its server",
      r"wandb: ERROR|wandb: Network error|wandb: .*retry", FIX_WANDB, needles=("wandb: error", "wandb: network error", "wandb: "))
# a client announcing a retry: what counts is whether the retries ran out (`Max retries exceeded`, a timeout error)
_rule("net.retrying", "network_stall", "info", "a network client retried a request",
      r"Retrying \(Retry\(total=|[Rr]etrying in \d+(?:\.\d+)?\s*s|[Rr]etry \d+/\d+|[Rr]etrying \(\d+/\d+\)",
      FIX_NETWORK, gotcha="AD2", needles=("retrying", "retry "))
_rule("net.proxy", "network_stall", "warn", "a proxy refused the connection", r"ProxyError", FIX_NETWORK, gotcha="GS2")
_rule("net.timeout", "network_stall", "error", "a network request failed or timed out",
      r"ReadTimeout|ConnectTimeout|ConnectionResetError|ConnectionRefusedError|ConnectionAbortedError|ConnectionError|"
      r"Max retries exceeded with url|Temporary failure in name resolution|Name or service not known|"
      r"couldn't connect to 'https?://|[Cc]ouldn't (?:reach|connect)|LocalEntryNotFoundError|Network is unreachable|"
      r"Connection reset by peer|Read timed out|RemoteDisconnected|Remote end closed connection|Connection aborted|"
      r"IncompleteRead|ChunkedEncodingError|ProtocolError|SSLError|SSL: |HTTPSConnectionPool|HTTPConnectionPool|"
      r"Failed to establish a new connection|Connection (?:timed out|refused)|ServerDisconnectedError|"
      r"ClientConnectorError|ClientOSError|ClientPayloadError|TimeoutError|[Ss]ocket\.timeout|Could not resolve host|"
      r"getaddrinfo failed|nodename nor servname|HTTP Error 5\d\d|5\d\d Server Error|Bad Gateway|Service Unavailable|"
      r"Gateway Time-?out|[Tt]oo [Mm]any [Rr]equests|\b429 Client Error|[Nn]etwork (?:error|timeout|is down)|"
      r"[Cc]onnection (?:error|failed|broken)|download (?:failed|interrupted|timed out)|[Ff]ailed to download|"
      r"curl: \(\d+\)|urlopen error|URLError|Errno 110|Errno 104|Errno 111|Errno 113|Errno -[23]\b|"
      r"[Tt]imed out (?:after|while|waiting for) .*(?:http|server|request|response|download|upload|hub|connect)|"
      r"socket (?:has )?timed out",
      FIX_NETWORK, gotcha="AD2",
      needles=("readtimeout", "connecttimeout", "connection", "max retries exceeded", "name resolution",
               "name or service not known", "couldn't", "localentrynotfounderror", "network", "read timed out",
               "remotedisconnected", "remote end closed", "incompleteread", "chunkedencodingerror", "protocolerror",
               "sslerror", "ssl: ", "connectionpool", "serverdisconnectederror", "clientconnectorerror",
               "clientoserror", "clientpayloaderror", "timeouterror", "socket.timeout", "could not resolve host",
               "getaddrinfo failed", "nodename nor servname", "http error 5", "server error", "bad gateway",
               "service unavailable", "gateway time", "too many requests", "429 client error", "download", "curl: (",
               "urlopen error", "urlerror", "socket has timed out", "socket timed out", "errno 110", "errno 104",
               "errno 111", "errno 113", "errno -", "timed out"))

# --- more ways the same classes are worded by other frameworks, clouds and launchers
_rule("dataloader.worker_signal", "dataloader_error", "error", "a DataLoader worker crashed natively",
      r"Unexpected (?:segmentation fault|floating-point exception|bus error) encountered in worker", FIX_DATALOADER,
      gotcha="train.DP9", fatal=True, needles=("encountered in worker",))
_rule("sched.preempted_more", "preempted", "error", "the job was stopped from outside (preemption, requeue, node loss)",
      r"srun: forcing job termination|srun: Job step aborted|\bREQUEUED\b|[Rr]equeu(?:e|ing) (?:the )?job|"
      r"(?:[Rr]eceived|[Hh]andling|[Cc]aught|got) (?:signal )?SIGUSR[12]|NodeDiedError|[Nn]ode (?:has )?died|"
      r"missed too many heartbeats|TPU (?:was |has been )?preempted|[Hh]ost maintenance|NodeShutdown|"
      r"[Nn]ode (?:is )?(?:being )?drained|[Ss]pot (?:instance )?(?:termination|reclaim)|will be terminated|"
      r"is being terminated|[Ll]ost (?:the )?(?:node|worker node|host)\b",
      FIX_PREEMPT, gotcha="SLURM2", fatal=True,
      needles=("srun: forcing job termination", "srun: job step aborted", "requeued", "requeue", "sigusr",
               "nodediederror", "died", "missed too many heartbeats", "preempted", "host maintenance",
               "nodeshutdown", "drained", "spot", "will be terminated", "is being terminated", "lost the", "lost node",
               "lost worker node", "lost host"))
_rule("nan.more", "nan_inf", "error", "NaN/inf values appeared",
      r"\b(?:ppl|perplexity)\b['\"]?\s*[:=]?\s*inf\b|[Ff]ound (?:a |some )?(?:NaN|nan|inf|Inf)\b|"
      r"(?:[Ll]oss\w*|[Gg]rad\w*|[Oo]utputs?|[Ll]ogits|[Ww]eights?|[Pp]aram\w*|[Aa]ctivations?) (?:contains?|has|have|"
      r"produced|returned|got|became|is) (?:a |some )?(?:NaN|nan)s?\b|NaNs? (?:encountered|appeared)",
      FIX_NAN, gotcha="train.P8", needles=("ppl", "perplexity", "nan", *_INF))
_rule("gpu.lost", "cuda_device_error", "error", "the GPU needs a reset or is gone",
      r"GPU requires reset|Unable to determine the device handle|GPU (?:\S+ )?(?:is )?lost\b|fell off the bus",
      FIX_XID, gotcha="U22", needles=("gpu requires reset", "unable to determine the device handle", "gpu",
                                      "fell off the bus"))
_rule("ckpt.more", "checkpoint_corrupt", "error", "a checkpoint or downloaded weight file is incomplete",
      r"Consistency check failed|file should be of size|[Cc]hecksum (?:mismatch|does not match|failed)|hash mismatch|"
      r"DataLossError|"
      r"Unable to load weights from|is not a valid (?:checkpoint|safetensors)|invalid magic number|"
      r"(?:model|file|checkpoint|weights) (?:is |was )?corrupted or incomplete|not within the file bounds",
      FIX_CKPT, gotcha="train.C2")
_rule("config.build", "import_or_config_error", "error", "a CUDA extension or library does not fit the environment",
      r"Error building extension '|CUDA Setup failed|bitsandbytes was compiled without GPU support|"
      r"KeyError: '(?:llama|mistral|mixtral|qwen\w*|gemma\w*|phi\w*|falcon|gpt_neox|starcoder2?|mpt|baichuan|chatglm|"
      r"internlm\w*|deepseek\w*|olmo\w*|cohere|dbrx|jamba|mamba\w*|llava\w*|idefics\w*|paligemma|siglip|glm\w*|yi)'",
      FIX_IMPORT, gotcha="U29", needles=("error building extension", "cuda setup failed", "compiled without gpu support",
                                         "keyerror: '"))
_rule("config.load", "import_or_config_error", "error", "a package failed to load or precompile",
      r"Failed to precompile|ERROR: Unable to load dependency|does not find an installed|"
      r"[Ee]rror loading shared librar", FIX_IMPORT, gotcha="U29",
      needles=("failed to precompile", "unable to load dependency", "does not find an installed",
               "error loading shared librar"))
_rule("config.more", "import_or_config_error", "error", "the environment or a package does not fit the code",
      r"AttributeError: module '[\w.]+' has no attribute|DistributionNotFound|ContextualVersionConflict|CUDA_HOME|"
      r"Ninja is required|compiled with different CUDA versions|does not recognize this architecture|"
      r"[Pp]ermission denied(?! \(publickey)",
      FIX_IMPORT, gotcha="U29", needles=("has no attribute", "distributionnotfound", "contextualversionconflict",
                                         "cuda_home", "ninja is required", "compiled with different cuda versions",
                                         "does not recognize this architecture", "permission denied"))
_rule("ssh.more", "ssh_disconnect", "warn", "the SSH session dropped",
      r"port 22\b.*(?:closed|reset|timed out|refused)|Software caused connection abort|"
      r"Connection closed by \S+ port \d+|[Ss]erver unexpectedly closed network connection|Received disconnect from|"
      r"Permission denied \(publickey|Could not establish connection to|Connection timed out during banner exchange",
      FIX_SSH, gotcha="U1", needles=("port 22", "software caused connection abort", "connection closed by",
                                     "server unexpectedly closed network connection", "received disconnect from",
                                     "permission denied (publickey", "could not establish connection to",
                                     "banner exchange"))
_rule("net.git", "network_stall", "error", "a clone or fetch lost its connection",
      r"remote end hung up unexpectedly|fatal: early EOF|index-pack failed|RPC failed; curl|"
      r"[Nn]o internet connection", FIX_NETWORK, gotcha="AD2",
      needles=("remote end hung up unexpectedly", "early eof", "index-pack failed", "rpc failed; curl",
               "no internet connection"))
_rule("net.more", "network_stall", "error", "a network connection failed",
      r"ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ECONNREFUSED|socket hang up|forcibly closed|peer closed connection|"
      r"StatusCode\.UNAVAILABLE|failed to connect to all addresses|DEADLINE_EXCEEDED|[Uu]nable to connect|"
      r"[Ff]ailed to connect|handshake (?:failed|timed out)|Could not connect to",
      FIX_NETWORK, gotcha="AD2")
# A launcher restarting the workers: what failed before it was not survived, it caused the restart.
_rule("cascade.restart", "traceback", "error", "the launcher restarted the workers after a failure",
      r"[Rr]estarting (?:the )?(?:worker group|workers)|restart_count=[1-9]|[Rr]elaunching (?:the )?(?:job|workers|training)|"
      r"[Aa]ttempting (?:to )?restart|restarts? (?:left|remaining)|[Ww]orker group failed",
      FIX_TORCHRUN, role="cascade", fatal=True)
_rule("cascade.mpi", "traceback", "error", "an MPI/Horovod launcher reports a failed process",
      r"mpirun detected that one or more processes exited|returned a non-zero exit code|"
      r"exit with status code [1-9]|exited on signal \d+", FIX_TORCHRUN, role="cascade", fatal=True)

_rule("host_oom.words", "host_oom_killed", "error", "host RAM ran out",
      r"^(?:\[\d+\][+-]?\s+)?(?:\d+\s+)?Killed\b|(?:exit(?:ed)?|return|error)(?: with)? ?code[:= ]\s*(?:137|-9)\b|"
      r"EXIT CODE: 9\b|(?:\]|it/s|s/it|%)\s*Killed\s*$|"
      r"returncode=-9\b|returned -9\b|The paging file is too small|WinError 1455|all available RAM|out of RAM\b|"
      r"RAM (?:is )?(?:full|exhausted)|[Ss]ystem (?:ran|is running) out of memory|out of (?:host|system|CPU) memory|"
      r"tried to allocate more memory than is available|[Tt]he kernel appears to have died",
      FIX_HOST_OOM, gotcha="U9", fatal=True,
      needles=("killed", "137", "-9", "exit code: 9", "paging file is too small", "winerror 1455", "all available ram", "out of ram",
               "ram is", "ram full", "ram exhausted", "out of memory", "out of host memory",
               "more memory than is available", "kernel appears to have died"))
_rule("nan.value", "nan_inf", "error", "a NaN value in the training output",
      # not on a line whose training loss is finite: there the NaN is some other metric; nor a reinforcement-learning
      # episode statistic, which is NaN until the first episode ends (a mean over no episodes)
      r"^(?!.*(?:^|[\s,{'\"\]])(?:train_)?loss['\"]?\s*[:=]?\s*[-+]?\d)"
      r"(?!.*\b(?:[Rr]eward|[Rr]eturn|ep_?\w+|[Ee]pisode\w*|eplen\w*)\b).*?(?:^|[\s|,:=(\[{'\"])[-+]?(?:nan|NaN|NAN)"
      r"(?:$|[\s|,)\]}'\"%])", FIX_NAN, gotcha="train.P8", needles=("nan",))
_rule("nan.words", "nan_inf", "error", "the loss or the inputs became NaN/inf",
      r"Invalid loss, terminating training|Input contains (?:NaN|infinity)|[Ll]oss (?:has )?(?:gone|went) (?:to )?NaN",
      FIX_NAN, gotcha="train.P8", needles=("invalid loss, terminating", "input contains", "nan"))
_rule("sched.node_fail", "preempted", "error", "the node failed or the job was requeued",
      r"DUE TO NODE FAIL|[Nn]ode failure|\bREQUEUE\b|[Pp]od .{0,60}(?:was )?deleted|NodeShutdown|[Tt]erminating pod|"
      r"going down for (?:poweroff|reboot|halt)|is being shut ?down|[Ss]hutting down (?:the )?(?:system|machine|host)|"
      r"[Rr]ecover(?:ing|ed) (?:from )?(?:preemption|the job|cluster)|[Ii]nstance (?:was |has been )?stopped|"
      r"[Pp]od (?:was |has been )?(?:stopped|terminated)|machine (?:is|went) offline|[Rr]untime disconnected|"
      r"[Rr]untime (?:has been|was) disconnected",
      FIX_PREEMPT, gotcha="SLURM2", fatal=True,
      needles=("due to node fail", "node failure", "requeue", "pod", "nodeshutdown", "terminating pod", "going down for",
               "shut down", "shutdown", "shutting down", "recover", "instance", "offline", "runtime disconnected", "runtime has been disconnected",
               "runtime was disconnected"))
_rule("signal.sigterm_words", "preempted", "error", "the job received SIGTERM",
      r"got SIGTERM|\bsignal 15\b|signal: terminated|[Cc]aught (?:signal )?15\b|(?:exit|"
      r"return)(?: with)? ?code[:= ]\s*(?:143|-15)\b|"
      r"status:? ?143\b", FIX_SIGTERM, role="sigterm", fatal=True,
      needles=("got sigterm", "signal 15", "signal: terminated", "caught 15", "caught signal 15", "143", "-15"))
_rule("cuda_oom.runtimes", "cuda_oom", "error", "GPU memory ran out (TensorRT, ONNX Runtime, CuPy)",
      r"Cuda Runtime \(out of memory\)|[Cc]uda [Ee]rror in .*\(out of memory\)|GPU memory allocation error|"
      r"[Rr]equested amount of GPU memory .{0,40}could not be allocated|BFCArena.{0,80}Failed to allocate|"
      r"Failed to allocate memory for requested buffer|OutOfMemory Error in nvinfer1|"
      r"[Oo]ut of memory (?:allocating|to allocate)",
      FIX_CUDA_OOM, gotcha="U10", needles=("(out of memory)", "gpu memory allocation error", "requested amount of gpu memory",
                                           "bfcarena", "failed to allocate memory for requested buffer",
                                           "outofmemory error in nvinfer1", "out of memory allocating",
                                           "out of memory to allocate"))
_rule("cuda_oom.words", "cuda_oom", "error", "GPU memory ran out",
      r"cudaMalloc\w* (?:failed|error)|Unable to find a valid cuDNN algorithm|MPS backend out of memory|"
      r"XPU out of memory|out of (?:GPU|VRAM|video) memory|Tried to allocate [\d.]+ ?[KMGT]i?B|ResourceExhaustedError|"
      r"Dst tensor is not initialized|"
      r"cuMemAlloc\w* failed",
      FIX_CUDA_OOM, gotcha="U10", needles=("cudamalloc", "unable to find a valid cudnn algorithm",
                                           "mps backend out of memory", "xpu out of memory", "out of gpu memory",
                                           "out of vram", "out of video memory", "tried to allocate",
                                           "resourceexhaustederror", "cumemalloc", "dst tensor is not initialized"))
_rule("disk.words", "disk_full", "critical", "the disk or volume is full",
      r"[Ee]rrno[ =]28\b|(?:[Vv]olume|[Ss]torage|[Dd]rive|[Pp]artition|[Ff]ilesystem|[Ff]ile system) (?:is )?full\b|"
      r"[Ss]torage quota|[Dd]isk quota|exceeded (?:your |the )?(?:storage|disk) quota|No usable temporary directory|"
      r"Resource exhausted: (?:/|[A-Za-z]:\\)",
      FIX_DISK, gotcha="U6", needles=("errno 28", "errno=28", "full", "storage quota", "disk quota", "quota",
                                      "no usable temporary directory", "resource exhausted: "))
_rule("inodes.words", "inode_exhausted", "critical", "the filesystem is out of inodes",
      r"[Ii]nodes? (?:usage|use|used).{0,20}(?:100|9\d)%|IUse%? ?=? ?100%|\b0 (?:free )?inodes|free inodes:? 0\b",
      FIX_INODES, gotcha="U7", needles=("inode", "iuse"))

# --- native crashes and launcher cascades
_rule("crash.native", "traceback", "error", "the process crashed natively (segfault/abort)",
      r"Segmentation fault|Fatal Python error|^Bus error\b|\bSIGSEGV\b|signal 11\b|"
      r"\*\*\* Error in|double free|free\(\): invalid|malloc\(\): |stack smashing|"
      r"Illegal instruction|Floating point exception|\bsegfault\b|exit code -11\b|exitcode\s*:\s*-(?:11|7|4|8)\b|"
      r"exited on signal (?:11|7|4|8)\b|terminate called without an active exception|0xC0000005|-1073741819|"
      r"0xC00000FD|-1073741571|[Aa]ccess violation",
      FIX_SEGV, fatal=True,
      needles=("segmentation fault", "fatal python error", "bus error", "sigsegv",
               "signal 11", "*** error in", "double free", "free(): invalid", "malloc(): ",
               "stack smashing", "illegal instruction", "floating point exception", "segfault", "exit code -11",
               "exitcode", "exited on signal", "terminate called without an active exception", "0xc0000005",
               "-1073741819", "0xc00000fd", "-1073741571", "access violation"))
# An abort is how C++ code ends after an error it already printed (`terminate called ... what():`, a collective
# watchdog tearing the process down): it stands for that error, and is the answer only when nothing names one.
_rule("crash.abort", "traceback", "error", "the process aborted (SIGABRT)",
      r"core dumped|\bSIGABRT\b|signal 6\b|^Aborted\b|exitcode\s*:\s*-6\b|exited on signal 6\b",
      FIX_SEGV, role="cascade", fatal=True,
      needles=("core dumped", "sigabrt", "signal 6", "aborted", "exitcode", "exited on signal"))
_rule("crash.glog_fatal", "traceback", "error", "a fatal check failed (glog FATAL: the process aborts)",
      r"^\s*F\d{4} \d\d:\d\d:\d\d|^[\d\-: .]+F (?:tensorflow|external|xla|third_party)/\S+:\d+\]|\] Check failed: ",
      FIX_SEGV, role="cascade", fatal=True, needles=("f0", "f1", " f tensorflow/", " f external/", " f xla/",
                                                      " f third_party/", "check failed: "))
_rule("crash.panic", "traceback", "error", "the program panicked (Rust/Go)",
      r"thread '[^']*' panicked at|^panic: |^goroutine \d+ \[running\]", FIX_TRACEBACK, fatal=True,
      needles=("panicked at", "panic: ", "goroutine"))
_rule("cascade.torchrun", "traceback", "error", "a worker or launcher failed",
      r"ChildFailedError|SignalException|failed \(exitcode: -?\d+\) local_rank|terminate called after throwing|"
      r"exitcode\s*:\s*-?[1-9]\d*|process terminated with signal|terminated with (?:exit code|signal)|"
      r"exited with (?:exit )?code:? ?[1-9]|Exited with exit code [1-9]|returned non-zero exit status|"
      r"non-zero exit (?:status|code)|[Ee]xit (?:status|code):? ?[1-9]\d*\b|[Ee]xit(?:ed)? abnormally|"
      r"CalledProcessError|WorkerGroupFailureException|RayTaskError|RayActorError|ActorDiedError|"
      r"[Ww]orker (?:\S+ )?(?:died|crashed)|killed by signal|[Pp]rocess \d+ (?:died|terminated|"
      r"exited(?! (?:with (?:exit )?code:? ?0\b|normally|successfully|cleanly)))|"
      r"Trial .* errored|with return code [1-9]|[Rr]eturn code(?::| =)? ?-?[1-9]|died with <Signals|[Kk]illed by signal|"
      r"Killing subprocess|"
      r"[Tt]erminating (?:process|workers)|[Ss]hutting down workers|Error occurred when executing|"
      r"[Jj]ob (?:\S+ )?(?:failed|FAILED)|[Tt]raining (?:failed|crashed|aborted)",
      FIX_TORCHRUN, role="cascade", fatal=True,
      needles=("childfailederror", "signalexception", "failed (exitcode", "terminate called after throwing", "exitcode",
               "process terminated with signal", "terminated with", "exited with", "returned non-zero exit status",
               "non-zero exit", "exit status", "exit code", "abnormally", "calledprocesserror",
               "workergroupfailureexception", "raytaskerror", "rayactorerror", "actordiederror", "died", "crashed",
               "killed by signal", "exited", "terminated", "errored", "return code", "terminating", "killing subprocess",
               "shutting down workers", "error occurred when executing", "failed", "aborted"))

RULES: tuple[Rule, ...] = tuple(_R)


# The unclassified crash: an exception line no rule above explains.
GENERIC_TRACEBACK = Rule("traceback.generic", "traceback", "error", "the run crashed with an unclassified exception",
                         _re(r"$^"), FIX_TRACEBACK)


# An AssertionError whose source line checks finiteness (`assert not torch.isnan(loss)`).
NAN_ASSERT = Rule("nan.assert", "nan_inf", "error", "an assertion that the values are finite failed", _re(r"$^"), FIX_NAN,
                  "train.P8")

# The fp16 overflow lines once their series shows the loss scale collapsing (engine._overflow_collapse).
SCALE_COLLAPSE = Rule("nan.scale_collapse", "nan_inf", "error",
                      "the fp16 loss scale keeps shrinking toward zero: the gradients overflow step after step",
                      _re(r"$^"), FIX_FP16_SCALE, "train.P10")

# A line logged at error level (`ERROR`, `FATAL`, glog's `E0123 12:00:00`) that no rule explains: an unclassified
# fatal sign when it ends the log, judged like a bare exception line.
LOG_ERROR = Rule("traceback.log_error", "traceback", "error", "the log ends with an error no rule explains",
                 _re(r"$^"), FIX_EXIT, role="cascade")
TRUNCATED_TRACEBACK = Rule("traceback.truncated", "traceback", "error", "the log ends inside a traceback",
                           _re(r"$^"), FIX_TRACEBACK, role="cascade", fatal=True)
TRUNCATED_THREAD = Rule("traceback.truncated_thread", "traceback", "error", "the log ends inside a thread's traceback",
                        _re(r"$^"), FIX_TRACEBACK, role="cascade")


# When a log ends inside a traceback (its exception line never printed), the code it died in is the only clue:
# (frame path/function pattern, class). Checked from the deepest frame up; a weak hint, never a named cause.
FRAME_HINTS: tuple[tuple[re.Pattern[str], str], ...] = tuple((_re(p), c) for p, c in (
    (r"torch[/\\]utils[/\\]data[/\\]|_worker_loop|pin_memory|rebuild_storage_fd|resource_sharer", "dataloader_error"),
    (r"find_executable_batch_size|memory\.py\S*, line \d+, in decorator|empty_cache|caching_allocator", "cuda_oom"),
    (r"requests[/\\]|urllib3[/\\]|http[/\\]client\.py|[/\\]socket\.py|[/\\]ssl\.py|aiohttp[/\\]|"
     r"huggingface_hub[/\\]file_download|datasets[/\\]utils[/\\]file_utils|get_from_cache|hf_hub_download",
     "network_stall"),
    (r"torch[/\\]serialization\.py\S*, line \d+, in (?:load|_load|_legacy_load)|safetensors[/\\]", "checkpoint_corrupt"),
    (r"distributed_c10d\.py\S*, line \d+, in (?:all_reduce|all_gather\w*|broadcast\w*|barrier|reduce_scatter\w*|"
     r"all_to_all\w*|recv|send)", "nccl_timeout"),
))
FRAME_HINT_CONFIDENCE = 0.45

# A `df` / `df -i` table pasted into the log: a real filesystem (not a read-only snap image) at 98-100 %.
DF_DISK = Rule("disk.df", "disk_full", "critical", "a filesystem is full (df)", _re(r"$^"), FIX_DISK, "U6")
DF_INODES = Rule("inodes.df", "inode_exhausted", "critical", "a filesystem is out of inodes (df -i)", _re(r"$^"),
                 FIX_INODES, "U7")
DF_FULL_PERCENT = 98


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
