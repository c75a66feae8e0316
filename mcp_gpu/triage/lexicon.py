"""Topic words: which failure class an error line that no rule knows is most likely about.

The rule table (`rules.py`) knows the wordings seen so far; tools keep inventing new ones ("CUDA memory pool
exhausted", "the collective did not finish in time", "host unreachable while fetching shards"). An exception line or
an error-level log record that no rule explains is read once more for the subject it names: two words that belong
together (a GPU word near a memory-exhausted word, a collective word near a timeout word) make a weak finding of that
class (confidence `TOPIC_CONFIDENCE`) instead of an unclassified `traceback`. Single generic words ("device",
"error", "memory") never decide: "Expected all tensors to be on the same device" is a code bug, not a GPU fault.

Rows are tried in order, first match wins: specific subjects (inodes, a full disk) before broad ones (network).
"""

from __future__ import annotations

import re
from functools import lru_cache

TOPIC_CONFIDENCE = 0.5

# (the other GPU programming stacks and vendors' accelerators count: OpenCL, Vulkan, Metal, MPS, Intel XPU,
# Cambricon MLU, Hygon DCU; "device memory" is GPU memory whatever the stack)
_GPU = r"(?:GPU|CUDA|[Cc]uda|VRAM|vram|HBM|cuDNN|cudnn|cuBLAS|cublas|ROCm|HIP|XLA|TPU|NPU|accelerator|OpenCL|" \
       r"Vulkan|Metal|METAL|MPS|XPU|MLU|DCU|[Dd]evice memory)"
_EXHAUSTED = r"(?:out of memory|OOM\b|memory (?:is )?(?:exhausted|full|insufficient)|insufficient memory|not enough memory|" \
             r"[Ff]ailed to allocate|cannot allocate|allocation failed|exhausted|memory budget exceeded|" \
             r"would exceed (?:the )?(?:allowed|available) memory|pool size exceeded)"
_TIMEOUT = r"(?:timed? ?out|times out|timeout|[Tt]ime ?[Oo]ut|did not (?:finish|complete|respond|join|arrive)\b.{0,40}?" \
           r"(?:in time|within)|hung|" \
           r"hang(?:s|ing)?\b|stuck)"
_COLLECTIVE = r"(?:NCCL|nccl|RCCL|HCCL|collective|all_?reduce|all_?gather|reduce_?scatter|broadcast|barrier|" \
              r"process ?group|ProcessGroup|rendezvous|c10d|[Gg]loo|MPI_\w+|allreduce)"
_NET = r"(?:connection|connect|network|socket|host ?name|DNS|name resolution|unreachable|HTTP|https?://|download|upload|" \
       r"proxy|SSL|TLS|remote end|peer|endpoint|server)"
_NET_BAD = r"(?:fail\w*|error|refused|reset|timed? ?out|timeout|closed|abort\w*|unreachable|lost|broken|dropped)"

# What a config, argument or install error says, by kind (the parts of the `import_or_config_error` row).
_CONFIG_WORDS = (
    # a package that is not there
    r"[Nn]o module|import(?:ing)?|not installed|[Pp]lease install|incompatib\w*|[Nn]o package metadata",
    # an exception type that says so (`ConfigurationError`, jsonargparse's `ArgumentError`, a CLI's `UsageError`;
    # not TensorFlow's InvalidArgumentError, a code bug)
    r"\w*Config(?:uration)?(?:Error|Exception)\b|(?<![\w.])(?:\w*argparse\.)?ArgumentError\b|UsageError\b",
    # a name the code has no entry for: `Unknown scheduler type: x`, `Unknown optimizer`
    r"[Uu]nknown (?:[\w-]+ )?(?:type|scheduler|optimizer|backend|mode|architecture|activation|loss|metric|dataset|task|"
    r"precision|strategy|accelerator)\b",
    # a setting missing, unknown or not used
    r"missing required (?:field|argument|key|option|config\w*|parameter|value)|arguments? (?:are|is) not used by|"
    r"environment variable|not compiled with|[Cc]onfig(?:uration)? (?:file|key|value|error)|"
    r"(?:[Uu]nknown|[Ii]nvalid|[Uu]nrecognized) (?:key|option|argument|parameter|field)|"
    # a setting that differs between the config and what a resumed run saved (nequip's restart check)
    r"(?:is|are) different (?:in|from|between) (?:the )?config",
    # two versions that do not go together (a serialized engine, a library, a header)
    r"\b[Vv]ersion\b.{0,30}\b(?:mismatch\w*|does not match|doesn't match|incompatible)|not compatible with",
    # an argument or version check refusing the run: a version the code needs (`X requires Y`, but not autograd's
    # "requires grad", a code bug)
    r"(?:requires?|needs?) (?:\w+ ){0,2}(?:>=|>|version) ?v?\d|version must be|"
    r"(?<!not )(?<!n't )\brequires? (?!grad\b)(?:the |a |an |BOTH |both |at least )?[`'\"\w-]|"
    r"\bv?\d+(?:\.\d+)* or (?:higher|later|newer|above)\b|no longer supported|has been removed in v?\d",
    # a feature or combination it does not support (not "'NoneType' object does not support item assignment", a
    # code bug)
    r"(?:is|are) only (?:supported|available|implemented) (?:with|on|for|by|when|in)|"
    r"(?:is|are) not (?:yet |currently )?supported (?:by|with|when|for|in combination)|"
    r"cannot be (?:used|combined) (?:together )?with|mutually exclusive|but not both|cannot be used together|"
    r"(?<!object )(?:does not|doesn't) (?:yet |currently )?support\b",
    # a value out of what it accepts
    r"should be (?:divisible by|a multiple of|one of)|"
    r"must be an? (?:dict\w*|list|str\w*|int\w*|float|bool\w*|tuple|positive|non-negative)\b|"
    r"must be (?:one of|divisible by|a multiple of|(?:set|specified|provided) (?:when|if|to|for))|"
    r"[Pp]lease (?:set|specify|provide)\b|must be (?:either )?['\"`]?[\w.-]+['\"`]? or ['\"`]?[\w.-]+['\"`]?",
)

LEXICON: tuple[tuple[str, re.Pattern[str]], ...] = tuple((cls, re.compile(p)) for cls, p in (
    ("inode_exhausted", r"\b[Ii]nodes?\b|\bIUse%|[Ff]ile (?:count|number) (?:limit|quota)"),
    ("disk_full", r"\b(?:[Dd]isk|[Ss]torage|[Vv]olume|[Ff]ile ?system) (?:space|full|quota|is full)|\b[Nn]o space\b|"
                  r"\b(?:device|disk|volume|drive) (?:is )?full\b|\bno free (?:disk )?space\b|"
                  r"\bENOSPC\b|\bEDQUOT\b|\bquota exceeded\b|space left on"),
    ("cuda_oom", rf"\b{_GPU}\b.{{0,50}}{_EXHAUSTED}|{_EXHAUSTED}.{{0,50}}\b{_GPU}\b|\bnot enough (?:free )?(?:VRAM|HBM)\b"),
    ("host_oom_killed", r"\bout of memory\b|\bOOM\b|\bmemory (?:exhausted|limit exceeded)|\b(?:RAM|host memory|system "
                        r"memory|CPU memory)\b.{0,30}(?:exhausted|full|exceeded|ran out)|\b[Kk]illed\b.{0,30}\bmemory\b"),
    ("nan_inf", r"\b(?:NaN|nan|Inf|inf|infinite|non-?finite)\b.{0,40}\b(?:loss|grad\w*|output|logits?|weights?|"
                r"activations?|epoch|training|iteration)\b|\b[Ll]oss\b.{0,40}\b(?:NaN|nan|inf|infinite|diverg\w*|explod\w*)\b|"
                r"\b(?:gradient|numerical) overflow\b"),
    ("nccl_timeout", rf"\b{_COLLECTIVE}\b.{{0,60}}{_TIMEOUT}|{_TIMEOUT}.{{0,60}}\b{_COLLECTIVE}\b"),
    ("ssh_disconnect", r"\bssh\b|\bsshd\b|\bSSH\b"),
    ("network_stall", rf"\b{_NET}\b.{{0,60}}\b{_NET_BAD}|\b(?:ECONNRESET|ETIMEDOUT|ECONNREFUSED|EHOSTUNREACH)\b|"
                      r"\b(?:[Ff]ailed|[Uu]nable|[Cc]ould not|[Cc]ouldn't) to (?:fetch|download|reach|connect|resolve)\b"),
    ("checkpoint_corrupt", r"\b(?:[Cc]heckpoint|ckpt|state_dict|weights? file|pickle|zip ?file|archive|safetensors)\b"
                           r".{0,60}\b(?:corrupt\w*|truncat\w*|damaged|incomplete|unexpected end|EOF|"
                           r"(?:failed to|cannot|could not|unable to) (?:read|load|deserialize|parse))"),
    ("cuda_device_error", rf"\b(?:{_GPU}|NVML|Xid|GPU driver|device kernel)\b.{{0,40}}\b(?:error|fail\w*|fault|illegal|"
                          r"lost|hang|crash\w*|reset|abort\w*|unrecoverable|unresponsive|stopped responding|"
                          r"not responding)\b"),
    ("dataloader_error", r"\b(?:DataLoader|[Dd]ataloader|data loader|loader worker|worker process)\b|"
                         r"\b(?:[Dd]ata ?[Ll]oad\w*|[Pp]refetch\w*|[Ii]nput pipeline|[Dd]ata pipeline)\b.{0,60}\b(?:died|"
                         r"crash\w*|killed|terminated|exited|hung|stuck)\b|\b(?:[Pp]refetch|[Pp]ipeline) worker\b|"
                         r"shared memory segment|/dev/shm"),
    ("preempted", r"\b(?:[Pp]re-?empt\w*|[Ee]vict\w*|[Ss]pot (?:instance|VM|node)|[Rr]eclaim\w*|[Mm]aintenance event|"
                  r"[Ii]nterruption notice|[Tt]ermination signal|SIGTERM)|\b[Dd]rain\w*\b.{0,30}\bnode\b"),
    ("import_or_config_error", r"\b(?:" + "|".join(_CONFIG_WORDS) + ")"),
))


TOPIC_CHARS = 1_000  # of a longer line, its head and tail: an error line names its subject near one end


# (a log made of one error line repeated across ranks, steps or retries asks about the same text again and again; the
# lexicon's rows are the costliest regexes an unexplained line meets, so recent answers are kept. The cache lives as
# long as the server: 1,024 lines of at most `log_scan.JUDGE_CHARS` each bound it to about 4 MB, whatever a box prints)
@lru_cache(maxsize=1024)
def topic(line: str) -> str | None:
    """The class an unexplained error line is about, or None when it names no subject a class owns."""
    if len(line) > TOPIC_CHARS:
        line = line[:TOPIC_CHARS * 3 // 5] + " ... " + line[-(TOPIC_CHARS * 2 // 5):]
    for cls, pattern in LEXICON:
        if pattern.search(line):
            return cls
    return None
