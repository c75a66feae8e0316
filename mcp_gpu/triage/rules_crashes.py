"""The last part of the rule table: native crashes and the launchers' reports that a worker failed (after
`rules_software.py`). They come last because they stand for a cause a rule above names better: a segfault, an
abort or a `ChildFailedError` is the answer only when nothing else is.
"""

from __future__ import annotations

from mcp_gpu.triage import remedies as fix
from mcp_gpu.triage.rule import Rule, RuleTable

_TABLE = RuleTable()
_rule = _TABLE.add

# --- native crashes and launcher cascades
# the JVM's uncaught exception (`Exception in thread "main" java.lang.X`) and a build step failing under make: fatal,
# named by no rule above (Go and Rust panics: `crash.panic`)
_rule("crash.other_runtime", "traceback", "error",
      "the process died of an uncaught exception (JVM) or a failed build step",
      r"^Exception in thread \"[^\"]+\" (?:[a-z][\w$]*\.)+[A-Z][\w$]*|"
      r"^make(?:\[\d+\])?: \*\*\* \[.*\] Error \d+", fix.TRACEBACK, fatal=True,
      needles=("exception in thread \"", "make: ***", "make["))
_rule("crash.native", "traceback", "error", "the process crashed natively (segfault/abort)",
      # (not a warning that something "may crash with 0xC0000005": a crash foretold is none)
      r"^(?!.*\b(?:may|might|can|could|would) (?:crash|segfault|abort)\b)(?:.*?)(?:"
      r"Segmentation fault|Fatal Python error(?!: Aborted)|^Bus error\b|\bSIGSEGV\b|signal 11\b|"
      r"\*\*\* Error in|double free|free\(\): invalid|malloc\(\): |stack smashing|"
      r"Illegal instruction|Floating point exception|\bsegfault\b|exit code -11\b|exitcode\s*:\s*-(?:11|7|4|8)\b|"
      r"exited on signal (?:11|7|4|8)\b|terminate called without an active exception|0xC0000005|-1073741819|"
      r"0xC00000FD|-1073741571|[Aa]ccess violation)",
      fix.SEGV, fatal=True,
      needles=("segmentation fault", "fatal python error", "bus error", "sigsegv",
               "signal 11", "*** error in", "double free", "free(): invalid", "malloc(): ",
               "stack smashing", "illegal instruction", "floating point exception", "segfault", "exit code -11",
               "exitcode", "exited on signal", "terminate called without an active exception", "0xc0000005",
               "-1073741819", "0xc00000fd", "-1073741571", "access violation"))
# An abort is how C++ code ends after an error it already printed (`terminate called ... what():`, a collective
# watchdog tearing the process down): it stands for that error, and is the answer only when nothing names one.
_rule("crash.abort", "traceback", "error", "the process aborted (SIGABRT)",
      # (not a server's "Aborted request ..." / "Aborted 3 requests": requests it cancelled)
      r"core dumped|\bSIGABRT\b|signal 6\b|^Aborted\b(?! \d+ requests?\b| requests?\b)|exitcode\s*:\s*-6\b|"
      r"exited on signal 6\b|"
      r"Fatal Python error: Aborted",
      fix.SEGV, role="cascade", fatal=True,
      needles=("core dumped", "sigabrt", "signal 6", "aborted", "exitcode", "exited on signal"))
_rule("crash.glog_fatal", "traceback", "error", "a fatal check failed (glog FATAL: the process aborts)",
      r"^\s*F(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01]) \d\d:\d\d:\d\d|"
      r"^[\d\-: .]+F (?:tensorflow|external|xla|third_party)/\S+:\d+\]|\] Check failed: ",
      fix.SEGV, role="cascade", fatal=True,
      # glog's `F` is followed by the month, the day and a space (`F0515 10:23:45.123456 ...`): needles that
      # long are rare in the lines' shapes (digits all 0), where a bare `f0` is in every hexadecimal `f7`
      needles=(*(f"f{month:02d}{day:02d} " for month in range(1, 13) for day in range(1, 32)),
               " f tensorflow/", " f external/", " f xla/", " f third_party/", "check failed: "))
_rule("crash.panic", "traceback", "error", "the program panicked (Rust/Go)",
      r"thread '[^']*' panicked at|^panic: |^goroutine \d+ \[running\]", fix.TRACEBACK, fatal=True,
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
      r"[Jj]ob (?:\S+ )?(?:failed|FAILED)|[Tt]raining (?:failed|crashed|aborted)|"
      # Hydra's last words when the app it runs raised (printed after the error, as the process exits)
      r"Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace",
      fix.TORCHRUN, role="cascade", fatal=True,
      needles=("childfailederror", "signalexception", "failed (exitcode", "terminate called after throwing", "exitcode",
               "process terminated with signal", "terminated with", "exited with", "returned non-zero exit status",
               "non-zero exit", "exit status", "exit code", "abnormally", "calledprocesserror",
               "workergroupfailureexception", "raytaskerror", "rayactorerror", "actordiederror", "died", "crashed",
               "killed by signal", "exited", "terminated", "errored", "return code", "terminating", "killing subprocess",
               "shutting down workers", "error occurred when executing", "failed", "aborted", "hydra_full_error"))

CRASH_RULES: tuple[Rule, ...] = _TABLE.rules()
