"""Rules for what workflow managers and cluster daemons say about a job stopped from outside (after
`rules_software.py`, before the environment rules).

Nextflow, Snakemake, Cromwell, HTCondor's DAGMan and cluster autoscalers report a scheduler's or a cloud's stop in
their own words, often as one field of a status dump: a Slurm state quoted back (`SLURM status is: 'TIMEOUT'`), an
event name (`ULOG_JOB_EVICTED`, `EC2_INSTANCE_TERMINATE`), a provider's error code (PAPI's code 10 for a worker VM
that went away). The trainer's own log often shows nothing: the process was simply gone.
"""

from __future__ import annotations

from mcp_gpu.triage import remedies as fix
from mcp_gpu.triage.rule import Rule, RuleTable

_TABLE = RuleTable()
_rule = _TABLE.add

# a Slurm state quoted back by the workflow manager that polled sacct (Snakemake's slurm executor, Nextflow)
_rule("sched.state_timeout", "time_limit", "error", "the scheduler's time limit ended the job (state reported back)",
      r"\bSLURM status is:? '?TIMEOUT\b|\{'\d+': 'TIMEOUT'\}|\b[Ss]tate(?: is)?:? '?TIMEOUT\b",
      fix.TIME_LIMIT, gotcha="SLURM2", fatal=True,
      needles=("slurm status is", "': 'timeout'", "state timeout", "state: timeout", "state is timeout",
               "state 'timeout", "state: 'timeout", "state is 'timeout", "state is: timeout", "state is: 'timeout"))
# 140 = 128 + SIGUSR2, what Slurm and SGE send before the time limit's kill; nf-core's pipelines read exit status 140
# as "ran out of time" (the code alone: weaker than a state)
_rule("sched.exit_140", "time_limit", "warn", "the job exited with 140: the scheduler's time limit, most likely",
      r"terminated with an error exit status \(140\)|[Ee]xit (?:status|code):? 140\b",
      fix.TIME_LIMIT, gotcha="SLURM2", fatal=True,
      needles=("error exit status (140)", "exit status 140", "exit code 140", "exit status: 140", "exit code: 140"))
# a process the workflow manager saw end by a signal: 137 = 128 + SIGKILL (the OOM killer, unless someone ran kill -9),
# 143 = 128 + SIGTERM (a stop from outside, unless something crashed first)
_rule("sched.exit_137", "host_oom_killed", "error", "the task was SIGKILLed (exit status 137): the OOM killer, most likely",
      r"terminated with an error exit status \(137\)", fix.HOST_OOM, gotcha="U9", fatal=True,
      needles=("error exit status (137)",))
_rule("sched.exit_143", "preempted", "error", "the task was stopped with SIGTERM (exit status 143)",
      r"terminated with an error exit status \(143\)", fix.SIGTERM, gotcha="SLURM2", role="sigterm", fatal=True,
      needles=("error exit status (143)",))
# the machine went away under the job: a GCE worker VM preempted as Cromwell reports it through Google's Pipelines
# API (error code 10 "assigned worker has failed"; code 14 is a preemption by name), HTCondor evicting the job from
# its execute node, an autoscaler terminating the instance the job ran on
_rule("sched.worker_gone", "preempted", "error", "the machine running the job went away (preempted, evicted, scaled in)",
      r"PAPI error code (?:10|14)\b|The job was stopped before the command finished|"
      r"\bULOG_JOB_EVICTED\b|\bJob was evicted\b|EC2_INSTANCE_TERMINATE\b",
      fix.PREEMPT, gotcha="SLURM2", fatal=True,
      needles=("papi error code", "the job was stopped before the command finished", "ulog_job_evicted",
               "job was evicted", "ec2_instance_terminate"))

# cloud batch services' own reasons: AWS Batch's "Host EC2 (instance i-...) terminated." (the spot instance under
# the job reclaimed) and its job timeout; Google Cloud Batch's documented task exit codes (50001 the Spot VM
# preempted, 50002/50004 the VM stopped reporting or responding, 50003 rebooted, 50006 recreated; 50005 the task ran
# past its maximum run duration); SkyPilot giving up on recovering a managed spot job
_rule("sched.batch_host_gone", "preempted", "error", "the cloud batch service lost the machine under the job",
      r"Host EC2 \(instance [\w-]+\) (?:terminated|stopped)|due to Spot VM preemption|"
      r"\bexit code 5000[12346]\b|\b(?:Spot|Managed)JobReachedMaxRetriesError\b",
      fix.PREEMPT, gotcha="SLURM2", fatal=True,
      needles=("host ec2 (instance", "due to spot vm preemption", "exit code 5000", "jobreachedmaxretrieserror"))
_rule("sched.batch_timeout", "time_limit", "error", "the cloud batch service's time limit ended the job",
      r"Job attempt duration exceeded timeout|\bexit code 50005\b",
      fix.TIME_LIMIT, gotcha="SLURM2", fatal=True, needles=("job attempt duration exceeded timeout", "exit code 50005"))
# Cromwell's words for a job aborted by someone through the backend's console or API
_rule("sched.aborted_outside", "cancelled", "warn", "the job was aborted from outside the workflow manager",
      r"aborted from outside Cromwell", fix.CANCELLED, gotcha="SLURM2", needles=("aborted from outside cromwell",))

WORKFLOW_RULES: tuple[Rule, ...] = _TABLE.rules()
