"""The fixed next step for each failure family: one sentence a person can act on, shown with a triage finding.

Rules (`rules_resources.py`, `rules_software.py`, `rules_crashes.py`) name these as `fix.CUDA_OOM`, ...; keeping
them apart keeps the rule rows short enough to read as a table.
"""

CUDA_OOM = ("Lower the micro-batch (keep the effective batch with gradient accumulation), then bf16, activation "
                "checkpointing, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; check nvidia-smi for other holders first.")
HOST_OOM = ("Host/cgroup RAM ran out: size DataLoader workers and caches to the cgroup memory.max (not the host's RAM), "
                "then relaunch from the last checkpoint.")
SLURM_OOM = "Slurm's cgroup killed the job for memory: request --mem of MaxRSS x 1.2 (sacct) and resume."
NAN = ("Resume from the last finite checkpoint with a lower peak LR or longer warmup, clip gradients to 0.5-1.0, prefer "
           "bf16 over fp16; same step every time means bad data (assert torch.isfinite on the batch).")
FP16_SCALE = "The fp16 loss scale collapsed: switch to bf16, or find the op that overflows before resuming."
WATCHDOG = ("A collective waited out its timeout: another rank failed or hung about that long earlier, so read the "
                "first error of every rank; set TORCH_NCCL_ASYNC_ERROR_HANDLING=1 and NCCL_DEBUG=INFO.")
NCCL = ("Rerun with NCCL_DEBUG=INFO: check NCCL_SOCKET_IFNAME (not docker0/lo), /dev/shm size (--shm-size=8g) and "
            "whether a peer rank died first.")
NCCL_INIT = ("Ranks never met: check MASTER_ADDR/port reachability, nvidia-fabricmanager on every node and "
                 "NCCL_SOCKET_IFNAME.")
DISK = ("Free space on the run disk (prune old checkpoints, move HF/pip caches to the data disk) and gate each save "
            "on df free space; the newest checkpoint may be truncated, so verify it before resuming.")
QUOTA = "Disk quota exceeded: move outputs and caches to a volume with quota left, then verify the newest checkpoint."
EVICT_DISK = "The pod was evicted for ephemeral storage: write outputs and caches to a PVC, not the container layer."
INODES = ("Inodes are exhausted while bytes may be free (df -i): pack small files into tar/WebDataset shards and "
              "delete per-step files.")
CKPT = ("The checkpoint file is truncated or not a checkpoint: fall back to the previous one, and write checkpoints "
            "atomically (tmp, fsync, os.replace).")
XID = "The GPU reported a hardware fault (Xid / ECC / off the bus): stop using this machine and re-rent."
XID_SOFT = "The GPU driver logged an Xid: check dmesg and nvidia-smi -q; re-rent if it repeats or training misbehaves."
CUDA_FAULT = ("Rerun with CUDA_LAUNCH_BLOCKING=1 for the real stack; if it moves between ops or repeats on other code, "
                  "check dmesg for Xid and re-rent.")
DEVICE_ASSERT = ("A kernel assertion fired, usually a label/index out of range: rerun on CPU or with "
                     "CUDA_LAUNCH_BLOCKING=1 and check targets lie in [0, num_classes).")
CUDA_VERSION = ("The torch build does not match this GPU/driver: install a wheel for the box's CUDA and compute "
                    "capability, and drop torch pins from requirements.")
DRIVER_FORWARD = "The image needs a newer CUDA than the host driver: pick a CUDA-version filter/image matching the driver."
DRIVER_STATE = ("The machine's GPU driver is not usable: after a driver upgrade reboot (or reload the nvidia kernel "
                "modules) so library and module match; on NVSwitch machines start nvidia-fabricmanager; in exclusive-"
                "process mode check no other process holds the GPUs. Then relaunch; the code is not at fault.")
NO_GPU = "torch sees no GPU: check the container has --gpus all (nvidia-container-toolkit), the driver, and a CUDA wheel."
SHM = ("/dev/shm is too small for DataLoader workers: run the container with --shm-size=8g (or more), or "
           "torch.multiprocessing.set_sharing_strategy('file_system').")
DATALOADER = ("Fix the exception raised inside the DataLoader worker (its original traceback is in the log); test "
                  "with num_workers=0.")
COLLATE = "Samples differ in shape: pad or crop in the dataset, or pass a collate_fn that pads."
PICKLE = "Workers cannot pickle a lambda/local object: move it to module level (spawn start method)."
DL_TIMEOUT = "A DataLoader worker hung: look for slow storage or a deadlock in __getitem__; raise timeout only after."
MODULE = ("Install the missing package into the environment the job runs in (activate it inside the launch "
              "command), then re-run the smoke test.")
IMPORT = "A package version does not match the code: pin the versions from a working lockfile and re-run the smoke test."
OVERRIDE = ("Fix the config/override: use overlay files instead of null-parent dot overrides, and check with "
                "--cfg job before launch.")
ARGS = "The command line does not match the script's arguments: fix the launch command and re-run the smoke test."
CRLF = "The script has Windows line endings: run sed -i 's/\\r$//' on it (or dos2unix) and relaunch."
CMD_NOT_FOUND = ("The command is not on PATH in the job's shell: activate the env (conda activate / source venv) "
                     "inside the launch command.")
NO_FILE = "The script or file is not on the box at that path: re-sync the code and verify the deploy (sha256) before launch."
HF_AUTH = "Gated or private model: export HF_TOKEN (from env or file, never on the command line) before the Trainer starts."
PAD = "Set tokenizer.pad_token (e.g. to eos_token) before building the collator."
PORT = "Another job holds the rendezvous port: give each job its own --master-port."
STATE_DICT = "Keys do not match the model: strip 'module.'/'_orig_mod.' prefixes or build the same architecture before load."
SIZE = "The checkpoint's shapes do not match the model config: load with the config it was trained with."
WANDB_KEY = "W&B has no API key on the box: push WANDB_API_KEY (env/stdin) or run offline and sync later."
WANDB = "The tracker cannot reach its server; training goes on. Sync later with wandb sync, or fix the proxy."
NETWORK = "A download or upload timed out: pre-fetch models/datasets to the box (or use a mirror), then relaunch."
SSH = "The SSH session dropped, not necessarily the job: re-check with a fresh connection before concluding anything."
HOSTKEY = "The host key changed or is unknown: verify the fingerprint out of band before connecting again."
PREEMPT = "The job was preempted: relaunch on a new machine and resume from the newest verified checkpoint."
SIGTERM = ("The job received SIGTERM with no crash before it: a preemption or a stop from outside. Resume from the newest "
               "verified checkpoint.")
TIME_LIMIT = ("The scheduler's time limit ended the job: resume from the last checkpoint with a longer --time, and "
                  "checkpoint on --signal=B:SIGTERM@360.")
CANCELLED = "The job was cancelled on purpose (scancel / Ctrl-C): relaunch only if that was not intended."
DDP_UNUSED = ("Some parameters got no gradient: make every output feed the loss; find_unused_parameters=True only "
                  "as a last resort.")
NO_GRAD = "The loss is detached from the graph: look for .detach(), torch.no_grad() or a frozen model around the forward."
TARGETS = "Targets have the wrong dtype/shape/range for the loss: check label dtype (long), shape and [0, num_classes)."
SCALER = "Restore the GradScaler state with the optimizer when resuming (or recreate both)."
SEGV = "A native crash (segfault/abort): check library versions (torch vs CUDA vs extensions) and run the smoke test."
TORCHRUN = "torchrun only reports that a worker failed: read that worker's own error above (the 'Root Cause' rank)."
TRACEBACK = ("An unclassified Python exception ended the run: fix the code at the last frame of the traceback and "
                 "re-run the smoke test.")
EXIT = "The process exited non-zero without a recognisable error in these lines: read the full log tail and stderr."

