"""The first part of the rule table: routine lines, then resources (disk, memory, NaN, GPU, collectives).

Order matters (first match wins) and continues in `rules_software.py`, then `rules_crashes.py`; `rules.py` joins them.
"""

from __future__ import annotations

from mcp_gpu.triage import remedies as fix
from mcp_gpu.triage.rule import INF_NEEDLES as _INF
from mcp_gpu.triage.rule import RECOVERY_PATTERN, Rule, RuleTable

_TABLE = RuleTable()
_rule = _TABLE.add

# --- routine lines that only look alarming (first, so that nothing below claims them)
_rule("ignore.exception_ignored", "traceback", "info", "Python printed and ignored an exception",
      r"^Exception ignored in\b|^Error in atexit\._run_exitfuncs|most likely raised during interpreter shutdown", "",
      role="ignore", needles=("exception ignored in", "error in atexit._run_exitfuncs", "during interpreter shutdown"))
_rule("ignore.mlock", "host_oom_killed", "info", "optional memory locking failed (mlock): loading goes on",
      r"failed to mlock|RLIMIT_MLOCK", "", role="ignore", needles=("failed to mlock", "rlimit_mlock"))
# NCCL falling back from InfiniBand/OFI/a plugin to sockets at init, TensorFlow not finding optional TensorRT/GPU
# libraries (it says so at W level and goes on): startup notices of a run that works
_rule("ignore.nccl_transport", "nccl_timeout", "info", "NCCL fell back to another transport",
      r"NCCL WARN (?:Failed to open libibverbs|NET/OFI|NET/IB ?: No device|NET/Plugin|Could not find real path|"
      r"Cuda failure 'peer access is not supported|NUMA auto balancing|Could not enable P2P)|"
      r"NCCL INFO (?:NET|TUNER|PROFILER|ENV)/Plugin|NCCL INFO .{0,40}Plugin load returned", "", role="ignore",
      needles=("nccl warn", "nccl info net/plugin", "nccl info tuner/plugin", "nccl info profiler/plugin",
               "nccl info env/plugin", "plugin load returned"))
# an inference server's scheduler preempting a sequence (vLLM: recompute it later, for want of KV-cache room): a
# throughput warning about requests, not the machine being taken back
_rule("ignore.sequence_preempt", "preempted", "info", "the serving engine preempted a request (KV cache full)",
      r"[Ss]equence group \S+ is preempted|PreemptionMode\.|total_num_cumulative_preemption", "", role="ignore",
      needles=("sequence group", "preemptionmode.", "total_num_cumulative_preemption"))
# W&B's system-metrics sampler failing on a metric the driver does not expose: the run is not affected
_rule("ignore.wandb_sampler", "network_stall", "info", "W&B could not sample a system metric",
      r"wandb: ERROR Failed to sample metric", "", role="ignore", needles=("failed to sample metric",))
_rule("ignore.tf_dso", "import_or_config_error", "info", "TensorFlow could not load an optional library",
      r"(?:dso_loader|cuda_dnn|cuda_blas|cuda_fft)\.cc:\d+\] (?:Could not load dynamic library|Unable to register)|"
      r"TF-TRT Warning", "", role="ignore", needles=("dso_loader", "cuda_dnn", "cuda_blas", "cuda_fft", "tf-trt warning"))
# TensorFlow's BFC allocator retrying a large allocation says itself that this is not a failure
_rule("ignore.tf_alloc_retry", "cuda_oom", "info", "TensorFlow's allocator retried an allocation (not a failure)",
      r"The caller indicates that this is not a failure", "", role="ignore",
      needles=("the caller indicates that this is not a failure",))
# cudaErrorCudartUnloading ("driver shutting down"): CUDA calls made by destructors while the process exits;
# xformers' own "Error caught was: No module named 'triton'" is its probe of an optional dependency
_rule("ignore.cuda_unloading", "cuda_device_error", "info", "CUDA calls during process exit",
      r"driver shutting down|cudaErrorCudartUnloading|Error caught was: No module named", "", role="ignore",
      needles=("driver shutting down", "cudaerrorcudartunloading", "error caught was: no module named"))
# submitit polling Slurm accounting that is switched off: its job status may be stale, the job is not affected
_rule("ignore.sacct", "traceback", "info", "submitit could not read Slurm accounting",
      r"[Bb]ypassing sacct error|status may be inaccurate", "", role="ignore",
      needles=("bypassing sacct error", "status may be inaccurate"))
# slurmstepd/srun noise that healthy steps print on many clusters (a process that exited while it was being
# accounted, a TMPDIR it falls back from, no terminal for srun's window size) and the loader skipping a preload
_rule("ignore.slurm_noise", "traceback", "info", "Slurm or the loader noted something it worked around",
      r"_is_a_lwp|Unable to create TMPDIR|Setting TMPDIR to|ioctl\(TIOCGWINSZ\)|from LD_PRELOAD cannot be preloaded",
      "", role="ignore", needles=("_is_a_lwp", "unable to create tmpdir", "setting tmpdir to", "tiocgwinsz",
                                  "from ld_preload cannot be preloaded"))
# torchrun's store client retrying while the store comes up; DeepSpeed ZeRO-3 flushing its allocator cache (a speed
# hint about GPU memory, not the host's)
_rule("ignore.c10d_connect", "network_stall", "info", "a rendezvous client retried its first connection",
      # (a warning line, not the DistNetworkError the connection attempts end in when they run out)
      r"\[W socket\.cpp:\d+\]|^(?!.*(?:Error|Exception)\b).*The client socket has failed to connect to", "", role="ignore",
      needles=("[w socket.cpp:", "the client socket has failed to connect to"))
_rule("ignore.allocator_flush", "host_oom_killed", "info", "DeepSpeed flushed its allocator cache",
      r"allocator cache flushes since last step", "", role="ignore", needles=("allocator cache flushes",))
# pip's notice about packages it did not reconcile: printed by installs that succeeded
_rule("ignore.pip_resolver", "import_or_config_error", "info", "pip's dependency-resolver notice",
      r"pip's dependency resolver does not currently take into account", "", role="ignore",
      needles=("pip's dependency resolver",))
# a client saying the trouble is over: the recovery, read as progress (scan.py), not one more error
_rule("ignore.recovered", "network_stall", "info", "a client recovered", RECOVERY_PATTERN, "", role="ignore",
      needles=("error resolved after", "resuming normal operation", "connection re", "reconnected"))
_rule("ignore.torchrun_sigterm_workers", "traceback", "info", "torchrun stopping the other workers",
      r"Sending process \d+ closing signal SIGTERM|Unable to shutdown process \d+ via", "", role="ignore")
_rule("ignore.elastic_hint", "traceback", "info", "torchrun hint", r"To enable traceback see: https://pytorch\.org", "",
      role="ignore")
_rule("nan.anomaly", "nan_inf", "warn", "autograd's anomaly mode found an error in a backward op (usually NaN)",
      r"Error detected in \w+\. Traceback of forward call that caused the error", fix.NAN, gotcha="train.P8",
      needles=("traceback of forward call that caused the error",), confidence=0.6)
_rule("ignore.deprecation", "traceback", "info", "a deprecation or future warning",
      # (not when the warning itself names a failure: a full disk, no memory, a GPU this torch cannot drive)
      r"^(?!.*(?:\[Errno \d|No space|[Oo]ut of memory|Killed|CUDA (?:unknown )?error|not compatible with|NVIDIA driver|"
      r"enough free disk space))"
      r".*(?:(?:Deprecation|Future|User|Runtime|Resource)Warning\b|\bwarnings\.warn\(|is deprecated|will be removed in)",
      "", role="ignore", needles=("deprecationwarning", "futurewarning", "userwarning", "runtimewarning",
                                 "resourcewarning", "warnings.warn", "deprecated", "will be removed in"))
_rule("ignore.zero_counters", "nan_inf", "info", "a counter of NaN/inf events that reads zero",
      r"\b(?:nan|inf(?!o))[\w/.-]*['\"]?\s*[:=]\s*['\"]?0(?:\.0+)?\b(?![.\d])(?!.*\b(?:loss|"
      r"grad_?norm)\b['\"]?\s*[:=]\s*['\"]?[-+]?(?:nan|inf)\b)",
      "", role="ignore", ignore_case=True, needles=("nan", *_INF))

# --- mixed-precision overflow: judged as a trend of the loss scale, not line by line
_rule("trend.fp16_overflow", "nan_inf", "info", "fp16 overflow: the loss scale was reduced",
      r"OVERFLOW!|[Gg]radient overflow|overflow detected|[Oo]verflow(?: found)?.*(?:[Ss]kipping|loss.?scale)|"
      r"[Aa]ttempted loss scale|reducing (?:the )?loss scale|[Dd]ecreasing loss scale|[Rr]educ(?:e|ing) loss[_ ]scale",
      fix.FP16_SCALE, role="trend", gotcha="train.P10",
      needles=("overflow", "attempted loss scale", "loss scale", "loss_scale"))

# --- CRLF scripts (U26); the engine renders a carriage return inside a message as a visible \r
_rule("config.crlf", "import_or_config_error", "error", "the script has Windows (CRLF) line endings",
      r"\$'\\r'|\\r: (?:command not found|invalid option|No such file)|\^M: bad interpreter|/bin/(?:ba)?sh\^M|"
      r"unexpected token `?\$'[^']*\\r'", fix.CRLF, gotcha="U26", needles=("\\r", "^m"))

# /dev/shm full is the DataLoader's shared memory, not the disk (ENOSPC worded before the path), ahead of the disk rules
_rule("dataloader.shm_enospc", "dataloader_error", "error", "shared memory (/dev/shm) is full",
      r"(?:[Nn]o space left|ENOSPC|[Ee]rrno 28).{0,80}/dev/shm\b", fix.SHM, gotcha="train.DP15", needles=("/dev/shm",))
# --- inodes and disk space (U6, U7) before anything that a full disk can cause
_rule("inodes.df", "inode_exhausted", "critical", "the filesystem is out of inodes",
      r"[Oo]ut of inodes|[Nn]o (?:free )?inodes|inodes? (?:are |is )?(?:exhausted|full|used up)|IUse%.*\b100%|"
      r"[Ii]node (?:quota|limit) (?:exceeded|reached)|[Ff]ile[- ](?:count|number) (?:\(inodes?\) )?(?:quota|limit)|"
      r"files? quota exceeded|exceeded (?:the |its )?(?:file|inode) (?:quota|limit)|[Tt]oo many files|\binode quota\b|"
      r"(?<!open )files? limit (?:reached|exceeded)|(?:reached|exceeded) your (?:file|inode)s? (?:limit|quota)|"
      r"[Ii]node allocation failed|\b[Ii]nodes?:? (?:9\d|100) ?% (?:used|full)|"
      # a site's quota tool (Jean Zay's idrquota): "WORK: 493163 / 500000 inodes (98.63%)"
      r"\binodes? \((?:9\d|100)(?:[.,]\d+)? ?%\)|"
      # too many entries in one directory: ext4's htree index full, the per-directory link limit (EMLINK)
      r"Directory index full|cannot create directory .{0,200}: Too many links|"
      # a site's quota mail or login banner: "the number of files ... exceeds your quota of 100000 files"
      r"(?:number of|count of) files\b.{0,80}\bexceed\w*|exceed\w* (?:your |the )?quota of [\d,]+ files",
      fix.INODES, gotcha="U7", needles=("inode", "iuse%", "file count", "file-count", "file number", "file-number",
                                        "files quota",
                                        "file quota", "file limit", "too many files", "files limit", "your file",
                                        "directory index full", "too many links", "of files", "quota of"))
# ENOSPC when a file is created or linked, not written (Go's `open <path>: no space left on device` while a tar
# layer is extracted, a store's hard links): creating needs an inode, writing needs bytes — on a disk full of bytes
# the open succeeds and the write fails. (mkdir is left out: a new directory also needs a block.)
_rule("inodes.create", "inode_exhausted", "critical", "creating files failed with no space left: inodes ran out",
      r"(?:^|[\s:])(?:open|link|symlink|mknod) /\S+: no space left on|cannot link '[^']*' to '[^']*': No space left|"
      r"failed to create hard link.{0,200}No space left", fix.INODES, gotcha="U7", confidence=0.6,
      needles=("no space left on", "cannot link", "failed to create hard link"), ignore_case=False)
# ENOSPC from inotify is a kernel limit on file watchers, not a full disk (dev servers, watchers in notebooks)
_rule("config.inotify", "import_or_config_error", "error", "the kernel's limit on file watchers was reached",
      r"System limit for number of file watchers reached|inotify watch limit", fix.ARGS,
      needles=("limit for number of file watchers", "inotify watch limit"))
_rule("disk.gate", "disk_full", "critical", "the launch disk gate aborted: too little free space", r"\bDISK_GATE_ABORT\b",
      fix.DISK, gotcha="U6")
_rule("disk.torch_save", "disk_full", "critical", "torch.save failed mid-write: the disk filled",
      r"inline_container\.cc.*(?:unexpected pos|file write failed)|PytorchStreamWriter failed|basic_ios::clear: iostream error|"
      r"write\(\): fd \d+ failed",
      fix.DISK, gotcha="U6", needles=("inline_container.cc", "pytorchstreamwriter failed", "basic_ios::clear", "write(): fd"))
# torch's shared-memory files (`</torch_739_..._4>`) live in /dev/shm: that filling is the DataLoader's shm, not the disk
_rule("dataloader.shm_space", "dataloader_error", "error", "DataLoader workers ran out of shared memory (/dev/shm)",
      r"</torch_\w*>.{0,80}(?:No space left|\[Errno 28\]|ENOSPC)|(?:No space left|\[Errno 28\]|ENOSPC).{0,120}</torch_",
      fix.SHM, gotcha="train.DP15", needles=("</torch_",))
_rule("disk.enospc", "disk_full", "critical", "no space left on device",
      r"No space left on device|\[Errno 28\]|\bENOSPC\b|[Nn]ot enough (?:free )?(?:disk )?space|"
      r"enough free space in /|[Dd]isk (?:is )?full|"
      r"insufficient (?:disk )?space|out of disk ?space|[Oo]ut of diskspace|"
      r"[Nn]o space left|Write failed.*space|is over \d+% full|"
      r"(?:[Dd]isk|[Ff]ilesystem|[Vv]olume|[Pp]artition|[Ss]torage).{0,60}\b(?:9\d|100)% (?:full|used)",
      fix.DISK, gotcha="U6", needles=("space", "[errno 28]", "enospc", "disk full", "disk is full", "% full", "% used"))
_rule("disk.quota", "disk_full", "critical", "disk quota exceeded", r"Disk quota exceeded|\[Errno 122\]|\bEDQUOT\b",
      fix.QUOTA, gotcha="U6")
# an eviction kills the pod: a replacement pod scheduled after it is a restart from scratch, not the run going on
_rule("disk.k8s_evicted", "disk_full", "error", "pod evicted: node low on ephemeral storage",
      r"low on resource: ephemeral-storage|ephemeral[- ](?:local )?storage (?:usage )?exceed", fix.EVICT_DISK,
      gotcha="K8S5", fatal=True, needles=("ephemeral-storage", "ephemeral local storage", "ephemeral storage"))
_rule("disk.k8s_pressure", "disk_full", "error", "the node reports disk pressure", r"DiskPressure", fix.EVICT_DISK,
      gotcha="K8S5")
# tar (and cpio) reporting a short write: the disk filled mid-extract
_rule("disk.short_write", "disk_full", "critical", "a write came up short: the disk filled",
      r"\bWrote only \d+ of \d+ bytes", fix.DISK, gotcha="U6", needles=("wrote only",))
# Ray Data's wrapper for an exception raised in the user's map or read function: the data pipeline failed
_rule("dataloader.ray_data", "dataloader_error", "error", "the Ray Data pipeline's user code raised",
      r"\bRayDataUserCodeException\b|UserCodeException: .{0,40}(?:map_batches|read_\w+)", fix.DATALOADER,
      needles=("raydatausercodeexception", "usercodeexception"))

# --- host RAM worded like a GPU OOM (Ray's OutOfMemoryError is the node's RAM), before the VRAM rule
_rule("host_oom.ray", "host_oom_killed", "error", "the node ran low on RAM and its tasks were killed",
      r"killed due to (?:the node running low on memory|memory pressure)|[Nn]ode (?:is )?(?:running )?low on memory|"
      r"ray\.exceptions\.OutOfMemoryError|[Ww]orkers? (?:\(tasks / actors\) )?(?:have been |were )?killed due to memory|"
      # user-space OOM killers acting before the kernel's: earlyoom, systemd-oomd
      r"low memory! at or below SIG\w+ limits|systemd-oomd\S*: .{0,80}[Kk]illed|oomd.{0,40}[Kk]illed .{0,80}memory pressure",
      fix.HOST_OOM, gotcha="U9", fatal=True,
      needles=("killed due to", "low on memory", "ray.exceptions.outofmemoryerror", "low memory! at or below",
               "oomd"))

# --- VRAM (U10) above the NCCL and CUDA-error rules that wrap it
_rule("host_oom.tf_cpu", "host_oom_killed", "error", "host RAM ran out (TensorFlow's CPU allocator)",
      r"OOM when allocating .{0,200}(?:device:CPU|by allocator cpu)|[Aa]llocator \(cpu\) ran out of memory",
      fix.HOST_OOM, gotcha="U9", needles=("oom when allocating", "allocator (cpu) ran out"))
# Host memory limits as JVMs, YARN, PBS and SGE word them (Spark/Ray data prep, cluster jobs), before the VRAM rule
# claims "OutOfMemoryError"
_rule("host_oom.jvm_schedulers", "host_oom_killed", "error", "a host memory limit killed the job (JVM, YARN, PBS, SGE, ECS)",
      r"java\.lang\.OutOfMemoryError|Java heap space|GC overhead limit exceeded|killed by YARN for exceeding memory|"
      r"exceeding (?:physical |virtual )?memory limits|beyond (?:physical|virtual) memory limits|"
      r"PBS: job killed: v?mem\b|exceeded hard memory limit|"
      r"h_vmem=\S+ exceeded|"
      # Amazon ECS / AWS Batch stopping a container over its memory reservation
      r"OutOfMemoryError: Container killed due to memory usage",
      fix.HOST_OOM, gotcha="U9", fatal=True,
      needles=("java.lang.outofmemoryerror", "java heap space", "gc overhead limit exceeded", "killed by yarn",
               "memory limits", "pbs: job killed: mem", "pbs: job killed: vmem", "exceeded hard memory limit",
               "h_vmem=", "container killed due to memory usage"))
_rule("cuda_oom.other_stacks", "cuda_oom", "error", "accelerator memory ran out (Caffe, MindSpore, Ascend, Paddle, TensorRT)",
      r"cudaSuccess \(2 vs\. 0\)\s+out of memory|[Mm]alloc device memory failed|[Dd]evice memory (?:is )?(?:not enough|"
      r"insufficient)|Out of memory error on GPU \d|Cannot allocate [\d.]+\s*[KMGT]?i?B memory on GPU|"
      r"Error Code \d+: OutOfMemory\b|[Nn]ot enough memory.{0,60}(?:mem-fraction|mem_fraction|gpu_memory_utilization)",
      fix.CUDA_OOM, gotcha="U10", needles=("cudasuccess (2 vs. 0)", "malloc device memory failed", "device memory",
                                           "out of memory error on gpu", "memory on gpu", ": outofmemory",
                                           "mem-fraction", "mem_fraction", "gpu_memory_utilization"))
# Ascend (CANN/GE) and MindSpore word a device allocation failure their own way
_rule("cuda_oom.ascend", "cuda_oom", "error", "accelerator memory ran out (Ascend, MindSpore)",
      r"Memory_Allocation_Failure|rtMalloc fail|[Aa]vailable memory is insufficient|"
      r"mem_dynamic_allocator\.cc:\d+\] \w*(?:AddMemBlock|Alloc)|"
      r"Malloc for kernel (?:output|input|workspace) failed|[Mm]emory isn't enough",
      fix.CUDA_OOM, gotcha="U10", needles=("memory_allocation_failure", "rtmalloc fail", "available memory is insufficient",
                                           "mem_dynamic_allocator.cc", "malloc for kernel", "memory isn't enough"))
# XLA's out-of-memory report lists the peak buffers (`Peak buffers:` / `Buffer 3: Size: 96.00MiB ... XLA Label:`);
# a paste may hold only that listing
_rule("cuda_oom.xla_peak", "cuda_oom", "error", "accelerator memory ran out (XLA's peak-buffer report)",
      r"\bPeak buffers:|^\s*XLA Label: \S|"
      # TensorFlow's report_tensor_allocations_upon_oom dump, printed only after an allocation failed
      r"^\s*Current usage from device: \S+, allocator: GPU_\d+_bfc",
      fix.CUDA_OOM, gotcha="U10", needles=("peak buffers:", "xla label: ", "current usage from device"))
_rule("cuda_oom.tpu", "cuda_oom", "error", "accelerator memory ran out (TPU)",
      r"Attempting to (?:reserve|allocate) [\d.]+\s*[KMGT]i?B? at the bottom of memory", fix.CUDA_OOM, gotcha="U10",
      needles=("at the bottom of memory",))
_rule("cuda_oom.torch", "cuda_oom", "error", "GPU memory ran out",
      r"CUDA out of memory|CUDA: out of memory|OutOfMemoryError|CUDA (?:driver )?[Ee]rror: out of memory|"
      r"can be stored in KV cache|CUBLAS_STATUS_ALLOC_FAILED|"
      r"Cuda failure '?out of memory|HIP out of memory|RESOURCE_EXHAUSTED|[Rr]esource exhausted: Out|CUDA_ERROR_OUT_OF_MEMORY|"
      r"OOM when allocating|OOM [Dd]etected|No executable batch size found|[Oo]ut of memory (?:while|"
      r"trying to allocate|on device|allocating)|"
      r"[Ff]ailed to allocate .*(?:device|GPU|from device)|[Rr]an out of memory trying to allocate|"
      r"BFCAllocator.*(?:ran out|[Oo]ut of memory)|cudaErrorMemoryAllocation|hipErrorOutOfMemory|"
      r"CUDNN_STATUS_ALLOC_FAILED|CUDNN_STATUS_NOT_ENOUGH_WORKSPACE|DNNL.*out of memory|"
      r"[Nn]ot enough (?:GPU|device|CUDA) memory|GPU memory (?:is )?(?:full|exhausted|insufficient)",
      fix.CUDA_OOM, gotcha="U10",
      needles=("out of memory", "outofmemoryerror", "stored in kv cache", "cublas_status_alloc_failed", "resource_exhausted",
               "cuda_error_out_of_memory", "oom when allocating", "oom detected",
               "no executable batch size found", "resource exhausted: out",
               "failed to allocate", "ran out of memory",
               "bfcallocator", "cudaerrormemoryallocation", "hiperroroutofmemory", "cudnn_status_alloc_failed",
               "cudnn_status_not_enough_workspace", "gpu memory", "device memory", "cuda memory"))

# --- checkpoint files (train.C2); one listed (`ls -l`) at 0 bytes had its write cut short (the mode column is optional:
# under a collector's stamp on every row, the paste reader takes it for part of the decoration)
_rule("ckpt.empty_file", "checkpoint_corrupt", "warn", "a checkpoint file is empty (0 bytes)",
      r"^\s*(?:[-l][rwxsStT-]{9}[.@+]?\s+)?\d+\s+\S+\s+\S+\s+0\s+(?:\w{3}\s+\d{1,2}|\d{4}-\d\d-\d\d)\s+[\d:]+\s+"
      r"\S*\.(?:pt|pth|ckpt|safetensors|bin|h5|pkl|npz|msgpack)\s*$", fix.CKPT, gotcha="train.C2", confidence=0.6,
      needles=(".pt", ".ckpt", ".safetensors", ".bin", ".h5", ".pkl", ".npz", ".msgpack"))
_rule("ckpt.zip", "checkpoint_corrupt", "error", "checkpoint is truncated or corrupt",
      r"PytorchStreamReader failed|failed finding central directory|invalid header or archive is corrupted|"
      r"UnpicklingError|pickle data was truncated|unexpected EOF|SafetensorError|safetensors_rust|"
      r"Error while deserializing header|HeaderTooLarge|HeaderTooSmall|MetadataIncompleteBuffer|InvalidHeader|"
      r"incomplete metadata|^(?:\w+\.)*EOFError\b|Ran out of input|BadZipFile|[Nn]ot a zip file|invalid magic characters|"
      r"(?:checkpoint|weights|state.dict|model file|archive|\.pth?|\.ckpt|\.bin|\.safetensors).{0,80}(?:corrupt|truncated)|"
      r"(?:corrupt|truncated).{0,80}(?:checkpoint|weights|archive|\.pth?|\.ckpt|\.bin|\.safetensors)|"
      r"[Uu]nable to (?:load|open) (?:weights|file).*(?:checkpoint|truncated)|[Tt]runcated file|file signature not found|"
      r"storage has wrong byte size|invalid load key|"
      # HDF5 (Keras .h5 weights) whose structure does not parse; llama.cpp's GGUF cut short
      r"[Uu]nable to (?:synchronously )?open (?:file|object) \((?:bad object header|addr overflow|wrong B-tree|"
      r"incorrect metadata checksum|bad symbol table)|error loading model: .{0,60}(?:not within (?:the )?file bounds|"
      r"unexpectedly reached end of file)|data is not within (?:the )?file bounds|"
      # Caffe reading a .caffemodel (binary weights; a .prototxt that does not parse is the net's config)
      r"ReadProtoFromBinaryFile.{0,120}(?:Failed to parse|failed)|Failed to parse NetParameter file: \S+\.caffemodel",
      fix.CKPT, gotcha="train.C2",
      needles=("pytorchstreamreader failed", "central directory", "archive is corrupted", "unpicklingerror",
               "pickle data was truncated", "unexpected eof", "safetensorerror", "safetensors_rust",
               "deserializing header", "headertoo", "metadataincompletebuffer", "invalidheader",
               "incomplete metadata", "eoferror", "ran out of input", "badzipfile", "not a zip file", "corrupt",
               "truncated", "file signature not found", "wrong byte size", "invalid load key", "unable to load", "invalid magic",
               "unable to open", "readprotofrombinaryfile", ".caffemodel", "unable to synchronously open",
               "error loading model", "not within the file bounds", "not within file bounds"))

# --- host / cgroup memory (U9, SLURM4)
_rule("host_oom.slurm", "host_oom_killed", "error", "Slurm's cgroup OOM handler killed the job",
      r"Detected \d+ oom[-_ ]kill events?|\bOUT_OF_MEMORY\b|oom[-_]kill event|task \d+: Out Of Memory",
      fix.SLURM_OOM, gotcha="SLURM4", needles=("oom-kill", "oom_kill", "oom kill", "out_of_memory", "out of memory"),
      fatal=True)
_rule("host_oom.kernel", "host_oom_killed", "error", "the kernel OOM killer killed a process",
      r"Out of memory: Kill(?:ed)? process|Memory cgroup out of memory|invoked oom-killer|\boom-kill:|\bOOMKilled\b|"
      r"low on resource: memory|[Kk]illed process \d+|\boom_reaper\b|[Mm]emory pressure|memory (?:usage )?threshold|"
      r"[Ww]orkers? (?:have been |were )?killed due to memory|OutOfMemoryError: Task was killed|"
      r"[Nn]ode (?:is )?(?:running )?low on memory|exceeded (?:its |the )?memory limit|[Mm]emory limit exceeded|"
      r"[Rr]eason: OOMKilled|[Ee]xit [Cc]ode:?\s*(?:is )?137\b|status:? ?137|TERM_MEMLIMIT|reaching LSF memory usage limit|"
      r"Tasks state \(memory values in pages\)|"
      r"\boom_score_adj name\b|Memory cgroup stats for",
      fix.HOST_OOM, gotcha="U9", fatal=True,
      needles=("out of memory: kill", "memory cgroup out of memory", "oom-kill", "oomkilled", "low on resource: memory",
               "killed process", "oom_reaper", "memory pressure", "memory threshold", "memory usage threshold", "code is 137",
               "killed due to memory", "task was killed", "low on memory", "memory limit", "code 137", "code: 137",
               "code:137", "exit code:", "status 137", "status: 137", "status:137", "tasks state (memory values",
               "oom_score_adj name", "memory cgroup stats for", "term_memlimit",
               "lsf memory usage limit"))
# Slurm's accounting counts page cache: "at some point" is said of steps that completed (a kill says "killed")
_rule("host_oom.limit_note", "host_oom_killed", "info", "the step's memory use touched its limit (not killed)",
      r"Exceeded (?:job |step )?memory limit at some point", fix.SLURM_OOM, gotcha="SLURM4",
      needles=("memory limit at some point",))
_rule("host_oom.limits", "host_oom_killed", "error", "a memory limit was exceeded and the process killed",
      r"[Ee]xceeded (?:job |step )?memory limit|out-of-memory handler|excessive memory|exited on signal 9\b|"
      r"[Kk]illed: 9\b|signal 9 \(Killed\)|[Kk]illed by the OOM killer|oom.killer|"
      # (in capitals only with the kill: advice that names the OOM killer is no kill)
      r"(?:[Kk]illed|[Tt]erminated|[Rr]eaped|[Ss]topped) by (?:the )?(?:[\w'-]+ ){0,2}OOM[ _-]?[Kk]iller|"
      r"\bOOM[ _-]?[Kk]iller (?:killed|terminated|was invoked|invoked|fired)\b", fix.HOST_OOM, gotcha="U9", fatal=True,
      needles=("memory limit", "out-of-memory handler", "excessive memory", "exited on signal 9", "killed: 9",
               "signal 9 (killed)", "oom killer", "oom-killer", "oom_killer", "oomkiller"))
_rule("dataloader.killed", "dataloader_error", "error", "a DataLoader worker was killed (SIGKILL): usually host RAM",
      r"DataLoader worker \(pid[^)]*\) is killed by signal: Killed", fix.HOST_OOM, gotcha="U9", fatal=True)
_rule("host_oom.sigkill", "host_oom_killed", "error", "a process was SIGKILLed: the OOM killer, unless someone ran kill -9",
      r"^\W*Killed\b(?! by (?:signal )?(?:(?!9\b)\d+|SIG(?!KILL)[A-Z]+)\b| (?:orphan\w*|zombie|stale|leftover|dangling|idle)\b)|"
      r"已杀死|: line \d+:\s+\d+ Killed\b|^zsh: killed\b|exitcode\s*:\s*-9\b|Signal 9 \(SIGKILL\) received by PID|"
      r"return code = -9\b|died with <Signals\.SIGKILL: 9>|killed by signal: Killed|[Kk]illed by signal 9\b|"
      r"signal 9 \(SIGKILL\)|\(SIGKILL\)|exit (?:code|status):? -9\b|\bsignal: killed\b|tasks? [\d,-]+: Killed|"
      # (GNU time's verbose report: "Command terminated by signal 9")
      r"terminated with signal SIGKILL|Signals\.SIGKILL|SIGKILL: 9|Command terminated by signal 9\b|"
      # the shell's job report in the box's language (glibc's strsignal for SIGKILL: de, fr, es, ja, zh_TW, ru, pt,
      # it, ko), alone on its line or as bash's "script: line 3: 1234 <Killed> command" (needles are matched on
      # lines whose ASCII letters only are lower-cased: "бито" for "Убито")
      r"(?:^|: (?:line|Zeile|ligne|línea|riga|строка|行) \d+ ?:\s+\d+ )\s*(?:\[\d+\][+-]?\s+)?(?:\d+\s+)?"
      r"(?:Getötet|Processus arrêté|Terminado \(killed\)|強制終了|已砍掉|Убито|Morto|Ucciso|죽었음)(?=\s|$)",
      fix.HOST_OOM, gotcha="U9", fatal=True,
      needles=("killed", "已杀死", "exitcode", "sigkill", "return code = -9", "signal 9", "code -9", "code: -9",
               "status -9", "status: -9", "terminated by signal 9", "getötet", "processus arrêté",
               "terminado (killed)", "強制終了", "已砍掉", "бито", "morto", "ucciso", "죽었음"))
# a memory report (psutil's, a trainer's) with the host's RAM all but used up: next comes the OOM killer; and a
# notebook's kernel that died and was restarted: on a hosted notebook (Colab, Kaggle) that is the RAM running out
_rule("host_oom.usage", "host_oom_killed", "warn", "the host's RAM is all but used up",
      r"^(?!.*\b(?:GPU|gpu|VRAM|CUDA|cuda|[Dd]evice|HBM|[Dd]isk|[Ss]wap)\b).*?\b(?:[Mm]emory|RAM)\b.{0,20}?"
      r"(?:[Pp]ercent(?:age)?|[Uu]sage|[Uu]sed|[Uu]tili[sz]ation)\s*[:=]?\s*"
      r"(?:9[5-9]|100)(?:\.\d+)?\s?%", fix.HOST_OOM, gotcha="U9", confidence=0.5, needles=("memory", "ram"))
_rule("host_oom.kernel_restart", "host_oom_killed", "warn", "the notebook's kernel died and was restarted",
      r"KernelRestarter: restarting kernel|WARNING:root:kernel [\w-]+ restarted|[Kk]ernel (?:has )?died|"
      r"[Kk]ernel appears to have died|[Yy]our session crashed after using all available RAM",
      fix.HOST_OOM, gotcha="U9", confidence=0.5, needles=("kernelrestarter", "restarted", "kernel died",
                                                          "kernel has died", "appears to have died", "all available ram"))
_rule("host_oom.alloc", "host_oom_killed", "error", "host RAM exhausted (allocation failed)",
      # (not RAPIDS' device memory manager failing: `std::bad_alloc: RMM failure at ...` is GPU memory)
      r"^(?!.*(?:\b(?:CUDA|cuda|GPU) [Ee]rror\b|</torch_|\bRMM\b|rmm::))(?:(?:\w+\.)*MemoryError\b|.*?(?:Cannot allocate memory|"
      r"\[Errno 12\]|DefaultCPUAllocator: (?:can't allocate|not enough) memory|"
      r"std::bad_alloc|[Mm]emory limit reached|"
      # (Go's runtime, which tools around training are written in, dies with "fatal error: runtime: out of memory")
      r"Unable to allocate [\d.]+ [KMGT]i?B|can't allocate memory|[Oo]ut of (?:host|CPU|system) memory|"
      r"fatal error: runtime: out of memory))",
      fix.HOST_OOM, gotcha="U9",
      needles=("memoryerror", "cannot allocate memory", "[errno 12]", "can't allocate memory", "std::bad_alloc",
               "defaultcpuallocator: not enough memory", "memory limit reached",
               "unable to allocate", "out of host memory", "out of cpu memory", "out of system memory",
               "runtime: out of memory"))

# --- NaN / inf (train.P8, train.P10)
# fp16/AMP: the first steps overflow while the dynamic loss scale searches down from 2**16, and the logged gradient
# norm of those skipped steps is nan/inf: a grad-norm NaN on a line of the first 100 iterations is that search.
_rule("nan.grad_norm_warmup", "nan_inf", "info", "the gradient norm is NaN/inf at warm-up (loss-scale search)",
      r"^(?=.*\bg(?:rad)?_?norm\b['\"]?\s*[:=]\s*(?:tensor\()?['\"]?[-+]?(?:nan|inf)\b)(?=.*(?:[Ee]poch(?:\(train\))?\s*"
      r"\[1\]\s*\[(?:\d{1,2}|100)/|'epoch':\s*0\.0[0-2]\d*\b|\b(?:[Ss]tep|[Ii]ter(?:ation)?)\s*[:=]?\s*(?:\d{1,2}|100)\b))",
      fix.FP16_SCALE, gotcha="train.P10", needles=("nan", *_INF))
_rule("nan.tensorboard", "nan_inf", "info", "a logged scalar was NaN/inf (tensorboard's warning names no metric)",
      r"NaN or Inf found in input tensor", fix.NAN, gotcha="train.P8", needles=("nan or inf found in input tensor",))
_rule("nan.loss", "nan_inf", "error", "the loss became NaN/inf",
      # Each alternative starts with its literal words, the word boundary before them checked looking back: a
      # case-blind alternation that starts with `\b` is tried at every position of every line holding "nan"
      # (`loss`, `train_loss`, `val/loss`: "loss" after a non-word character, the start or an underscore)
      r"loss(?<![^\W_]loss)(?:_\w+|es)?\b['\"]?(?:\s*[:=]\s*|"
      r"\s+)(?:tensor\()?\[?['\"]?"
      r"[-+]?(?:nan|inf(?:inity)?)\b(?!\s*(?:->|to\b))|"
      r"loss (?<!\wloss )(?:is|became|was|=|has become|went to) (?:nan|inf|infinite)|returned nan values in its|"
      r"not finite\b(?:(?<=\bis not finite)|(?<=\bin not finite)|(?<=\bare not finite)|(?<=\bwas not finite)|"
      r"(?<=\bwere not finite)|(?<=\bbecame not finite))|non-finite|found invalid values|"
      r"probability tensor contains either|"
      # (GluonTS: "Got NaN in first epoch. Try reducing initial learning rate.")
      r"^(?:\w+\.)*FloatingPointError\b|got NaN in (?<!\wgot NaN in )(?:the )?(?:first |last |\d+\w* )?"
      r"(?:epoch|batch|step|iteration)|"
      r"NaN (?<!\wNaN )(?<!\b0 NaN )(?<!\bno NaN )(?<!\bzero NaN )"  # "found 0 NaN values" counts none
      r"(?:or Inf )?(?:loss|detected|found|encountered|values?)|"
      r"(?:loss|gradient|grad)s? (?:is |are |contains? )?NaN|nan loss|Loss is nan|[Dd]etected (?:nan|inf)|"
      r"NaN or Inf found|loss is infinite|Encountered (?:a )?NaN|[Ll]oss (?:exploded|diverged)|"
      r"\bnan\b.*\bloss\b.*\bnan\b",
      fix.NAN, gotcha="train.P8", ignore_case=True, needles=("nan", *_INF, "non-finite", "not finite",
                                                            "invalid values", "probability tensor",
                                                            "floatingpointerror", "exploded", "diverged"))
_rule("nan.scaler", "nan_inf", "error", "the fp16 loss scale hit its minimum",
      r"loss scale already at minimum|[Mm]inimum loss scale reached|loss[_ ]scale (?:has )?(?:reached|hit) (?:the )?min",
      fix.FP16_SCALE, gotcha="train.P10", ignore_case=True, needles=("loss scale", "loss_scale"), fatal=True)
_rule("nan.grad_norm", "nan_inf", "warn", "the gradient norm is NaN/inf",
      r"\bg(?:rad)?_?norm\b['\"]?\s*[:=]\s*(?:tensor\()?['\"]?[-+]?(?:nan|inf)\b|\bgrad(?:ient)? norm is (?:nan|inf)\b|"
      # an epoch summary's gradient field: "Train Summary | Epoch 3 | Loss=0.1673 | Grad=inf"
      r"\|\s*grad(?:ient)?s?\s*[:=]\s*[-+]?(?:nan|inf)\b",
      fix.NAN, gotcha="train.P8",
      ignore_case=True, needles=("nan", *_INF))

# --- CUDA environment (U28, U31, RP9) above the generic CUDA-error rule
_rule("config.cuda_kernel_image", "import_or_config_error", "error", "the torch build has no kernels for this GPU/CUDA",
      r"no kernel image is available for execution|mismatches the version that was used to compile PyTorch|"
      r"CUDA driver version is insufficient|NVIDIA driver on your system is too old|"
      r"driver version (?:is )?(?:too old|older than)|CUDA_ERROR_NO_BINARY_FOR_GPU|"
      r"not compatible with the current PyTorch installation|"
      r"CUDA_ERROR_UNSUPPORTED_PTX_VERSION|Unsupported gpu architecture|"
      r"Loaded runtime CuDNN library: \S+ but source was compiled with|DNN library is not found|"
      # a binary without code for this GPU as the CUDA runtime words it; cuDNN headers and library of two versions
      r"invalid device symbol|cudaErrorInvalidSymbol|[Mm]ixed dnn version|header is version \S+ while the library is|"
      # a TensorRT engine serialized by another TensorRT version; a GGML file from before GGUF (its magic `ggjt`,
      # `ggml`, `ggmf` read as hex) given to a llama.cpp that reads only GGUF
      r"Version tag does not match|kSERIALIZATION_VERSION|engine plan file is not compatible with this version|"
      r"invalid magic (?:number|characters):? (?:0x)?6767(?:6a74|6d6c|6d66)\b",
      fix.CUDA_VERSION, gotcha="U28")
_rule("config.cuda_forward_compat", "import_or_config_error", "error", "the image's CUDA is newer than the host driver",
      r"forward compatibility was attempted on non supported HW|CUDA failure 804|cuda>=[\d.]+.*please update your driver|"
      r"OCI runtime create failed", fix.DRIVER_FORWARD, gotcha="RP9",
      needles=("forward compatibility", "cuda failure 804", "please update your driver", "oci runtime create failed"))
# the container was started without the GPU runtime (no `--gpus`, no NVIDIA container toolkit): how it was launched
_rule("config.container_gpu", "import_or_config_error", "error", "the container was started without GPU access",
      r"could not select device driver .{0,20}with capabilities: \[\[gpu\]\]|nvidia-container-cli: initialization error",
      fix.NO_GPU, gotcha="U31", needles=("could not select device driver", "nvidia-container-cli: initialization error"))
# the host cannot reach its GPU driver (NVML fails, the driver's user-space library no longer matches the loaded
# kernel module after an upgrade, the fabric manager is down, every device busy): the machine's GPU state, not the
# code or its config, and what `audit_env` reports as `cuda_device_error` too (U31); a reboot or driver reload fixes it
_rule("gpu.driver_unreachable", "cuda_device_error", "error", "the GPU driver is not reachable from the job",
      r"Driver/library version mismatch|couldn't communicate with the NVIDIA driver|[Ee]rror 802: system not yet initialized|"
      r"[Ff]ailed to initialize NVML|all CUDA-capable devices are busy or unavailable|cudaErrorDevicesUnavailable|"
      r"CUDA_ERROR_DEVICE_UNAVAILABLE",
      fix.DRIVER_STATE, gotcha="U31",
      needles=("driver/library version mismatch", "couldn't communicate with the nvidia driver", "system not yet initialized",
               "failed to initialize nvml", "devices are busy or unavailable", "cudaerrordevicesunavailable",
               "cuda_error_device_unavailable"))
# JAX's GPU backend failing to load because jaxlib lacks what jax expects (versions that do not match): the run
# goes on, on the CPU
_rule("config.jax_backend", "import_or_config_error", "warn", "JAX's GPU backend did not load (jax and jaxlib differ)",
      r"Unable to initialize backend '(?:cuda|gpu|rocm)': .{0,60}has no attribute", fix.IMPORT,
      needles=("unable to initialize backend",))
# the CUDA runtime or driver finding no device at all: the class boundary the corpus guide draws (a device fault,
# like a driver the job cannot reach); torch's own "no GPUs" and a CPU-only build stay config
_rule("gpu.no_device", "cuda_device_error", "error", "the CUDA runtime finds no GPU device",
      r"no CUDA-capable device is detected|CUDA_ERROR_NO_DEVICE", fix.NO_GPU, gotcha="U31",
      needles=("no cuda-capable device", "cuda_error_no_device"))
_rule("config.no_gpu", "import_or_config_error", "error", "torch sees no CUDA GPU",
      r"Torch not compiled with CUDA enabled|Found no NVIDIA driver on your system|No CUDA GPUs are available|"
      # asking for a GPU the job was not given (CUDA_VISIBLE_DEVICES, --gpus, a rank's local device)
      r"invalid device ordinal|CUDA_ERROR_INVALID_DEVICE\b", fix.NO_GPU, gotcha="U31",
      needles=("torch not compiled with cuda enabled", "found no nvidia driver", "no cuda gpus are available",
               "invalid device ordinal",
               "cuda_error_invalid_device"))

# --- GPU faults (U22) and device-side errors
_rule("gpu.xid_fatal", "cuda_device_error", "critical", "the GPU reported a fatal Xid / ECC fault",
      r"NVRM: Xid \([^)]*\): (?:48|63|64|74|79|92|94|95)\b|fallen off the bus|uncorrectable ECC error|"
      r"CUDA_ERROR_ECC_UNCORRECTABLE|ECC error|GPU is lost|GPU has fallen", fix.XID, gotcha="U22",
      needles=("nvrm: xid", "fallen off the bus", "ecc error", "ecc_uncorrectable", "gpu is lost", "gpu has fallen"))
_rule("gpu.kernel_driver", "cuda_device_error", "critical", "the GPU's kernel driver failed (oops, adapter lost, page fault)",
      r"RIP: \S+ \S*\[nvidia\w*\]|RmInitAdapter failed|rm_init_adapter failed|Cannot attach gpu|"
      r"amdgpu: \[\w+\] page fault|PROTECTION_FAULT_STATUS|amdgpu.{0,40}(?:ring \S+ timeout|GPU reset begin|GPU hang)",
      fix.XID, gotcha="U22", fatal=True,
      needles=("[nvidia", "rminitadapter failed", "rm_init_adapter failed", "cannot attach gpu", "page fault",
               "protection_fault_status", "amdgpu"))
_rule("gpu.xid", "cuda_device_error", "warn", "the GPU driver logged an Xid", r"NVRM: Xid\b", fix.XID_SOFT, gotcha="U22")
_rule("gpu.device_assert", "cuda_device_error", "error", "a CUDA device-side assertion fired (index/label out of range)",
      # (ROCm's HIP kernels: "Indexing.hip:1292: ...: Device-side assertion `srcIndex < srcSelectDimSize' failed.")
      r"[Dd]evice-side assert(?:ion)? (?:triggered|`)|"
      r"Assertion `[^`]*(?:n_classes|srcIndex|index out of bounds|idx_dim)[^`]*` failed|"
      r"CUDA_ERROR_ASSERT|cudaErrorAssert|\.cu:\d+: .*Assertion `[^`]*` failed|block: \[\d+,\d+,\d+\], thread: \[",
      fix.DEVICE_ASSERT, gotcha="train.O14", needles=("device-side assert", "assertion `", "cuda_error_assert",
                                                       "cudaerrorassert", "block: ["))
_rule("gpu.other_stacks", "cuda_device_error", "error", "the GPU failed (ROCm, Vulkan, NVML)",
      # a device lost, as Vulkan, Level Zero / oneAPI's unified runtime (Intel XPU) and DirectX word it
      r"Memory access fault by GPU|ErrorDeviceLost|DeviceLostError|\b(?:VK|UR_RESULT|ZE_RESULT)_ERROR_DEVICE_LOST|"
      r"DXGI_ERROR_DEVICE_(?:REMOVED|HUNG|RESET)|"
      # a HIP runtime call that failed, as SYCL runtimes over HIP (AdaptiveCpp/hipSYCL) report it
      r"\bhip(?!Malloc)[A-Z]\w*\(\) failed\b|"
      # a CUDA driver-API call failing as PyCUDA and cupy report it (`LogicError: cuStreamSynchronize failed: ...`;
      # cuMemAlloc is memory, a rule of its own)
      r"\bcu(?!MemAlloc)[A-Z][A-Za-z]+ failed\b|"
      r"NVMLError_(?:Unknown|GpuIsLost|Timeout|Uninitialized)|HSA_STATUS_ERROR_\w+|hipErrorIllegalAddress|"
      # Apple Metal: a command buffer the GPU aborted (IOAF codes, GPU timeouts of MPS/MLX kernels)
      # (its out-of-memory code is GPU memory running out: cuda_oom)
      r"[Cc]ommand buffer exited with error status|\(IOAF code \d+\)|kIOGPUCommandBufferCallbackError(?!OutOfMemory)\w*|"
      r"MTLCommandBufferError\w*|"
      # OpenCL (LightGBM's and XGBoost's GPU learners, boost.compute): no device, or a call the runtime failed
      r"\bOpenCL [Ee]rror\b|No OpenCL device found|\bCL_(?:OUT_OF_RESOURCES|DEVICE_NOT_(?:FOUND|AVAILABLE)|"
      r"INVALID_\w+|BUILD_PROGRAM_FAILURE)\b|"
      # Ascend NPU kernels faulting on the device (AI Core / vector core exceptions)
      r"[Aa][Ii][Cc]ore exception|aivector error|[Vv]ector core exception",
      fix.CUDA_FAULT, gotcha="U22", needles=("memory access fault by gpu", "devicelost", "_error_device_lost",
                                           "dxgi_error_device_", " failed", "opencl error", "opencl device",
                                           "cl_out_of_resources", "cl_device_not_", "cl_invalid_",
                                           "cl_build_program_failure",
                                           "nvmlerror_", "hsa_status_error_", "hiperrorillegaladdress",
                                           "command buffer exited with error status", "(ioaf code",
                                           "kiogpucommandbuffercallbackerror", "mtlcommandbuffererror",
                                           "aicore exception", "aivector error", "vector core exception"))
_rule("gpu.cuda_fault", "cuda_device_error", "error", "a CUDA kernel or the GPU failed",
      r"illegal memory access|unspecified launch failure|CUDA error: (?:misaligned address|unknown error|"
      r"an illegal instruction|launch timed out|the launch timed out|operation not permitted|an illegal)|"
      r"CUBLAS_STATUS_(?:EXECUTION_FAILED|INTERNAL_ERROR|NOT_INITIALIZED|MAPPING_ERROR)|"
      r"CUDNN_STATUS_(?:EXECUTION_FAILED|INTERNAL_ERROR|MAPPING_ERROR|NOT_INITIALIZED)|cudaError(?!MemoryAllocation)\w+|"
      r"CUDA_ERROR_(?!OUT_OF_MEMORY|NO_BINARY|UNSUPPORTED_PTX|NO_DEVICE|ASSERT)\w+|hipError(?!OutOfMemory)\w+|"
      r"ncclUnhandledCudaError|unhandled cuda error|CUDA [Ee]rror: (?!out of memory)|"
      r"\bcuda(?:Launch|Memcpy\w*|DeviceSynchronize|StreamSynchronize)\b.*(?:fail|error)|"
      r"CUDA driver error|[Cc][Uu][Dd][Aa] failure \d+|[Cc]uda[Ee]rror|GPU (?:hang|fault|reset)|"
      r"failed to (?:query|synchronize|initialize|launch).{0,40}(?:CUDA|GPU|device)|CUresult|"
      r"Unexpected (?:CUDA|GPU) error|Unexpected Event status|XLA.*(?:Internal|INTERNAL).*(?:CUDA|cuda|GPU)|"
      r"(?:[Cc]uda|CUDA) error \d+|"
      r"Triton Error \[CUDA\]: |Critical Xid|Xid Error|"
      # CUDA's own fault codes quoted bare by engines (PhysX, game and simulation runtimes): 700 illegal address,
      # 716 misaligned address, 719 launch failure
      r"\b(?:[Ff]ailed|[Ee]rror)!? (?:with (?:error|code) )?(?:700|716|719)\b|Cuda context manager error",
      fix.CUDA_FAULT, gotcha="U22",
      needles=("illegal memory access", "unspecified launch failure", "cuda error", "cublas_status_", "cudnn_status_",
               "cudaerror", "cuda_error_", "hiperror", "ncclunhandledcudaerror", "unhandled cuda error",
               "cudalaunch", "cudamemcpy", "cudadevicesynchronize",
               "cudastreamsynchronize", "cuda driver error", "cuda failure", "gpu hang", "gpu fault", "gpu reset",
               "failed to", "curesult", "unexpected cuda error", "unexpected event status", "unexpected gpu error", "xla",
               "triton error [cuda]", "critical xid", "xid error",
               # CUDA's bare fault codes after "failed"/"error" (`Error 700`, `failed with code 719`)
               "error 7", "error! 7", "error with ", "failed 7", "failed! 7", "failed with ",
               "cuda context manager error"))

# Gloo's TCP pair losing its peer: the other rank's process went away mid-collective (it crashed or was killed)
_rule("nccl.gloo_peer", "nccl_timeout", "error", "a Gloo peer closed the connection mid-collective",
      r"gloo[/\\]transport[/\\].{0,80}(?:Connection closed by peer|Connection reset by peer|Broken pipe)",
      fix.NCCL, gotcha="train.MN2", needles=("gloo/transport", "gloo\\transport"))
# NCCL setting up its InfiniBand queue pairs or its bootstrap sockets between ranks, Gloo connecting every rank to
# every other (`connectFullMesh failed`): the communicator never formed
_rule("nccl.setup_net", "nccl_timeout", "error", "the ranks could not connect (communicator setup)",
      r"NCCL WARN Call to ibv_\w+ failed|socket\.h:\d+ (?:NCCL )?WARN Connection closed by (?:remote )?peer|"
      r"connectFullMesh failed",
      fix.NCCL_INIT, gotcha="train.MN2", needles=("call to ibv_", "connection closed by", "connectfullmesh failed"))
# --- the network under the collectives: InfiniBand / RoCE / socket transport failures, a peer gone
_rule("nccl.net", "network_stall", "error", "the network between ranks failed (NCCL transport)",
      r"ncclRemoteError|remote process exited or there was a network error|NET/IB ?: .*(?:[Ee]rror|[Ff]ailed)|"
      r"[Gg]ot completion (?:from peer )?with error|[Gg]ot completion from peer \S+ with (?:error|"
      r"status=[1-9])|completion error|ibv_\w+ failed|IBV_WC_\w+_ERR|"
      r"Connection closed by (?:remote )?peer|transport retry counter exceeded|NCCL_IB.*error",
      fix.NCCL, gotcha="train.MN2",
      needles=("ncclremoteerror", "remote process exited or there was a network error", "net/ib", "completion",
               "ibv_", "connection closed by", "transport retry counter exceeded", "nccl_ib"))

# --- collectives (train.D20, train.MN1, train.MN2)
_rule("nccl.horovod_stall", "nccl_timeout", "error", "Horovod ranks stalled in a collective",
      r"Stalled ranks:|stall_inspector\.cc|waiting for remainder of ranks|Stalled ops", fix.WATCHDOG, gotcha="train.MN2",
      needles=("stalled ranks", "stall_inspector", "waiting for remainder of ranks", "stalled ops"))
_rule("nccl.watchdog", "nccl_timeout", "error", "a collective timed out (watchdog)",
      r"Watchdog caught collective operation timeout|collective operation timeout|Timeout at NCCL work|"
      r"Some NCCL operations have failed or timed out|ran for \d+ milliseconds before timing out|"
      r"ProcessGroupNCCL.*(?:[Ww]atchdog|timeout|[Tt]imed out|[Hh]eartbeat|aborting|terminated)|"
      r"checkTimeout|ncclCommWatchdog|workCleanupLoop|[Hh]eartbeat ?[Mm]onitor|watchdog (?:got stuck|thread)|"
      r"NCCL (?:operation|work|collective).*(?:timed out|timeout)|(?:all_?reduce|all_?gather|broadcast|barrier|"
      r"reduce_scatter|alltoall|ALLREDUCE|ALLGATHER|BROADCAST|_ALLGATHER_BASE|REDUCE_SCATTER)\w*.*[Tt]imeout|"
      r"Timed out waiting for.*(?:collective|rank|NCCL|[Bb]arrier)|"
      r"DistNetworkError(?!.*(?:[Aa]ddress already in use|errno: 98))|[Gg]loo.*[Tt]imed out|"
      # (not the name TORCH_NCCL_ASYNC_ERROR_HANDLING alone: launchers print it when they set or override it)
      r"(?:NCCL|collective|process group).{0,40}(?: hang|stuck|timed out)",
      fix.WATCHDOG, gotcha="train.D20",
      needles=("watchdog", "collective operation timeout", "timeout at nccl work", "ran for", "processgroupnccl",
               "checktimeout", "workcleanuploop", "heartbeat", "nccl operation", "nccl work", "nccl collective",
               "timeout", "timed out", "distnetworkerror", " hang", "stuck"))
_rule("nccl.hccl", "nccl_timeout", "error", "an HCCL collective failed or timed out (Ascend)",
      r"Hccl\w+, error code is|\bEI000[26]\b|Remote Rank did not send the data in time|"
      r"(?:HCCL|[Hh]ccl).{0,60}(?:timeout|timed out|times out)|HcclCommInit\w* fail|"
      r"[Nn]otify register (?:times|timed) out|[Nn]otify wait.{0,20}time(?:s|d)? ?out|"
      r"\bstuck notify (?:num|wait)\b",
      fix.WATCHDOG, gotcha="train.D20", needles=("hccl", "ei0006", "ei0002", "remote rank did not send",
                                                 "notify register", "notify wait", "stuck notify"))
# JAX/TensorFlow's coordination service losing a task's heartbeat: another host died or hung (its message lists
# "failed, got preempted, or crashed" as what it may mean: a guess, not a preemption notice)
_rule("nccl.coordination", "nccl_timeout", "error", "a host stopped answering the coordination service (heartbeat)",
      r"has been set to ERROR in coordination service|coordination service.{0,80}heartbeat timeout|"
      r"CoordinationServiceError|[Hh]eartbeat timeout.{0,80}remote task has failed|"
      # its agent timing out registering or at a barrier (hosts that never all arrived), even cut mid-word
      r"Coordination service agent in error status|CoordinationService/(?:RegisterTask|Heartbeat|WaitForAllTasks|"
      r"Barrier)\b|DEADLINE_EXCEEDED: Barrier",
      fix.WATCHDOG, gotcha="train.D20",
      needles=("in coordination service", "coordination service", "coordinationserviceerror", "remote task has failed",
               "coordinationservice/", "deadline_exceeded: barrier"))
_rule("nccl.store", "nccl_timeout", "error", "ranks timed out meeting at the rendezvous store",
      r"DistStoreError: Timed out|[Tt]imed out after \d+ seconds waiting for clients|RendezvousTimeoutError|"
      r"waiting for clients\. \d+/\d+ clients joined|monitoredBarrier|errors while waiting for send/recv",
      fix.NCCL_INIT, gotcha="train.MN1",
      needles=("diststoreerror", "waiting for clients", "rendezvoustimeouterror", "monitoredbarrier",
               "errors while waiting for send/recv"))
_rule("nccl.init", "nccl_timeout", "error", "ranks timed out meeting at initialisation",
      r"Timed out initializing process group|store based barrier|Socket Timeout|timed out waiting for all ranks|"
      r"[Rr]endezvous.*(?:timed out|timeout|[Cc]losed)|RendezvousTimeoutError|TCPStore.*(?:timed out|timeout)|"
      r"(?:wait|Wait) timeout|Connection closed by peer \[|[Bb]arrier timed out|detected missing heartbeats|"
      r"stopped sending heartbeats|tasks are unhealthy|"
      r"Collective ops is aborted",
      fix.NCCL_INIT, gotcha="train.MN1", ignore_case=True,
      needles=("timed out initializing", "store based barrier", "socket timeout", "timed out waiting for all ranks",
               "rendezvous", "tcpstore", "wait timeout", "connection closed by peer [", "barrier timed out",
               "missing heartbeats", "collective ops is aborted", "stopped sending heartbeats", "tasks are unhealthy"))
_rule("nccl.error", "nccl_timeout", "error", "an NCCL communication error",
      r"nccl(?:System|Internal|Remote|InvalidUsage|InvalidArgument)Error|NCCL error in:|NCCL communicator was aborted|"
      r"DistBackendError|NCCL error|NCCL failure|NCCL_ERROR|ncclCommAbort|NCCL Error \d|[Cc]ommunicator (?:was )?aborted|"
      # XLA's and other stacks' report of a failed NCCL call, and NCCL's own text for ncclSystemError
      r"NCCL operation \S+ failed|ncclCommInit\w* failed|unhandled system error|"
      # NCCL's socket transport failing to reach a peer (the "Last error:" line under ncclSystemError), as its
      # socket layer and bootstrap word it, and a communicator aborted after an error or a watchdog timeout
      r"\bsocket(?:Start|Poll|Finalize)?Connect: Connect to \S+ failed|\bNet : Call to \w+ (?:from|to) \S+ failed|"
      r"(?:include/socket\.h|misc/socket\.cc|bootstrap\.cc):\d+ (?:NCCL )?WARN|"
      r"NCCL INFO comm \S+ .{0,100}- Abort COMPLETE",
      fix.NCCL, gotcha="train.MN2",
      needles=("ncclsystemerror", "ncclinternalerror", "ncclremoteerror", "ncclinvalidusageerror",
               "ncclinvalidargumenterror", "nccl error", "distbackenderror", "communicator", "nccl failure", "nccl_error",
               "ncclcommabort", "nccl operation", "ncclcomminit", "unhandled system error", "connect: connect to",
               "net : call to", "socket.h:", "socket.cc:", "bootstrap.cc:", "abort complete"))
_rule("nccl.warn", "nccl_timeout", "warn", "NCCL warned", r"NCCL WARN\b", fix.NCCL, gotcha="train.MN2")


RESOURCE_RULES: tuple[Rule, ...] = _TABLE.rules()
