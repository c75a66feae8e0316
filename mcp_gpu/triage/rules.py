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

from mcp_gpu.models import Severity
from mcp_gpu.triage import remedies as fix
from mcp_gpu.triage.rule import EXTRA_CLASSES, Role, Rule, compile_pattern
from mcp_gpu.triage.rules_crashes import CRASH_RULES
from mcp_gpu.triage.rules_environment import ENVIRONMENT_RULES
from mcp_gpu.triage.rules_resources import RESOURCE_RULES
from mcp_gpu.triage.rules_software import SOFTWARE_RULES
from mcp_gpu.triage.rules_workflows import WORKFLOW_RULES

__all__ = ["EXTRA_CLASSES", "RULES", "Role", "Rule"]

_re = compile_pattern


RULES: tuple[Rule, ...] = (*RESOURCE_RULES, *SOFTWARE_RULES, *WORKFLOW_RULES, *ENVIRONMENT_RULES, *CRASH_RULES)


# The unclassified crash: an exception line no rule above explains.
GENERIC_TRACEBACK = Rule("traceback.generic", "traceback", "error", "the run crashed with an unclassified exception",
                         _re(r"$^"), fix.TRACEBACK)


# An AssertionError whose source line checks finiteness (`assert not torch.isnan(loss)`).
NAN_ASSERT = Rule("nan.assert", "nan_inf", "error", "an assertion that the values are finite failed", _re(r"$^"), fix.NAN,
                  "train.P8")

# A KeyError raised reading a config mapping (`h['fl_eiou_gamma']`, `cfg["model"]`, `args['lr']`): the key is missing
# from the config or hyperparameter file the run was given, which is fixed in that file, not in the code.
CONFIG_KEY = Rule("config.missing_key", "import_or_config_error", "error", "a key the code reads is missing from its config",
                  _re(r"$^"), fix.OVERRIDE, confidence=0.6)
CONFIG_MAPPING = _re(r"(?<![\w.])(?:self\.)?(?:h|hyp|hyps|hparams?|hp|cfg|cfgs|config|conf|configs|opt|opts|args|params|"
                     r"settings|options|model_cfg|train_cfg|data_cfg)\[['\"][\w.-]+['\"]\]")

# The fp16 overflow lines once their series shows the loss scale collapsing (engine._overflow_collapse).
SCALE_COLLAPSE = Rule("nan.scale_collapse", "nan_inf", "error",
                      "the fp16 loss scale keeps shrinking toward zero: the gradients overflow step after step",
                      _re(r"$^"), fix.FP16_SCALE, "train.P10")

# Every gradient norm logged at warm-up NaN/inf and none finite after: no loss-scale search, gradients that stay bad
GRAD_NORM_NAN = Rule("nan.grad_norm_stuck", "nan_inf", "error",
                     "the gradient norm is NaN/inf at every logged step from the start, and never finite again",
                     _re(r"$^"), fix.NAN, "train.P8")

# NCCL's trace of an error returned up its call stack (`NCCL INFO transport/shm.cc:101 -> 2`: each level that passes
# the failure on prints its file, line and the ncclResult_t); printed only on the way out of a failure. Found by one
# search of the whole text (`engine`), not per line: NCCL's INFO chatter would make every line a candidate.
NCCL_TRACE = Rule("nccl.error_trace", "nccl_timeout", "error", "an NCCL call failed (its error trace)", _re(r"$^"),
                  fix.NCCL, "train.MN2")
NCCL_TRACE_LINE = re.compile(r"NCCL INFO [\w/.+-]+\.(?:cc|cu|h|cpp):\d+ -> [1-9]\d*\b")

# A line logged at error level (`ERROR`, `FATAL`, glog's `E0123 12:00:00`) that no rule explains: an unclassified
# fatal sign when it ends the log, judged like a bare exception line.
LOG_ERROR = Rule("traceback.log_error", "traceback", "error", "the log ends with an error no rule explains",
                 _re(r"$^"), fix.EXIT, role="cascade")
TRUNCATED_TRACEBACK = Rule("traceback.truncated", "traceback", "error", "the log ends inside a traceback",
                           _re(r"$^"), fix.TRACEBACK, role="cascade", fatal=True)
TRUNCATED_THREAD = Rule("traceback.truncated_thread", "traceback", "error", "the log ends inside a thread's traceback",
                        _re(r"$^"), fix.TRACEBACK, role="cascade")


# When a log ends inside a traceback (its exception line never printed), the code it died in is the only clue:
# (frame path/function pattern, class). Checked from the deepest frame up; a weak hint, never a named cause.
FRAME_HINTS: tuple[tuple[re.Pattern[str], str], ...] = tuple((_re(p), c) for p, c in (
    (r"torch[/\\]utils[/\\]data[/\\]|_worker_loop|pin_memory|rebuild_storage_fd|resource_sharer|"
     r"[/\\]dataloader[/\\]|dataloader_iter\.py|gluon[/\\]data[/\\]|mindspore[/\\]dataset[/\\]|"
     # TensorFlow 1's queue runners and tf.data's iterator: the input pipeline
     r"queue_runner_impl\.py|data[/\\]ops[/\\]iterator_ops\.py|"
     # batchgenerators' augmenter pools (nnU-Net)
     r"batchgenerators[/\\]dataloading[/\\]", "dataloader_error"),
    (r"find_executable_batch_size|memory\.py\S*, line \d+, in decorator|empty_cache|caching_allocator", "cuda_oom"),
    (r"requests[/\\]|urllib3[/\\]|http[/\\]client\.py|[/\\]socket\.py|[/\\]ssl\.py|aiohttp[/\\]|"
     r"huggingface_hub[/\\]file_download|datasets[/\\]utils[/\\]file_utils|get_from_cache|hf_hub_download",
     "network_stall"),
    (r"torch[/\\]serialization\.py\S*, line \d+, in (?:load|_load|_legacy_load)|safetensors[/\\]", "checkpoint_corrupt"),
    # torch's env:// rendezvous raising for a variable the launcher should have set (RANK, MASTER_ADDR, ...)
    (r"_env_rendezvous_handler|_env_error\(", "import_or_config_error"),
    # building or finding a compiled extension (DeepSpeed's op builder looking for CUDA_HOME, torch's
    # cpp_extension) and a package checking the version of another: the environment, not the model
    (r"op_builder[/\\]|installed_cuda_version|torch[/\\]utils[/\\]cpp_extension\.py|"
     r"in (?:check_jaxlib_version|_check_version|check_version|require_version)\b", "import_or_config_error"),
    # an optimizer's step: its first call allocates the optimizer state (Adam's two moments), the usual place a
    # run that fit its forward and backward runs out of GPU memory
    (r"torch[/\\]optim[/\\]\w+\.py\S*, line \d+, in (?:step|_init_group)\b", "cuda_oom"),
    # writing a checkpoint or a dataset file (torch.save, h5py, numpy): what stops a write is mostly a full disk
    (r"torch[/\\]serialization\.py\S*, line \d+, in (?:save|_save)\b|h5py[/\\]_hl[/\\]\w+\.py\S*, line \d+, in "
     r"(?:__setitem__|write_direct|create_dataset)\b|numpy[/\\]lib[/\\]npyio\.py\S*, line \d+, in save", "disk_full"),
    # setting up the process group: a rendezvous or store barrier that never completes across ranks
    (r"distributed_c10d\.py\S*, line \d+, in (?:init_process_group|_store_based_barrier|new_group)\b|"
     r"elastic[/\\]rendezvous[/\\]", "nccl_timeout"),
    # the NCCL bindings of other stacks (cupy's, ChainerMN's communicators)
    (r"cupy[/\\]cuda[/\\]nccl|[/\\]\w*nccl\w*(?:_communicator)?\.py\S*, line \d+", "nccl_timeout"),
    # the fp16 loss scaler checking for overflow (DeepSpeed's ZeRO, apex, fairseq): it raises when the scale cannot
    # shrink any more, so a paste cut inside it is the values overflowing without end
    (r"in _?(?:overflow_check_and_loss_scale_update|update_scale|check_overflow|has_overflow\w*)\b|"
     r"(?:loss_scaler|dynamic_loss_scaler|fp16_optimizer)\.py\S*, line \d+", "nan_inf"),
    (r"distributed_c10d\.py\S*, line \d+, in (?:all_reduce|all_gather\w*|broadcast\w*|barrier|reduce_scatter\w*|"
     r"all_to_all\w*|recv|send)", "nccl_timeout"),
))
FRAME_HINT_CONFIDENCE = 0.45

# A `df` / `df -i` table pasted into the log: a real filesystem (not a read-only snap image) at 98-100 %.
DF_DISK = Rule("disk.df", "disk_full", "critical", "a filesystem is full (df)", _re(r"$^"), fix.DISK, "U6")
DF_INODES = Rule("inodes.df", "inode_exhausted", "critical", "a filesystem is out of inodes (df -i)", _re(r"$^"),
                 fix.INODES, "U7")
DF_FULL_PERCENT = 98
# A quota report pasted into the log (`quota`, `lfs quota`, GPFS `mmlsquota`): the file-count columns at their limit
# mean inodes ran out even when the block columns have room; the block columns at theirs mean bytes did.
QUOTA_FILES = Rule("inodes.quota", "inode_exhausted", "critical", "the file-count (inode) quota is used up",
                   _re(r"$^"), fix.INODES, "U7")
QUOTA_BLOCKS = Rule("disk.quota_table", "disk_full", "critical", "the block (bytes) quota is used up", _re(r"$^"),
                    fix.QUOTA, "U6")


def _synthetic(rule_id: str, cls: str, severity: Severity, title: str, remedy: str, *,
               gotcha: str | None = None, role: Role = "cause") -> Rule:
    return Rule(rule_id, cls, severity, title, _re(r"$^"), remedy, gotcha, role)


# Rules for facts that come from the caller rather than from log lines (exit status, cgroup, scheduler, disk).
SIGNALS: dict[str, Rule] = {
    "sigkill": _synthetic("signal.sigkill", "host_oom_killed", "error",
                          "killed by SIGKILL (exit 137): the OOM killer, unless someone ran kill -9", fix.HOST_OOM, gotcha="U9"),
    "oom_delta": _synthetic("signal.oom_delta", "host_oom_killed", "error", "the cgroup OOM killer fired during the run",
                            fix.HOST_OOM, gotcha="U9"),
    "sigterm": _synthetic("signal.exit_sigterm", "preempted", "error", "terminated by SIGTERM (exit 143)", fix.SIGTERM,
                          role="sigterm"),
    # the job said it got SIGTERM and then died of SIGKILL: the stop's grace window ran out (spot reclaim, scancel)
    "sigkill_after_term": _synthetic("signal.sigkill_after_term", "preempted", "error",
                                     "killed by SIGKILL (exit 137) after it received SIGTERM: the grace window ran out",
                                     fix.SIGTERM, role="sigterm"),
    "sigint": _synthetic("signal.sigint", "cancelled", "warn", "interrupted by SIGINT (exit 130)", fix.CANCELLED),
    "segv": _synthetic("signal.segv", "traceback", "error", "the process crashed natively (SIGSEGV/SIGABRT)", fix.SEGV),
    "sigbus": _synthetic("signal.sigbus", "dataloader_error", "error", "SIGBUS: shared memory (/dev/shm) ran out", fix.SHM,
                         gotcha="train.DP15"),
    "exit": _synthetic("signal.exit", "traceback", "error", "the process exited non-zero", fix.EXIT, role="cascade"),
    "sched_oom": _synthetic("sched.state_oom", "host_oom_killed", "error", "the scheduler reports OUT_OF_MEMORY",
                            fix.SLURM_OOM, gotcha="SLURM4"),
    "sched_preempted": _synthetic("sched.state_preempted", "preempted", "error", "the scheduler reports the job preempted",
                                  fix.PREEMPT, gotcha="SLURM2"),
    "sched_node_fail": _synthetic("sched.state_node_fail", "preempted", "error", "the node failed under the job (NODE_FAIL)",
                                  fix.PREEMPT),
    "sched_timeout": _synthetic("sched.state_timeout", "time_limit", "error", "the scheduler reports a time-limit kill",
                                fix.TIME_LIMIT, gotcha="SLURM2"),
    "sched_cancelled": _synthetic("sched.state_cancelled", "cancelled", "warn", "the scheduler reports the job cancelled",
                                  fix.CANCELLED),
    "sched_failed": _synthetic("sched.state_failed", "traceback", "error", "the scheduler reports the job failed", fix.EXIT,
                               role="cascade"),
    "disk_low": _synthetic("disk.low", "disk_full", "warn", "the run disk is nearly full", fix.DISK, gotcha="U6"),
    "disk_out": _synthetic("disk.out", "disk_full", "critical", "the run disk is full", fix.DISK, gotcha="U6"),
    "inodes_low": _synthetic("inodes.low", "inode_exhausted", "warn", "the run disk is nearly out of inodes", fix.INODES,
                             gotcha="U7"),
    "inodes_out": _synthetic("inodes.out", "inode_exhausted", "critical", "the run disk is out of inodes", fix.INODES,
                             gotcha="U7"),
    "enospc_inodes": _synthetic("disk.enospc_inodes", "inode_exhausted", "critical",
                                "no space left on device while bytes are free: inodes ran out", fix.INODES, gotcha="U7"),
}
