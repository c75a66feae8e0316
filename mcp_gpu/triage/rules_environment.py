"""Rules for an environment that does not fit the code: binary interfaces, builds and installs (after
`rules_software.py`, before the crashes).

These lines are written by the packaging and build tools, not by the trainer, so their wording is stable across
projects: NumPy's ABI checks, an extension whose compiler failed, pip's resolver, a library version below what its
companion requires, a launch without the process group the code expects, more GPUs asked for than the machine shows,
a model the Hub does not have.
"""

from __future__ import annotations

from mcp_gpu.triage import remedies as fix
from mcp_gpu.triage.rule import Rule, RuleTable

_TABLE = RuleTable()
_rule = _TABLE.add

# a module built against another NumPy: at import it fails (or, for NumPy 2's notice, is about to)
_rule("config.numpy_abi", "import_or_config_error", "error", "a compiled module was built against another NumPy",
      r"module compiled against (?:ABI|API) version 0x[0-9a-f]+ but this version of numpy is 0x[0-9a-f]+|"
      r"compiled using NumPy 1\.x cannot be run in\s+NumPy 2|numpy\.dtype size changed, may indicate binary "
      r"incompatibility|numpy\.core\.multiarray failed to import|_ARRAY_API not found",
      fix.IMPORT, gotcha="U29",
      needles=("module compiled against", "cannot be run in", "numpy.dtype size changed",
               "numpy.core.multiarray failed to import", "_array_api not found"))
# a CUDA extension that did not compile (torch's cpp_extension runs ninja, setuptools nvcc: the toolkit does not fit;
# a plain C compiler failing is a failed build step, `crash.other_runtime`)
_rule("config.compile", "import_or_config_error", "error", "a CUDA extension failed to compile",
      r"Command '\['ninja', '-v'[^\]]*\]' returned non-zero exit status|"
      r"error: command '[^']*nvcc' failed with exit (?:code|status) \d+|"
      r"Failed building wheel for|[Ff]ailed to build (?:installable wheels|[\w.-]+\s*$)",
      fix.IMPORT, gotcha="U29",
      needles=("command '['ninja', '-v'", "' failed with exit", "failed building wheel for", "failed to build"))
# a compiled extension's module that never got built (`from . import _C` failed quietly, so its first use raises),
# and Julia loading a package against dependencies that renamed or dropped a name (`LoadError: UndefVarError`)
_rule("config.extension_missing", "import_or_config_error", "error", "a package's compiled part or dependency is missing",
      r"NameError: name '_(?:C|ext|backend|cuda|kernels?)' is not defined|LoadError: UndefVarError\b",
      fix.IMPORT, gotcha="U29", needles=("nameerror: name '_", "loaderror: undefvarerror"))
# pip could not install what the job needs
_rule("config.pip", "import_or_config_error", "error", "pip could not install a required package",
      r"ERROR: Could not find a version that satisfies the requirement|ERROR: No matching distribution found for|"
      r"\bResolutionImpossible\b",
      fix.IMPORT, gotcha="U29",
      needles=("could not find a version that satisfies the requirement", "no matching distribution found for",
               "resolutionimpossible"))
# one library's version below (or above) what its companion requires (jax/jaxlib; "requires X >= N, found M")
_rule("config.version_pair", "import_or_config_error", "error", "two packages' versions do not fit each other",
      r"\bversion [\d.]+\S* is (?:older|newer) than (?:the minimum|and incompatible with)\b|"
      r"is version [\d.]+\S*, but this version of \w+ requires version",
      fix.IMPORT, gotcha="U29",
      needles=("is older than the minimum", "is older than and incompatible", "is newer than the minimum",
               "is newer than and incompatible", "but this version of"))
# the code expects a launcher (torchrun, srun) that was not used, or a chat model without its template
_rule("config.launch_missing", "import_or_config_error", "error", "the code needs a setting the launch did not give",
      r"Default process group has not been initialized|tokenizer\.chat_template is not set|"
      r"can only be used on (?:CUDA|GPU) devices",
      fix.ARGS,
      needles=("default process group has not been initialized", "chat_template is not set",
               "can only be used on cuda devices", "can only be used on gpu devices"))

# the job asks for more GPUs than the machine (or the container, or CUDA_VISIBLE_DEVICES) shows: Lightning's
# "You requested gpu: [0, 1]\n But your machine only has: [0]", and the same check in other trainers' words
_rule("config.devices", "import_or_config_error", "error", "the job asks for more GPUs than the machine shows",
      r"[Bb]ut your machine only has:|[Yy]ou requested (?:gpus?|GPUs?|devices?): \[|"
      r"[Rr]equested \d+ (?:GPUs?|devices?),? but only \d+ (?:are|is|were|was) (?:available|visible|found)",
      fix.ARGS,
      needles=("but your machine only has:", "you requested gpu", "you requested device", "gpus, but only",
               "gpu, but only", "gpus but only", "gpu but only", "devices, but only", "device, but only",
               "devices but only", "device but only"))

# a model, file or revision the Hub does not have (a typo'd or empty model id, "None" from an unset variable): the
# job names something that is not there, which no retry fixes (a 401/403 for a gated model is `config.hf_auth`)
_rule("config.hub_missing", "import_or_config_error", "error", "the model, file or revision named is not on the Hub",
      r"\b(?:RepositoryNotFoundError|EntryNotFoundError|RevisionNotFoundError)\b|"
      r"404 Client Error:? Not Found for url: https?://(?:huggingface\.co|hf-mirror\.com|[\w.-]*hf\.co)/",
      fix.ARGS,
      needles=("repositorynotfounderror", "entrynotfounderror", "revisionnotfounderror", "404 client error"))

# JAX's Cloud TPU setup failing (a JAX too old for the TPU type, `KeyError('v4-8')`): JAX then runs on the CPU
_rule("config.tpu_init", "import_or_config_error", "warn", "JAX could not set up the Cloud TPU (it falls back to CPU)",
      r"cloud_tpu_init failed", fix.IMPORT, needles=("cloud_tpu_init failed",))

# GPU libraries refusing the setup they were given: bitsandbytes whose CUDA binary did not load (its symbols are then
# None), xformers with no kernel for this GPU or dtype, FlashAttention given fp32, fp16 kernels asked for on the
# CPU ("addmm_impl_cpu_" not implemented for 'Half'), PEFT's target modules absent from this architecture,
# accelerate used before its state exists, torch.compile with no working Triton
_rule("config.gpu_library", "import_or_config_error", "error", "a GPU library does not fit the setup it was given",
      r"'NoneType' object has no attribute 'c\w+_(?:grad_)?(?:fp32|fp16|bf16)|compiled without GPU support|"
      r"No operator found for `\w+`|FlashAttention only supports? (?:fp16 and bf16|fp16/bf16)|"
      r"\"\w+\" not implemented for '(?:Half|BFloat16)'|[Tt]arget modules? .{0,200} not found in the base model|"
      r"properly initialize your accelerator via `accelerator = Accelerator\(\)`|Cannot find a working triton installation",
      fix.IMPORT, gotcha="U29",
      needles=("'nonetype' object has no attribute 'c", "compiled without gpu support", "no operator found for `",
               "flashattention only support", "not implemented for 'half'", "not implemented for 'bfloat16'",
               "not found in the base model", "properly initialize your accelerator",
               "cannot find a working triton installation"))

# JAX / TensorFlow / Keras whose GPU runtime does not fit the box: cuDNN that does not initialise (a version the build
# was not made for), ptxas failing on the kernels XLA compiles, a backend that does not come up, Keras 3 given
# a pre-Keras-3 save format
_rule("config.xla_runtime", "import_or_config_error", "error", "the JAX/TensorFlow GPU runtime does not fit the box",
      # (not XLA's warning that the driver is older than ptxas: it then compiles serially and goes on)
      r"DNN library initialization failed|"
      # (JAX logs "Unable to initialize backend 'tpu'" at INFO on every GPU box while probing; only the raised
      # error for the backend the job asked for counts)
      r"ptxas exited with non-zero error code|RuntimeError: Unable to initialize backend '(?:cuda|gpu|rocm)'|"
      r"Keras 3 only supports V3 `\.keras` files",
      fix.IMPORT, gotcha="U29",
      needles=("dnn library initialization failed", "ptxas exited with non-zero error code",
               "runtimeerror: unable to initialize backend '", "keras 3 only supports v3"))

ENVIRONMENT_RULES: tuple[Rule, ...] = _TABLE.rules()
