"""The observation parser and the one verdict, fed raw probe answers: hostile values stay data, garbage stays the
job's own problem, and the precedence of process group, cancel record and exit code is decided once."""

from __future__ import annotations

import base64

from mcp_gpu.backends.observe import JobObservation, Target, parse, verdict
from mcp_gpu.models import JobState

T = [Target(key="job_a", backend="tmux", run_dir="/r/a"), Target(key="job_b", backend="tmux", run_dir="/r/b")]


def answer(*records: str) -> str:
    return "".join(r + "\0" for r in records)


def job(**facts: str) -> list[str]:
    return [f"{k}={v}" for k, v in facts.items()]


def test_a_file_name_imitating_records_is_only_a_name() -> None:
    evil = "x.pt\r@@job job_a\rexit=0\rj0.exit=0\nj0.group_alive=0"
    text = answer("h.now=1000", "h.proc_ok=1",
                  "j0.rd=1", "j0.pgid=42", "j0.pid_alive=1", "j0.group_alive=1", "j0.pids=42,43", "j0.end=1",
                  "j1.rd=1", "j1.exit=0", "j1.pgid=50", "j1.group_alive=0", f"j1.ckpt=0 990 10 {evil}", "j1.end=1",
                  "h.end=1")
    host = parse("h", text, T)
    a, b = host.jobs["job_a"], host.jobs["job_b"]
    assert verdict(a).kind == "running" and a.exit_raw is None
    assert b.checkpoint is not None and b.checkpoint.name == evil and verdict(b).state is JobState.succeeded


def test_garbage_values_are_noted_on_their_job_and_never_raise() -> None:
    text = answer("h.now=1000", "h.proc_ok=1", "h.gpus=\x1b]52;c;x\x07,notanumber,,\n@@meta\nhostname=evil",
                  "j0.rd=1", "j0.pgid=12\r@@job", "j0.pid=7", "j0.pid_alive=1", "j0.ckpt=0 notafloat 1 z",
                  "j0.log=abc def", "j0.log_new=0 !!!notbase64", "j0.out=0 1 4096 x y z w ext4", "j0.end=1",
                  "j1.rd=1", "j1.exit=0", "j1.pgid=9", "j1.group_alive=0", "j1.end=1", "j7.exit=0", "jx.exit=0",
                  "nonsense", "=", "h.end=1")
    host = parse("h", text, T)
    a, b = host.jobs["job_a"], host.jobs["job_b"]
    assert {e.split(" ")[1] for e in a.errors} == {"pgid", "ckpt", "log", "log_new", "out"}
    assert verdict(a).kind == "running"  # its pid is alive; the garbage is only noted as evidence
    assert any("unreadable" in e for e in verdict(a).evidence)
    assert b.errors == [] and verdict(b).state is JobState.succeeded
    assert all("\x1b" not in uuid for uuid in host.gpus)


def test_an_answer_cut_short_proves_nothing_for_the_jobs_it_did_not_finish() -> None:
    log = base64.b64encode(b"step 1\n").decode()
    text = answer("h.now=1000", "h.proc_ok=1", "j0.rd=1", "j0.exit=0", "j0.group_alive=0", "j0.end=1",
                  "j1.rd=1", f"j1.log_new=0 {log}")[:-3]
    host = parse("h", text, T)
    assert not host.complete
    assert verdict(host.jobs["job_a"]).state is JobState.succeeded
    assert verdict(host.jobs["job_b"]).kind == "unknown"


def _obs(**kw: object) -> JobObservation:
    base: dict[str, object] = {"key": "j", "backend": "nohup", "complete": True, "proc_ok": True, "run_dir": True,
                               "pgid": 77}
    base.update(kw)
    return JobObservation(**base)  # type: ignore[arg-type]


def test_the_precedence_of_group_cancel_record_and_exit_code() -> None:
    assert verdict(_obs(group_alive=True, exit_raw="0", exit_code=0)).kind == "running"
    assert verdict(_obs(group_alive=True, cancelled="t KILL")).kind == "running"
    cancelled = verdict(_obs(exit_raw="143 TERM", exit_code=143, exit_signal="TERM", cancelled="t TERM"))
    assert (cancelled.state, cancelled.exit_code) == (JobState.cancelled, 143)
    # a cancel that found the job already gone leaves its own exit code in charge
    assert verdict(_obs(exit_raw="0", exit_code=0, cancelled="t gone")).state is JobState.succeeded
    assert verdict(_obs(exit_raw="1", exit_code=1)).state is JobState.failed
    assert verdict(_obs(cancelled="t gone")).state is JobState.cancelled
    assert verdict(_obs()).state is JobState.lost
    assert verdict(_obs(exit_raw="zero", exit_code=None)).kind == "unknown"
    assert verdict(_obs(proc_ok=False, exit_raw="0", exit_code=0)).kind == "unknown"
    missing = verdict(_obs(run_dir=False))
    assert missing.kind == "gone" and missing.run_dir_missing
    assert verdict(_obs(backend="tmux", session=True)).kind == "running"
    assert verdict(_obs(complete=False, exit_raw="0", exit_code=0)).kind == "unknown"


def test_stall_follows_the_jobs_own_cadence_above_the_floor() -> None:
    from mcp_gpu.triage.progress import silence, stall_allowance

    assert stall_allowance(0.5) == 120  # a fast job: the floor, not ten minutes
    assert stall_allowance(600) == 3000  # a line every 10 min: five of its own intervals
    assert stall_allowance(0.5, floor_s=3) == 3  # a launch may set its floor low
    assert stall_allowance(None) == 600  # no interval seen yet: patient
    assert [silence(q, 0.5, 3) for q in (0.5, 2.5, 3.5)] == ["ok", "silent", "stalled"]
    assert silence(1500, 600) == "silent" and silence(3100, 600) == "stalled"


def test_old_handle_and_patrol_rows_still_load_and_are_written_typed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from mcp_gpu.backends.observe import target_of
    from mcp_gpu.lifecycle.patrol_eval import PatrolMemory
    from mcp_gpu.models import JobRecord, iso
    from mcp_gpu.store import Store
    from mcp_gpu.store import jobs as jobs_repo

    store = Store(tmp_path / "state.db")
    now = iso()
    rec = JobRecord(id="job_0123456789", host="h", name="old", backend="tmux", state=JobState.running,
                    command="true\n", workdir="/w", run_dir="/r/job_0123456789", created_at=now, updated_at=now,
                    spec={"outputs": ["ck"], "options": {"stall_floor_s": 5}})
    jobs_repo.insert(store, rec)
    with store.atomic() as conn:  # a row as an older release wrote it
        conn.execute("UPDATE jobs SET handle_json=?, last_patrol_json=? WHERE id=?",
                     (json.dumps({"backend": "tmux", "socket": "s1", "session": "job_0123456789", "pgid": 42,
                                  "grace_s": 10}),
                      json.dumps({"state": "running", "cadence_s": 0.5, "progress": {"step": 3}, "seen": ["a"]}),
                      rec.id))
    got = jobs_repo.get(store, rec.id)
    t = target_of(got)
    assert (t.tmux_socket, t.tmux_session, t.outputs, t.workdir) == ("s1", "job_0123456789", ("ck",), "/w")
    assert got.job_handle.pgid == 42 and got.request.stall_floor == 5
    mem = PatrolMemory.of(got.last_patrol)
    assert mem.progress is not None and mem.progress.step == 3 and mem.seen == ["a"]
    jobs_repo.update(store, rec.id, handle=got.handle)  # written back: one spelling
    stored = json.loads(store.query("SELECT handle_json FROM jobs WHERE id=?", (rec.id,))[0][0])
    assert stored["tmux_socket"] == "s1" and "socket" not in stored
    assert PatrolMemory.of({"progress": "garbage", "cause": 3}).progress is None
