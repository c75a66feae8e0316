"""The confirmation half of `job_cancel` (lifecycle/jobs.py keeps how a job is observed and signalled).

`request` is the first call: it stores a pending request and says which human channel completes it. `approved`
is the second call's check: the token must be this process's, for this job, unexpired and unused, and a human must
have approved (human_gate.decide); it returns the channel, or the answer to give when nobody has (yet).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_gpu.app import App
from mcp_gpu.lifecycle import human_gate
from mcp_gpu.lifecycle.human_gate import FormAnswer
from mcp_gpu.models import JobRecord

if TYPE_CHECKING:
    from mcp_gpu.lifecycle.jobs import CancelResult


def approved(app: App, rec: JobRecord, base: dict[str, Any], token: str, *, code: str | None,
             form: FormAnswer | None, elicitation: bool | None) -> str | CancelResult:
    """The channel that approved (the request is burned), or the CancelResult to return because none did."""
    from mcp_gpu.lifecycle.jobs import CancelResult

    pending = app.confirmer.check(token, action="cancel", target=rec.id)
    decision = human_gate.decide(app, pending, form=form, code=code)
    if decision.status == "approved":
        app.confirmer.burn(pending, via=decision.via)
        return decision.via
    awaiting = decision.status == "awaiting"
    steps = human_gate.next_steps(app, pending.id, tool_call="job_cancel(job_id, token)", elicitation=elicitation,
                                  phrase=pending.phrase) if awaiting else []
    return CancelResult(**base, state=rec.state, cancelled=False, request_id=pending.id, awaiting_human=awaiting,
                        declined=not awaiting, next_steps=steps, approve_command=human_gate.approve_command(pending.id),
                        message=decision.message if awaiting else
                        f"The human declined cancelling {rec.name} ({decision.message}): nothing was done.")


def request(app: App, rec: JobRecord, base: dict[str, Any], *, elicitation: bool | None,
            ttl_s: int | None) -> CancelResult:
    """First call: nothing is done; a pending request is stored for a human to approve."""
    from mcp_gpu.lifecycle.jobs import CancelResult, cancel_phrase

    phrase = cancel_phrase(rec)
    plan = [f"Cancel job {rec.name} ({rec.id}) on {rec.host}: SIGTERM to its whole process tree, a grace window, "
            f"then SIGKILL. Its run directory ({rec.run_dir}) and outputs are kept."]
    ch = app.confirmer.issue(action="cancel", target=rec.id, phrase=phrase, kind="cancel", expect=rec.name,
                             summary=plan, ttl_s=ttl_s)
    steps = human_gate.next_steps(app, ch.request_id, tool_call="job_cancel(job_id, token=<this token>)",
                                  elicitation=elicitation, phrase=phrase)
    return CancelResult(**base, state=rec.state, cancelled=False, confirmation_required=True, token=ch.token,
                        request_id=ch.request_id, phrase=ch.phrase, expires_at=ch.expires_at,
                        approve_command=human_gate.approve_command(ch.request_id), next_steps=steps,
                        message=" ".join([*human_gate.banner(app), *plan,
                                          f"Nothing was done. Request {ch.request_id} needs a HUMAN:", *steps]))
