"""The second part of the rule table: the DataLoader, imports and configs, code bugs, schedulers and signals, SSH,
the network, other stacks' wordings (after `rules_resources.py`, before `rules_crashes.py`).
"""

from __future__ import annotations

from mcp_gpu.triage import remedies as fix
from mcp_gpu.triage.rule import INF_NEEDLES as _INF
from mcp_gpu.triage.rule import Rule, RuleTable

_TABLE = RuleTable()
_rule = _TABLE.add

# --- DataLoader (train.DP15, DP4, DP6)
_rule("dataloader.shm", "dataloader_error", "error", "DataLoader workers ran out of shared memory (/dev/shm)",
      r"killed by signal: Bus error|Unexpected bus error encountered in worker|unable to write to file </torch_|"
      r"received (?:0|%d) items of ancdata|could not unlink the shared memory file|out of shared memory|"
      r"Too many open files|insufficient shared memory|unable to (?:mmap|open|write) .{0,60}</torch_|shared file mapping|"
      r"/dev/shm.{0,80}(?:[Nn]o space|full|too small|[Ii]nsufficient|[Bb]us error)",
      fix.SHM, gotcha="train.DP15",
      needles=("bus error", "unable to write to file </torch_", "ancdata", "could not unlink the shared memory",
               "shared memory", "too many open files", "</torch_", "shared file mapping",
               "/dev/shm"))
_rule("dataloader.collate", "dataloader_error", "error", "batch samples have different shapes",
      r"stack expects each tensor to be equal size", fix.COLLATE, gotcha="train.DP4")
PICKLE = _rule("dataloader.pickle", "dataloader_error", "error", "DataLoader workers cannot pickle the dataset",
               r"Can't pickle local object|Can't get attribute '[^']+' on <module '__main__'", fix.PICKLE, gotcha="train.DP6",
               needles=("can't pickle local object", "can't get attribute"))
_rule("net.in_worker", "network_stall", "error", "a DataLoader worker's download or stream timed out",
      r"Caught \w*(?:Timeout|Connection|ReadTimeout|HTTP|RemoteDisconnected|ChunkedEncoding|IncompleteRead|SSL)\w* in "
      r"DataLoader worker", fix.NETWORK, gotcha="AD2", needles=("in dataloader worker",))
_rule("dataloader.worker_exc", "dataloader_error", "error", "an exception inside a DataLoader worker",
      r"Caught \w+ in DataLoader worker process \d+|in DataLoader worker process|DataLoader worker.*(?:failed|error)|"
      r"DataLoader(?:Iter)? .*worker.*(?:exception|crashed)|Critical error in pipeline", fix.DATALOADER,
      needles=("dataloader", "critical error in pipeline"))
_rule("dataloader.timeout", "dataloader_error", "error", "a DataLoader worker timed out",
      # (MXNet Gluon's loader words it without the class name)
      r"DataLoader timed out after \d+|^\s*Worker timed out after \d+ seconds", fix.DL_TIMEOUT,
      needles=("dataloader timed out after", "worker timed out after"))
# augmentation worker pools outside torch (batchgenerators of nnU-Net, its multi-threaded augmenters): their workers died
_rule("dataloader.augmenter", "dataloader_error", "error", "the data augmentation workers died",
      r"background workers are no longer alive|[Aa]ugmenter.{0,40}workers? (?:died|crashed|(?:is|are) dead)",
      fix.DATALOADER, gotcha="train.DP9", fatal=True, needles=("workers are no longer alive", "augmenter"))
_rule("dataloader.signal", "dataloader_error", "error", "a DataLoader worker was killed by a signal",
      r"DataLoader worker \(pid[^)]*\) is killed by signal|worker \(pid[^)]*\) is killed by signal|"
      r"(?:dataloader|data loader|data_loader).{0,60}(?:killed|terminated|signal)",
      fix.DATALOADER, gotcha="train.DP9", fatal=True, ignore_case=True,
      needles=("worker (pid", "dataloader", "data loader", "data_loader"))
_rule("dataloader.exited", "dataloader_error", "error", "a DataLoader worker exited unexpectedly",
      r"worker \(pid\(?s?\)?[^)]*\)? exited unexpectedly|_worker_loop|pin_memory_thread|[Pp]in memory thread exited",
      fix.DATALOADER, gotcha="train.DP9", role="cascade", fatal=True,
      needles=("exited unexpectedly", "_worker_loop", "pin_memory_thread", "pin memory thread exited"))

# TensorFlow's input pipeline: a damaged TFRecord, or an image file that does not decode, stops the queue runners /
# tf.data iterator (`Error reported to Coordinator`, the failing op named in the `[[{{node DecodeJpeg}}]]` context)
_rule("dataloader.tf_record", "dataloader_error", "error", "a TFRecord input file is damaged (truncated or corrupt)",
      r"(?:[Tt]runcated|[Cc]orrupted) record at \d+", fix.DATALOADER, fatal=True,
      needles=("truncated record at", "corrupted record at"))
_rule("dataloader.tf_decode", "dataloader_error", "error", "an input image did not decode (TensorFlow's input ops)",
      r"Invalid JPEG data|\[\[\{\{node (?:DecodeJpeg|DecodePng|DecodeImage|DecodeBmp|DecodeGif|DecodeAndCropJpeg|"
      r"ReaderReadV2|ParseSingleExample\w*|ParseExample\w*)\b",
      fix.DATALOADER, needles=("invalid jpeg data", "[[{{node "))
# a sample the loader cannot read or batch: an image file that does not open or is cut short, samples of different
# shapes collated in a worker (torch resizes shared storage there) or batched by tf.data, a damaged tar shard
_rule("dataloader.bad_sample", "dataloader_error", "error", "a data sample cannot be read or batched",
      r"cannot identify image file|image file is truncated|Trying to resize storage that is not resizable|"
      r"Cannot batch tensors with different shapes|ReadError: unexpected end of data",
      fix.DATALOADER, needles=("cannot identify image file", "image file is truncated", "resize storage that is not",
                               "cannot batch tensors", "unexpected end of data"))
# (libjpeg's own "Corrupt JPEG data" / "Premature end of JPEG" warnings are left alone: decoders print them and go on)

# --- imports, configs, credentials
_rule("code.framework_bug", "traceback", "error", "a bug in the training code (shapes, devices, autograd, tracing)",
      r"modified by an inplace operation|mat1 and mat2 shapes cannot be multiplied|Expected all tensors to be on the same "
      r"device|Trying to backward through the graph a second time|[Tt]he size of tensor a \(\d+\) must match|"
      r"Expected input batch_size \(\d+\) to match target batch_size|TracerBoolConversionError|ConcretizationTypeError|"
      r"TracerArrayConversionError|UnexpectedTracerError|Sizes of tensors must match",
      fix.TRACEBACK, needles=("modified by an inplace operation", "mat1 and mat2 shapes", "on the same device",
                              "backward through the graph a second time", "the size of tensor a", "expected input batch_size",
                              "tracerboolconversionerror", "concretizationtypeerror", "tracerarrayconversionerror",
                              "unexpectedtracererror", "sizes of tensors must match"))
# Julia: a package that is not installed or did not build (`ArgumentError: Package X not found`, a missing
# deps/deps.jl, precompilation failing)
_rule("config.julia", "import_or_config_error", "error", "a Julia package is missing or did not build",
      r"ArgumentError: Package \S+ not found in current path|could not open file \S*[/\\]deps[/\\]deps\.jl|"
      r"Failed to precompile \S+|ERROR: LoadError: InitError", fix.MODULE, gotcha="U5",
      needles=("argumenterror: package", "deps.jl", "failed to precompile", "loaderror: initerror"))
_rule("config.module", "import_or_config_error", "error", "a Python module is missing",
      r"ModuleNotFoundError\b|No module named ", fix.MODULE, gotcha="U5",
      needles=("modulenotfounderror", "no module named"))
_rule("config.import", "import_or_config_error", "error", "an import failed (version mismatch)",
      r"^(?:\w+\.)*ImportError\b|cannot import name|undefined symbol|DLL load failed|\bimport of \w+ halted|"
      r"VersionConflict|has no attribute '__version__'|\.so: cannot open shared object file|GLIBC\w*'? not found|"
      r"doesn't have NCCL built in",
      fix.IMPORT, gotcha="U29",
      needles=("importerror", "cannot import name", "undefined symbol", "dll load failed", "import of",
               "versionconflict", "'__version__'", "cannot open shared object file", "glibc", "have nccl built in"))
# Version talk ("is not installed", "requires X but you have Y") is often a warning a run survives: only on an
# error line.
_rule("config.versions", "import_or_config_error", "error", "a package version does not fit",
      r"^(?=.*(?:Error\b|Exception\b|error:|ERROR|[Ee]rror:))(?:.*?)(?:version conflict|requires .{1,60} but you have|"
      r"is not installed|[Pp]lease install|incompatible (?:version|with)|is not supported (?:with|by|in|on) "
      r"(?:this|the|your))",
      fix.IMPORT, gotcha="U29",
      needles=("version conflict", "but you have", "is not installed", "please install", "incompatible",
               "is not supported"))
_rule("config.argparse", "import_or_config_error", "error", "the command-line arguments are invalid",
      r": error: (?:unrecognized arguments|the following arguments are required|argument |invalid choice)|^usage: \S+ \[-h\]",
      fix.ARGS, needles=(": error: ", "usage: "))
_rule("code.monitor_key", "traceback", "error", "a callback monitors a metric the code never logs",
      r"could not find the monitored key", fix.TRACEBACK)
_rule("config.override", "import_or_config_error", "error", "a config override is invalid",
      r"KeyError: .?Override path|is not a mapping|ConfigCompositionException|MissingConfigException|Could not override '|"
      r"\bomegaconf\.errors\.|ConfigAttributeError|ConfigKeyError|MissingMandatoryValue|InterpolationResolutionError|"
      r"is not in struct|Error merging override|Could not append to config|MisconfigurationException|ValidationError|"
      r"FileNotFoundError|does not appear to have a file named|is not a valid model identifier|"
      r"Can't load (?:tokenizer|config|the model)|Unrecognized model in |Should have a `model_type` key|"
      r"is newer than and incompatible with|got an unexpected keyword argument|missing \d+ required positional argument|"
      r"yaml\.(?:scanner|parser|constructor|composer)\.\w*Error|\b(?:Scanner|Parser)Error: (?:while|mapping|expected)",
      fix.OVERRIDE, gotcha="U27",
      needles=("override", "is not a mapping", "configcompositionexception", "missingconfigexception",
               "omegaconf.errors.", "configattributeerror", "configkeyerror", "missingmandatoryvalue",
               "interpolationresolutionerror", "is not in struct", "could not append to config",
               "misconfigurationexception", "validationerror", "filenotfounderror",
               "does not appear to have a file named", "is not a valid model identifier", "can't load",
               "unexpected keyword argument", "required positional argument", "yaml.", "scannererror", "parsererror",
               "unrecognized model in ", "should have a `model_type` key", "is newer than and incompatible with"))
# The same kind worded loosely ("invalid option", "must be one of", "No such file"): only on a line that is an
# error (an exception, error:, ERROR), since warnings say these words about things a run survives.
_rule("config.invalid", "import_or_config_error", "error", "a config or option is invalid",
      r"^(?=.*(?:Error\b|Exception\b|error:|ERROR|[Ee]rror:))(?:.*?)(?:"
      r"[Ii]nvalid (?:config|configuration|value for|argument|option)|[Uu]nknown (?:argument|option|config)|"
      r"[Uu]nsupported (?:argument|option|config|value)|[Cc]onfig(?:uration)? (?:error|file not found)|"
      r"must be (?:one of|set|specified|provided|divisible|a multiple)|is required but|mutually exclusive|"
      r"[Nn]o such file or directory|is not a (?:valid|local folder)|\[Errno 2\]|"
      r"not (?:a )?valid (?:model|path|option|choice)|invalid choice|not recognized|unrecognized|"
      r"(?:is )?unimplemented for (?:task type|this|the)|not supported (?:for|on|with) (?:task type|GPU|CPU)|"
      # a registry that has no entry for the type a config names (mmcv/mmengine, detectron2, timm, fairseq...):
      # a typo, or a package version or install without that module
      r"is not in the [\w:]+ registry|(?:is )?not registered in (?:the )?[\w:]+ registry|"
      r"(?:not found|no object named) \S+ in (?:the )?\S+ registry|"
      # batch-size arithmetic the launcher checks (DeepSpeed) before any step
      r"has to be greater than 0|train_batch_size is not equal to micro_batch_per_gpu)",
      fix.OVERRIDE, gotcha="U27",
      needles=("invalid ", "unknown ", "unsupported ", "config", "must be ", "is required but", "mutually exclusive",
               "no such file or directory", "is not a ", "[errno 2]", "not a valid", "not valid", "invalid choice",
               "not recognized", "unrecognized", "unimplemented for", "not supported", "registry",
               "has to be greater than 0", "train_batch_size is not equal"))
_rule("config.cmd_not_found", "import_or_config_error", "error", "a command is not on PATH",
      r": command not found|: not found$|executable file not found|No such file or directory: '[^']*(?:python|torchrun|"
      r"accelerate|deepspeed|nvcc|ninja|gcc)", fix.CMD_NOT_FOUND,
      gotcha="U5", needles=("command not found", ": not found", "executable file not found", "no such file or directory"))
_rule("config.no_script", "import_or_config_error", "error", "the script is not on the box",
      r"can't open file '[^']*': \[Errno 2\]", fix.NO_FILE, gotcha="U42", needles=("can't open file",))
_rule("config.hf_auth", "import_or_config_error", "error", "the model is gated or the HF token is missing",
      r"GatedRepoError|401 Client Error|Invalid user token|Repository Not Found for url|403 Client Error|"
      r"[Aa]ccess to model .* is restricted|You are trying to access a gated repo", fix.HF_AUTH, gotcha="train.L10",
      needles=("gatedrepoerror", "401 client error", "invalid user token", "repository not found for url",
               "403 client error", "access to model", "gated repo"))
_rule("config.pad", "import_or_config_error", "error", "the tokenizer has no padding token",
      r"Asking to pad but the tokenizer does not have a padding token", fix.PAD, gotcha="train.L3")
_rule("config.port", "import_or_config_error", "error", "the rendezvous port is already in use",
      r"Address already in use|\bEADDRINUSE\b", fix.PORT, gotcha="train.D4")
_rule("config.state_dict", "import_or_config_error", "error", "checkpoint keys do not match the model",
      r"(?:Missing|Unexpected) key\(s\) in state_dict|Error\(s\) in loading state_dict", fix.STATE_DICT,
      gotcha="train.C18", needles=("key(s) in state_dict", "in loading state_dict"))
_rule("config.size_mismatch", "import_or_config_error", "error", "checkpoint shapes do not match the model",
      r"size mismatch for [\w.]+", fix.SIZE, gotcha="train.O20")
_rule("config.wandb_login", "import_or_config_error", "error", "W&B stopped the run: no API key on the box",
      r"api_key not configured|wandb\.errors\.(?:UsageError|AuthenticationError)", fix.WANDB_KEY, gotcha="U35",
      needles=("api_key not configured", "wandb.errors.usageerror", "wandb.errors.authenticationerror"))
_rule("config.wandb_key", "import_or_config_error", "warn", "W&B is disabled: no API key",
      r"No API key configured|Disabled WandB due to initialization error", fix.WANDB_KEY, gotcha="U35",
      needles=("no api key configured", "disabled wandb"))

# --- code bugs with a catalogue entry (class `traceback`)
_rule("code.ddp_unused", "traceback", "error", "DDP: parameters received no gradient",
      r"Expected to have finished reduction in the prior iteration", fix.DDP_UNUSED, gotcha="train.D8")
_rule("code.no_grad", "traceback", "error", "the loss does not require grad",
      r"element 0 of tensors does not require grad", fix.NO_GRAD, gotcha="train.O3")
_rule("code.targets", "traceback", "error", "loss targets have the wrong dtype/shape/range",
      r"Target -?\d+ is out of bounds|expected scalar type Long but found|multi-target not supported", fix.TARGETS,
      gotcha="train.O14", needles=("is out of bounds", "expected scalar type long", "multi-target not supported"))
_rule("code.scaler", "traceback", "error", "the GradScaler state was not restored",
      r"No inf checks were recorded for this optimizer", fix.SCALER, gotcha="train.C15")

# --- scheduler verdicts (before the SIGTERM rules: a time limit also sends SIGTERM)
_rule("sched.time_limit", "time_limit", "error", "the scheduler's time limit ended the job",
      r"DUE TO TIME LIMIT|\bDeadlineExceeded\b|[Ww]all ?time \d+ exceeded limit|TERM_RUNLIMIT|TERM_DEADLINE\b|"
      # (Nextflow: "Process exceeded running time limit (4h)")
      r"exceeded (?:the |its )?(?:wall ?time|run ?time|running time|time) limit|job killed: walltime|"
      r"[Ww]all ?clock limit|"
      r"exceeded the maximum (?:execution |run ?|wall ?)?time|execution took longer than|TERM_CPULIMIT|"
      r"exceeded hard wallclock|[Mm]aximum (?:run ?time|runtime|session (?:length|time))\b.{0,30}\b(?:reached|exceeded)|"
      r"exceeded (?:the )?CPU (?:time )?limit|DUE TO JOB NOT ENDING WITH SIGNALS|cput \d+ exceeded limit|enforced h_rt|"
      r"active longer than specified deadline|MaxRuntimeExceeded|MaxWaitTimeExceeded|[Ss]ession timed out|"
      r"\(state: TIMEOUT\)|Job has timed out\. Ran \d+ minutes",
      fix.TIME_LIMIT, gotcha="SLURM2", fatal=True,
      needles=("walltime", "wall time", "wall clock limit", "wallclock limit", "maximum execution time", "term_runlimit",
               "term_cpulimit", "term_deadline", "execution took longer than",
               "exceeded the maximum", "due to job not ending with signals", "cput",
               "enforced h_rt", "longer than specified deadline", "maxruntimeexceeded", "maxwaittimeexceeded",
               "session timed out", "hard wallclock", "cpu limit", "cpu time limit",
               "time limit", "runtime limit", "due to time limit", "deadlineexceeded", "state: timeout",
               "job has timed out", "maximum run", "maximum session"))
_rule("sched.preempted", "preempted", "error", "the scheduler or cloud preempted the job",
      r"DUE TO PREEMPTION|\bPREEMPTED\b|\bPREEMPTION_IN_PROGRESS\b|[Pp]reemption triggered|"
      r"[Pp]re-empt(?:ed|ion)\b|PreemptionError|(?:due to|by|because of) (?:\w+ )?[Pp]reemption|"
      r"INTERRUPTED_BY_\w+|\binterrupted_by_\w+|Job reconnection failed|Job was evicted|JobEvictedEvent|spot/instance-action|"
      r"\b(?:Pod|MPIJob|Job|Workload)Evicted\b|"
      r"[Ss]pot (?:[Ii]nstance )?[Ii]nterruption|[Pp]reemption notice|EventType\W{1,4}Preempt\b|state: PREEMPTED\b|"
      r"[Ii]nterrupted (?:by the spot|\(spot\))|"
      r"(?:for|by) a higher[- ]priority (?:job|workload|task|pod)|"
      r"[Ii]nstance was preempted|Reason:\s*Evicted|[Pp]od (?:was )?evicted|low on resource|\b[Pp]reempted\b|"
      r"[Pp]reemption (?:notice|signal|detected|event|warning)|\b[Pp]reempting\b|"
      r"[Tt]ermination [Nn]otice|instance-action|[Ss]pot recovery|"
      r"interruption notice|[Rr]ecovering (?:the )?(?:spot|cluster|job)|\bRECOVERING\b|"
      r"[Rr]eplicas? (?:\S+ )?(?:failing|preempted)|"
      r"[Nn]ode (?:was )?(?:drained|terminated|reclaimed|deleted|shut down|shutting down|removed|lost|failed)|"
      r"NODE_FAIL|NodeNotReady|[Nn]ode .{0,40}(?:marked dead|has been marked dead|died)|"
      r"[Ii]nstance (?:\S+ )?(?:was |is being |has been )?(?:terminated|reclaimed|stopped by|interrupted)|"
      r"[Mm]aintenance event|hostError|[Rr]eclaim(?:ed|ing) (?:the )?(?:instance|node|capacity)|"
      r"capacity (?:was )?reclaimed|ScheduledEvents|"
      r"[Ss]hutdown (?:signal|notice)|shutting down (?:the )?(?:instance|node|VM)|\bEVICTED\b|"
      r"(?:[Pp]od|[Nn]ode|[Ii]nstance|[Jj]ob|[Ww]orker|VM)\S* (?:\S+ )?(?:was |has been |is being )?evicted",
      fix.PREEMPT, gotcha="SLURM2", fatal=True,
      needles=("preempt", "pre-empt", "interrupted_by_", "job reconnection failed", "job was evicted",
               "jobevictedevent", "spot", "higher priority", "higher-priority", "termination notice",
               "instance-action", "interruption", "reason:", "evicted",
               "low on resource", "recovering", "replica", "node was", "node drained", "node terminated",
               "node reclaimed", "node deleted", "node shut", "node removed", "node lost", "node failed", "node_fail",
               "nodenotready", "marked dead", "died", "instance", "maintenance event", "hosterror", "reclaim",
               "scheduledevents", "shutdown signal", "shutdown notice", "shutting down"))
# a spot machine named (a launcher's plan, a config dump) is no stop by itself: it is the cause only when nothing
# followed it, and never fatal
_rule("sched.spot_mention", "preempted", "warn", "the job ran on a spot machine and stopped there",
      r"[Ss]pot (?:instance|node|VM|cluster|job)", fix.PREEMPT, gotcha="SLURM2", needles=("spot",))
_rule("sched.cancelled", "cancelled", "warn", "the job was cancelled",
      r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT|^KeyboardInterrupt\b|got signal: 2\b|TERM_(?:FORCE_)?OWNER|"
      r"TERM_(?:FORCE_)?ADMIN|"
      r"Job was aborted by the user|scancel: Terminating job|"
      r"\b(?:[Jj]ob|[Rr]un|[Tt]ask|[Ss]tep)\b.{0,40}\b(?:cancell?ed|aborted) by (?:the )?(?:user|owner|admin\w*|root)\b|"
      # PBS's qdel, HTCondor's condor_rm, LSF's bkill, and their words for a job the user removed
      r"^qdel: |^condor_rm: |^bkill: |\b(?:deleted|removed|killed) by (?:the )?(?:user|owner|admin\w*)\b|"
      r"marked for removal|(?:[Ii]nterrupted by|[Rr]eceived|[Cc]aught|[Gg]ot) (?:signal )?SIGINT\b",
      fix.CANCELLED,
      needles=("cancelled at", "keyboardinterrupt", "got signal: 2", "term_owner", "term_admin", "term_force_owner",
               "term_force_admin", "aborted by the user", "scancel: terminating job", "qdel: ", "condor_rm: ",
               "bkill: ", "deleted by", "removed by", "killed by", "marked for removal", "sigint",
               "cancelled by", "canceled by", "aborted by"))

# a hosted notebook's session ending (idle or over its run-time cap): the job stopped from outside, like a time limit
_rule("sched.session_end", "time_limit", "error", "the notebook service ended the session (idle or run-time cap)",
      r"disconnected you due to inactivity|exceeded the max(?:imum)? allowed execution (?:duration|time)|"
      r"(?:shut down|stopped|terminated) due to (?:auto-?shutdown|inactivity|idle)",
      fix.TIME_LIMIT, gotcha="SLURM2",
      needles=("due to inactivity", "allowed execution", "due to auto-shutdown", "due to autoshutdown", "due to idle"))

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
      r"Signals\.SIGTERM|[Tt]erminated by signal SIGTERM|^Terminated: 15\b|[Kk]illed by (?:signal )?(?:SIGTERM|15)\b|"
      r"[Bb]ypassing signal SIGTERM|[Hh]andling signal:? SIGTERM|[Ss]ignal received:? SIGTERM\b|"
      # (not a supervisor saying a child "did not exit on SIGTERM" before it sends SIGKILL)
      r"(?:[Dd]ue to|[Cc]aught signal|(?<!exit )on) SIGTERM\b",
      fix.SIGTERM, role="sigterm", fatal=True,
      needles=("sigterm", "handling signal", "signal received",
               "death signal", "got signal: 15", "exitcode", "terminated", "received signal 15",
               "received 15"))

# --- SSH session (U1, GEN8), then the network
_rule("ssh.hostkey", "ssh_disconnect", "error", "the SSH host key is unknown or changed",
      r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED", fix.HOSTKEY,
      needles=("host key verification failed", "remote host identification"))
_rule("ssh.drop", "ssh_disconnect", "warn", "the SSH session dropped",
      r"client_loop: send disconnect|packet_write_wait|Connection to \S+ closed by remote host|ssh: connect to host|"
      r"ssh: Could not resolve hostname|Timed out while waiting for handshake|"
      r"kex_exchange_identification|ssh_exchange_identification|Read from remote host|Timeout, server \S+ not responding|"
      r"Connection closed by (?:remote host|\d)|ssh.*(?:[Cc]onnection (?:reset|refused|timed out|closed))|\.ssh_exception\.|"
      r"[Rr]emote side unexpectedly closed|[Ss]ession (?:closed|terminated|ended|disconnected)|[Dd]isconnected from|"
      r"client_loop|Write failed: Broken pipe|Corrupted MAC|[Cc]onnection (?:to .* )?lost|[Ll]ost connection|mux_client_\w+|"
      r"during banner exchange|Read error from remote host|sshd\[\d+\]: .{0,40}(?:Connection reset|Connection closed|"
      r"Timeout before authentication|Broken pipe)|ssh heartbeat.{0,60}dropped|[Rr]econnect(?:ing)? to (?:the )?ssh server",
      fix.SSH, gotcha="U1",
      needles=("client_loop", "packet_write_wait", "closed by remote host", "ssh", "kex_exchange_identification",
               "read from remote host", "timeout, server", "broken pipe", "connection closed by", "remote side",
               "session", "disconnected from", "corrupted mac", "lost connection", "connection",
               "during banner exchange", "read error from remote host", "sshd[", "ssh heartbeat", "to ssh server",
               "to the ssh server", "mux_client_", "waiting for handshake"))
_rule("net.wandb_init", "network_stall", "warn", "W&B could not start its run (network)",
      r"Run initialization has timed out|wandb: ERROR .*(?:timed out|[Tt]imeout)", fix.WANDB, gotcha="AD1",
      needles=("run initialization has timed out", "wandb: error"))
_rule("net.wandb", "network_stall", "warn", "W&B cannot reach its server",
      r"wandb: ERROR|wandb: Network error|wandb: .*retry", fix.WANDB, needles=("wandb: error", "wandb: network error", "wandb: "))
# a client announcing a retry: what counts is whether the retries ran out (`Max retries exceeded`, a timeout error)
_rule("net.retrying", "network_stall", "info", "a network client retried a request",
      r"Retrying \(Retry\(total=|[Rr]etrying in \d+(?:\.\d+)?\s*s|[Rr]etry \d+/\d+|[Rr]etrying \(\d+/\d+\)",
      fix.NETWORK, gotcha="AD2", needles=("retrying", "retry "))
_rule("net.proxy", "network_stall", "warn", "a proxy refused the connection", r"ProxyError", fix.NETWORK, gotcha="GS2")
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
      r"socket (?:has )?timed out|GnuTLS recv error|TLS connection was non-properly terminated|"
      r"unable to access 'https?://|HttpError: 5\d\d\b|\b5\d\d Backend Error",
      fix.NETWORK, gotcha="AD2",
      needles=("readtimeout", "connecttimeout", "connection", "max retries exceeded", "name resolution",
               "name or service not known", "couldn't", "localentrynotfounderror", "network", "read timed out",
               "remotedisconnected", "remote end closed", "incompleteread", "chunkedencodingerror", "protocolerror",
               "sslerror", "ssl: ", "connectionpool", "serverdisconnectederror", "clientconnectorerror",
               "clientoserror", "clientpayloaderror", "timeouterror", "socket.timeout", "could not resolve host",
               "getaddrinfo failed", "nodename nor servname", "http error 5", "server error", "bad gateway",
               "service unavailable", "gateway time", "too many requests", "429 client error", "download", "curl: (",
               "urlopen error", "urlerror", "socket has timed out", "socket timed out", "errno 110", "errno 104",
               "errno 111", "errno 113", "errno -", "timed out", "gnutls recv error", "non-properly terminated",
               "unable to access 'http", "httperror: 5", "backend error"))

# --- more ways the same classes are worded by other frameworks, clouds and launchers
_rule("dataloader.worker_signal", "dataloader_error", "error", "a DataLoader worker crashed natively",
      r"Unexpected (?:segmentation fault|floating-point exception|bus error) encountered in worker", fix.DATALOADER,
      gotcha="train.DP9", fatal=True, needles=("encountered in worker",))
_rule("sched.preempted_more", "preempted", "error", "the job was stopped from outside (preemption, requeue, node loss)",
      r"srun: forcing job termination|srun: Job step aborted|srun: Force Terminated|"
      # LSF's exit reasons for a job stopped from outside: preempted, a signal from outside LSF, a run window closed,
      # the host's load threshold
      r"TERM_PREEMPT\b|TERM_EXTERNAL_SIGNAL\b|TERM_WINDOW\b|TERM_LOAD\b|TERM_RMS\b|TERM_UNKNOWN\b|"
      # PBS's mail when the server itself ended the job (a node lost, an operator's qdel -W force)
      r"[Aa]borted by PBS Server|"
      r"\bREQUEUED\b|[Rr]equeu(?:e|ing) (?:the )?job|TERM_REQUEUE_\w+|"
      r"(?:[Rr]eceived|[Hh]andling|[Cc]aught|got) (?:signal )?SIGUSR[12]|NodeDiedError|[Nn]ode (?:has )?died|"
      r"missed too many heartbeats|TPU (?:was |has been )?preempted|[Hh]ost maintenance|NodeShutdown|"
      r"[Nn]ode (?:is )?(?:being )?drained|[Ss]pot (?:instance )?(?:termination|reclaim)|will be terminated|"
      r"is being terminated|[Ll]ost (?:the )?(?:node|worker node|host)\b|"
      # what a spot watcher prints from AWS's instance metadata; Kubernetes' reasons for a pod stopped from outside
      r"\"action\"\s*:\s*\"(?:terminate|stop|hibernate)\"\s*,\s*\"time\"|\b(?:PreemptionBy(?:Kube)?Scheduler|"
      r"DeletionByTaintManager|EvictionByEvictionAPI|DeletionByPodGC|TerminationByKubelet)\b",
      fix.PREEMPT, gotcha="SLURM2", fatal=True,
      needles=("aborted by pbs server",
               "srun: forcing job termination", "srun: job step aborted", "srun: force terminated", "requeued", "requeue",
               "term_preempt", "term_external_signal", "term_window", "term_load", "term_rms", "term_unknown",
               "sigusr",
               "nodediederror", "died", "missed too many heartbeats", "preempted", "host maintenance",
               "nodeshutdown", "drained", "spot", "will be terminated", "is being terminated", "lost the", "lost node",
               "lost worker node", "lost host", '"action"', "preemptionby", "deletionbytaintmanager",
               "evictionbyevictionapi", "deletionbypodgc", "terminationbykubelet"))
_rule("nan.more", "nan_inf", "error", "NaN/inf values appeared",
      r"\b(?:ppl|perplexity)\b['\"]?\s*[:=]?\s*inf\b|[Ff]ound (?:a |some )?(?:NaN|nan|inf|Inf)\b|"
      r"(?:[Ll]oss\w*|[Gg]rad\w*|[Oo]utputs?|[Ll]ogits|[Ww]eights?|[Pp]aram\w*|[Aa]ctivations?) (?:contains?|has|have|"
      r"produced|returned|got|became|is) (?:a |some )?(?:NaN|nan)s?\b|NaNs? (?:encountered|appeared)",
      fix.NAN, gotcha="train.P8", needles=("ppl", "perplexity", "nan", *_INF))
_rule("gpu.lost", "cuda_device_error", "error", "the GPU needs a reset or is gone",
      r"GPU requires reset|Unable to determine the device handle|GPU (?:\S+ )?(?:is )?lost\b|fell off the bus",
      fix.XID, gotcha="U22", needles=("gpu requires reset", "unable to determine the device handle", "gpu",
                                      "fell off the bus"))
_rule("ckpt.more", "checkpoint_corrupt", "error", "a checkpoint or downloaded weight file is incomplete",
      r"Consistency check failed|file should be of size|[Cc]hecksum (?:mismatch|does not match|failed)|hash mismatch|"
      r"DataLossError|hasRecord\(\"version\"\)|could not find MARK|ended before the end-of-stream marker|"
      r"Error -3 while decompressing|"
      r"Unable to load weights from|is not a valid (?:checkpoint|safetensors)|invalid magic number|"
      r"(?:model|file|checkpoint|weights) (?:is |was )?corrupted or incomplete|not within the file bounds|"
      # TF's reader of a V1 checkpoint table, or of a file that is not one
      r"not an sstable|Unable to open table file .{0,200}(?:[Dd]ata loss|bad magic|corrupt)|"
      # a weights file of another format's reader: GGUF's magic, tensorstore reading an orbax checkpoint cut short
      r"GGUF magic invalid|[Bb]ad magic number|Error reading (?:local )?file .{0,160}Unexpected end of file",
      fix.CKPT, gotcha="train.C2")
_rule("config.build", "import_or_config_error", "error", "a CUDA extension or library does not fit the environment",
      r"Error building extension '|CUDA Setup failed|bitsandbytes was compiled without GPU support|"
      r"ninja: build stopped: subcommand failed|\[WinError 126\]|DLL load failed|Error loading \"[^\"]+\.dll\"|"
      # Windows failing a DLL's initialisation (a torch or CUDA DLL of the wrong build), in English or Chinese
      r"\[WinError 1114\]|DLL initialization routine failed|动态链接库.{0,20}初始化例程失败|"
      r"KeyError: '(?:llama|mistral|mixtral|qwen\w*|gemma\w*|phi\w*|falcon|gpt_neox|starcoder2?|mpt|baichuan|chatglm|"
      r"internlm\w*|deepseek\w*|olmo\w*|cohere|dbrx|jamba|mamba\w*|llava\w*|idefics\w*|paligemma|siglip|glm\w*|yi)'",
      fix.IMPORT, gotcha="U29", needles=("error building extension", "cuda setup failed", "compiled without gpu support",
                                         "keyerror: '", "ninja: build stopped", "[winerror 126]", "dll load failed",
                                         ".dll\"", "[winerror 1114]", "dll initialization routine failed",
                                         "动态链接库"))
_rule("config.load", "import_or_config_error", "error", "a package failed to load or precompile",
      r"Failed to precompile|ERROR: Unable to load dependency|does not find an installed|"
      r"[Ee]rror loading shared librar", fix.IMPORT, gotcha="U29",
      needles=("failed to precompile", "unable to load dependency", "does not find an installed",
               "error loading shared librar"))
_rule("config.submit", "import_or_config_error", "error", "the scheduler refused the job as submitted",
      r"Batch job submission failed|[Rr]equested node configuration is not available|[Ii]nvalid (?:account|partition|qos)|"
      r"Unable to create step for job|More processors requested than permitted|[Jj]ob rejected by all possible "
      r"destinations|"
      # Kubernetes cannot place or start the pod: no node has the GPUs asked for, the image does not pull
      r"\d+/\d+ nodes are available: .{0,120}Insufficient (?:nvidia\.com/gpu|amd\.com/gpu|google\.com/tpu|memory|cpu)|"
      r"ImagePullBackOff|ErrImagePull|Failed to pull image",
      fix.ARGS, needles=("batch job submission failed", "requested node configuration", "invalid account",
                         "invalid partition", "invalid qos", "unable to create step for job",
                         "more processors requested than permitted", "job rejected by all possible",
                         "nodes are available: ", "imagepullbackoff", "errimagepull", "failed to pull image"))
_rule("config.launch_env", "import_or_config_error", "error", "the script was started without its launcher's environment",
      r"KeyError: '(?:LOCAL_RANK|RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|LOCAL_WORLD_SIZE)'|"
      r"environment variable \w+ expected, but not set", fix.ARGS,
      needles=("keyerror: '", "expected, but not set"))
_rule("config.hardware", "import_or_config_error", "error", "the code needs another GPU generation or build",
      r"only supports Ampere GPUs or newer|requires (?:a GPU with )?compute capability|compiled with different CUDA|"
      r"only supported on GPUs with compute capability|compute capability of at least|"
      r"Unrecognized configuration class|does not exist or is not currently imported|"
      r"[Nn]o (?:valid )?(?:GPU|CUDA device) (?:is )?(?:found|available)|setup does ?n[o']t support bf16", fix.CUDA_VERSION,
      gotcha="U28",
      needles=("only supports ampere", "compute capability", "compiled with different cuda", "unrecognized configuration class",
               "is not currently imported", "gpu found", "gpu available", "gpu is found", "gpu is available",
               "cuda device found", "cuda device available", "cuda device is", "support bf16"))
_rule("config.more", "import_or_config_error", "error", "the environment or a package does not fit the code",
      r"AttributeError: module '[\w.]+' has no attribute|DistributionNotFound|ContextualVersionConflict|CUDA_HOME|"
      r"Ninja is required|compiled with different CUDA versions|does not recognize this architecture|"
      r"[Pp]ermission denied(?! \(publickey)|"
      # a package the code needs, or one of the wrong version: the message says which and how to install it
      r"requires? [\w.\-\[\]]+ to be installed|[Uu]nknown model type|model_type not recogni[sz]ed|"
      r"created with a (?:newer|older|different) version of|Descriptors cannot (?:not )?be created directly|"
      r"protoc >= [\d.]+|Microsoft Visual C\+\+ [\d.]+ or greater is required|"
      r"Please specify `?\w+`? in `?\w*config|Expected one of .{0,300}device type at start of device string",
      fix.IMPORT, gotcha="U29", needles=("has no attribute", "distributionnotfound", "contextualversionconflict",
                                         "cuda_home", "ninja is required", "compiled with different cuda versions",
                                         "does not recognize this architecture", "permission denied", "to be installed",
                                         "unknown model type", "model_type not recogni", "version of",
                                         "descriptors cannot", "protoc >=", "microsoft visual c++", "please specify",
                                         "device type at start of device string"))
_rule("ssh.more", "ssh_disconnect", "warn", "the SSH session dropped",
      # (NCCL's socket layer prints the same errno as "Connect to <peer> failed : Software caused connection abort")
      r"port 22\b.*(?:closed|reset|timed out|refused|[Bb]roken pipe)|(?<!failed : )Software caused connection abort|"
      r"ssh_dispatch_run_fatal|"
      r"Connection (?:reset|closed) by \S+ port 22\b|\[lost tty\]|"
      r"Connection closed by \S+ port \d+|[Ss]erver unexpectedly closed network connection|Received disconnect from|"
      r"Permission denied \(publickey|Could not establish connection to|Connection timed out during banner exchange",
      fix.SSH, gotcha="U1", needles=("port 22", "software caused connection abort", "connection closed by",
                                     "server unexpectedly closed network connection", "received disconnect from",
                                     "permission denied (publickey", "could not establish connection to",
                                     "banner exchange"))
_rule("net.git", "network_stall", "error", "a clone or fetch lost its connection",
      r"remote end hung up unexpectedly|fatal: early EOF|index-pack failed|RPC failed; curl|"
      r"[Nn]o internet connection", fix.NETWORK, gotcha="AD2",
      needles=("remote end hung up unexpectedly", "early eof", "index-pack failed", "rpc failed; curl",
               "no internet connection"))
_rule("net.more_names", "network_stall", "error", "a network connection failed",
      r"Temporary failure resolving|unable to resolve host|\bENOTFOUND\b|\bEAI_AGAIN\b|SSLEOFError|SSLZeroReturnError|"
      r"EndpointConnectionError|FSTimeoutError|\bgaierror\b|"
      r"ServerTimeoutError|\bRequestTimeout\b|DNS resolution failed|api_core\.exceptions\.ServiceUnavailable",
      fix.NETWORK, gotcha="AD2",
      needles=("temporary failure resolving", "unable to resolve host", "enotfound", "eai_again", "ssleoferror", "gaierror",
               "sslzeroreturnerror", "endpointconnectionerror", "fstimeouterror",
               "servertimeouterror", "requesttimeout", "dns resolution failed",
               "exceptions.serviceunavailable"))
_rule("net.more", "network_stall", "error", "a network connection failed",
      r"ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ECONNREFUSED|socket hang up|forcibly closed|peer closed connection|"
      r"StatusCode\.UNAVAILABLE|failed to connect to all addresses|DEADLINE_EXCEEDED|[Uu]nable to connect|"
      r"[Ff]ailed to connect|handshake (?:failed|timed out)|Could not connect to",
      fix.NETWORK, gotcha="AD2")
# A launcher restarting the workers: what failed before it was not survived, it caused the restart.
_rule("cascade.restart", "traceback", "error", "the launcher restarted the workers after a failure",
      r"[Rr]estarting (?:the )?(?:worker group|workers)|restart_count=[1-9]|[Rr]elaunching (?:the )?(?:job|workers|training)|"
      r"[Aa]ttempting (?:to )?restart|restarts? (?:left|remaining)|[Ww]orker group failed",
      fix.TORCHRUN, role="cascade", fatal=True)
_rule("cascade.mpi", "traceback", "error", "an MPI/Horovod launcher reports a failed process",
      r"mpirun detected that one or more processes exited|returned a non-zero exit code|"
      r"exit with status code [1-9]|exited on signal \d+|MPI_ABORT was invoked on rank|"
      r"[Pp]rimary job\s+terminated normally, but \d+ process(?:es)? returned", fix.TORCHRUN, role="cascade", fatal=True,
      needles=("mpirun detected that one or more processes exited", "returned a non-zero exit code",
               "exit with status code", "exited on signal", "mpi_abort was invoked on rank", "terminated normally, but"))

# Kubernetes restarting a container that keeps exiting: the crash is the container's own (its log says which)
_rule("cascade.k8s", "traceback", "error", "Kubernetes keeps restarting a crashing container",
      r"CrashLoopBackOff|Back-off restarting failed container", fix.TORCHRUN, role="cascade", fatal=True,
      needles=("crashloopbackoff", "back-off restarting failed container"))

_rule("host_oom.words", "host_oom_killed", "error", "host RAM ran out",
      r"^(?:\[\d+\][+-]?\s+)?(?:\d+\s+)?Killed\b"
      r"(?! by (?:signal )?(?:(?!9\b)\d+|SIG(?!KILL)[A-Z]+)\b| (?:orphan\w*|zombie|stale|leftover|dangling|idle)\b)|"
      r"(?:exit(?:ed)?|return|error)(?: with)? ?code[:= ]\s*(?:137|-9)\b|"
      r"EXIT CODE: 9\b|(?:\]|it/s|s/it|%)\s*Killed\s*$|^\[\d+\][+-]?\s+\d+\s+killed\s|memory budget\. Restarting|"
      r"returncode=-9\b|returned -9\b|The paging file is too small|WinError 1455|all available RAM|out of RAM\b|"
      r"RAM (?:is )?(?:full|exhausted)|Your session crashed|low swap: killing|killing largest compressed process|"
      r"(?:[Ss]ystem|[Ii]nstance|[Nn]ode|[Mm]achine|[Hh]ost|VM|[Cc]ontainer|[Pp]od) (?:ran|has run|is running) out of memory|"
      r"out of (?:host|system|CPU) memory|"
      r"tried to allocate more memory than is available|exceeded its memory (?:request|limit|allocation)|"
      r"[Kk]ernel (?:for \S+ )?appears to have died|"
      r"The Kernel crashed while executing code|process pool was terminated abruptly|"
      # HTCondor holding (stopping) a job for its memory use
      r"[Hh]old reason: .{0,120}\b(?:memory|MemoryUsage|RequestMemory)\b|put on hold .{0,60}\bmemory\b|"
      # the kernel's memcg report of old, and schedulers' words for a job over its memory request
      r"killed as a result of limit of /|[Mm]emory usage exceeded (?:the )?(?:hard limit|request_memory|its request|limit)",
      fix.HOST_OOM, gotcha="U9", fatal=True,
      needles=("killed", "code", "returned -9", "exit code: 9", "memory budget", "your session crashed", "low swap: killing",
               "hold reason: ", "put on hold", "killed as a result of limit of", "memory usage exceeded",
               "paging file is too small", "winerror 1455",
               "all available ram", "out of ram",
               "ram is", "ram full", "ram exhausted", "out of memory", "out of host memory",
               "more memory than is available", "appears to have died", "exceeded its memory",
               "kernel crashed while executing code", "terminated abruptly"))
_rule("nan.value", "nan_inf", "error", "a NaN value in the training output",
      # not on a line whose training loss is finite: there the NaN is some other metric; nor a reinforcement-learning
      # episode statistic, which is NaN until the first episode ends (a mean over no episodes)
      r"^(?!.*(?:^|[\s,{'\"\]])(?:train_)?loss['\"]?\s*[:=]?\s*[-+]?\d)"
      r"(?!.*\b(?:[Rr]eward|[Rr]eturn|ep_?\w+|[Ee]pisode\w*|eplen\w*)\b).*?(?:^|[\s|,:=(\[{'\"])"
      r"(?<!\b0 )(?<!\b[Nn]o )[-+]?(?:nan|NaN|NAN)"  # (a count of none: "0 NaN values", "no NaN in the inputs")
      r"(?:$|[\s|,)\]}'\"%])", fix.NAN, gotcha="train.P8", needles=("nan",))
_rule("nan.words", "nan_inf", "error", "the loss or the inputs became NaN/inf",
      r"Invalid loss, terminating training|Input contains (?:NaN|infinity)|[Ll]oss (?:has )?(?:gone|went) (?:to )?NaN|"
      r"Nan in summary histogram|Tensor had (?:NaN|Inf) values|NAN or INF \(num_nan",
      fix.NAN, gotcha="train.P8", needles=("invalid loss, terminating", "input contains", "nan"))
_rule("sched.node_fail", "preempted", "error", "the node failed or the job was requeued",
      r"DUE TO NODE FAIL|[Nn]ode failure|\bREQUEUE\b|[Pp]od .{0,60}(?:was )?deleted|NodeShutdown|[Tt]erminating pod|"
      r"going down for (?:poweroff|reboot|halt)|System is (?:powering down|rebooting)|"
      r"reboot: (?:Power down|Restarting system)|is being shut ?down|[Ss]hutting down (?:the )?(?:system|machine|host)|"
      r"[Rr]ecover(?:ing|ed) (?:from )?(?:preemption|the job|cluster)|[Ii]nstance (?:was |has been )?stopped|"
      r"[Pp]od (?:was |has been )?(?:stopped|terminated)|machine (?:is|went) offline|[Rr]untime disconnected|"
      r"[Rr]untime (?:has been|was) disconnected|"
      r"(?:terminated|stopped|shut down|rebooted) (?:\w+ ){0,4}(?:due to|for) (?:\w+ ){0,2}maintenance|"
      # notices ahead of the stop, and what a cluster does to a pod it takes back
      r"[Ss]cheduled for (?:termination|preemption|eviction)|"
      r"(?:[Ii]nstance|[Nn]ode|VM|[Pp]od|[Mm]achine|[Hh]ost)\b.{0,40}[Ss]cheduled for (?:maintenance|deletion)|\b[Oo]utbid\b|"
      r"[Kk]illing container with id|Need to kill Pod|[Aa]uto-requeue signal|[Nn]ode is shutting down|"
      r"[Rr]equeing job|\btermination[- ]time\b|\([Pp]re-?emption\)",
      fix.PREEMPT, gotcha="SLURM2", fatal=True,
      needles=("due to node fail", "node failure", "requeue", "pod", "nodeshutdown", "terminating pod", "going down for",
               "system is powering down", "system is rebooting", "reboot: power down", "reboot: restarting system",
               "shut down", "shutdown", "shutting down", "recover", "instance", "offline", "runtime disconnected",
               "runtime has been disconnected", "maintenance", "runtime was disconnected", "scheduled for", "outbid",
               "killing container", "need to kill pod", "auto-requeue", "node is shutting down", "requeing job",
               "termination time", "termination-time", "(preemption)", "(pre-emption)"))
_rule("signal.sigterm_words", "preempted", "error", "the job received SIGTERM",
      r"got SIGTERM|\bsignal 15\b|signal: terminated|[Cc]aught (?:signal )?15\b|(?:exit|"
      r"return)(?: with)? ?code[:= ]\s*(?:143|-15)\b|"
      r"status:? ?143\b|"
      # "Exit code is 143" (YARN), "exited with code 143", "a non-zero status of 143" (Vertex AI), LSF's summary
      r"\b(?:[Ee]xit(?:ed)?|[Rr]eturn(?:ed)?|status)\b[^\n\d]{0,30}?(?:code|status)(?: is| of)?[:= ]\s*(?:143|-15)\b|"
      r"[Tt]erminated by (?:signal )?(?:SIGTERM|TERM\b)|(?:[Ii]nterrupted|[Ss]topped|[Kk]illed) by (?:signal )?SIGTERM\b|"
      r"\bTERM signal\b|srun: error: \S+: tasks? [\d,-]+: Terminated\b|"
      r"^\[\d+\][+-]?\s+Terminated\b",  # bash's job control reporting a background job's end
      fix.SIGTERM, role="sigterm", fatal=True,
      needles=("got sigterm", "signal 15", "signal: terminated", "caught 15", "caught signal 15", "code", "status",
               "terminated by", "by sigterm", "by signal sigterm", "term signal", ": terminated", "terminated"))
_rule("cuda_oom.runtimes", "cuda_oom", "error", "GPU memory ran out (TensorRT, ONNX Runtime, CuPy)",
      r"Cuda Runtime \(out of memory\)|[Cc]uda [Ee]rror in .*\(out of memory\)|GPU memory allocation error|"
      r"[Rr]equested amount of GPU memory .{0,40}could not be allocated|BFCArena.{0,80}Failed to allocate|"
      r"Failed to allocate memory for requested buffer|OutOfMemory Error in nvinfer1|"
      r"[Oo]ut of memory (?:allocating|to allocate)|No available memory for the cache blocks",
      fix.CUDA_OOM, gotcha="U10", needles=("(out of memory)", "gpu memory allocation error", "requested amount of gpu memory",
                                           "bfcarena", "failed to allocate memory for requested buffer",
                                           "outofmemory error in nvinfer1", "out of memory allocating",
                                           "out of memory to allocate", "no available memory for the cache blocks"))
_rule("cuda_oom.words", "cuda_oom", "error", "GPU memory ran out",
      r"cudaMalloc\w* (?:failed|error)|Unable to find a valid cuDNN algorithm|MPS backend out of memory|"
      # Apple Metal (MLX, MPS): a command buffer the GPU could not give memory to
      r"kIOGPUCommandBufferCallbackErrorOutOfMemory|\[METAL\] .{0,60}Insufficient Memory|"
      # Vulkan (ncnn, llama.cpp's Vulkan backend): device memory not allocated (-2 is VK_ERROR_OUT_OF_DEVICE_MEMORY)
      r"vkAllocateMemory failed|(?:VK|UR_RESULT|ZE_RESULT)_ERROR_OUT_OF_DEVICE_MEMORY|ErrorOutOfDeviceMemory|"
      # Torch7's cutorch and PyTorch before 1.0: CUDA error 2 is cudaErrorMemoryAllocation
      r"cuda runtime error \(2\) : out of memory|THCudaCheck FAIL.{0,200}error=2 : out of memory|"
      # torch's OutOfMemoryError under an allocation cap, as ComfyUI and TGI print it; RAPIDS' memory manager (RMM)
      r"Allocation on device(?: \d+)?(?: would exceed allowed memory|\s*$)|RMM failure at|rmm::(?:bad_alloc|out_of_memory)|"
      r"Maximum pool size exceeded|"
      r"XPU out of memory|out of (?:GPU|VRAM|video) memory|Tried to allocate [\d.]+ ?[KMGT]i?B|ResourceExhaustedError|"
      r"Dst tensor is not initialized|"
      r"cuMemAlloc\w* failed|unable to allocate (?:\w+ )?(?:backend|CUDA\d*|device|GPU) buffer",
      fix.CUDA_OOM, gotcha="U10", needles=("cudamalloc", "unable to find a valid cudnn algorithm",
                                           "kiogpucommandbuffercallbackerroroutofmemory", "insufficient memory",
                                           "vkallocatememory failed", "out_of_device_memory", "outofdevicememory",
                                           "cuda runtime error (2)", "error=2 : out of memory",
                                           "allocation on device", "rmm failure at", "rmm::", "maximum pool size exceeded",
                                           "mps backend out of memory", "xpu out of memory", "out of gpu memory",
                                           "out of vram", "out of video memory", "tried to allocate",
                                           "resourceexhaustederror", "cumemalloc", "dst tensor is not initialized",
                                           "unable to allocate"))
_rule("disk.words", "disk_full", "critical", "the disk or volume is full",
      r"[Ee]rrno[ =]28\b|(?:[Vv]olume|[Ss]torage|[Dd]rive|[Pp]artition|[Ff]ilesystem|[Ff]ile system) (?:is )?full\b|"
      # (not the `quota` tool's own heading "Disk quotas for user bob (uid 1001):", which is read as a table)
      r"[Ss]torage quota|[Dd]isk quota(?!s for (?:user|group|project|fileset)\b)|"
      r"exceeded (?:your |the )?(?:storage|disk) quota|No usable temporary directory|"
      r"Resource exhausted: (?:/|[A-Za-z]:\\)|"
      # Rust's io::Error and Windows' ERROR_DISK_FULL (112), in any language of the message
      r"\(os error (?:28|112)\)|\[WinError 112\]|[Tt]here is not enough space on the disk",
      fix.DISK, gotcha="U6", needles=("errno 28", "errno=28", "full", "storage quota", "disk quota", "quota",
                                      "no usable temporary directory", "resource exhausted: ", "(os error 28)",
                                      "(os error 112)", "[winerror 112]", "not enough space on the disk"))
_rule("inodes.words", "inode_exhausted", "critical", "the filesystem is out of inodes",
      r"[Ii]nodes? (?:usage|use|used).{0,20}(?:100|9\d)%|IUse%? ?=? ?100%|\b0 (?:free )?inodes|free inodes:? 0\b",
      fix.INODES, gotcha="U7", needles=("inode", "iuse"))

SOFTWARE_RULES: tuple[Rule, ...] = _TABLE.rules()
