"""The job registry: every launched job with its backend handle, state and event history.

Readers (patrol, verify, teardown) use `get`, `find_by_name`, `list_jobs`, `events`; writers use `insert`,
`update`, `set_state` and `append_event`. Only the NAMES of secret env vars are ever stored (`spec`).
Job ids are `job_` + 10 hex characters.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from typing import Any

from pydantic import BaseModel, Field

from mcp_gpu.errors import ConfigError, NotFoundError
from mcp_gpu.models import JobHandle, JobRecord, JobState, iso
from mcp_gpu.store import Store

_COLUMNS = ("id, host, name, backend, state, attempt, previous_id, command, workdir, run_dir, script_sha, "
            "handle_json, spec_json, created_at, updated_at, finished_at, exit_code, exit_signal, log_offset, "
            "last_patrol_json")
_UNSET: Any = object()


class JobEvent(BaseModel):
    id: int
    job_id: str
    at: str
    kind: str
    state: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


def new_id() -> str:
    return "job_" + secrets.token_hex(5)


def _row(r: sqlite3.Row) -> JobRecord:
    return JobRecord(
        id=r["id"], host=r["host"], name=r["name"], backend=r["backend"], state=JobState(r["state"]),
        attempt=r["attempt"], previous_id=r["previous_id"], command=r["command"], workdir=r["workdir"],
        run_dir=r["run_dir"], script_sha=r["script_sha"], handle=json.loads(r["handle_json"] or "{}"),
        spec=json.loads(r["spec_json"] or "{}"), created_at=r["created_at"], updated_at=r["updated_at"],
        finished_at=r["finished_at"], exit_code=r["exit_code"], exit_signal=r["exit_signal"],
        log_offset=r["log_offset"], last_patrol=json.loads(r["last_patrol_json"] or "{}"),
    )


def _handle_json(handle: dict[str, Any]) -> str:
    """The handle as typed (`models.JobHandle`: one spelling per field), serialised to the same JSON column.
    Reading accepts old rows (`socket`/`session` for the tmux fields) through `JobHandle.of`."""
    return json.dumps(JobHandle.of(handle).to_json())


def insert(store: Store, rec: JobRecord) -> JobRecord:
    store.execute(
        f"INSERT INTO jobs({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",  # noqa: S608 - fixed columns
        (rec.id, rec.host, rec.name, rec.backend, rec.state.value, rec.attempt, rec.previous_id, rec.command,
         rec.workdir, rec.run_dir, rec.script_sha, _handle_json(rec.handle), json.dumps(rec.spec), rec.created_at,
         rec.updated_at, rec.finished_at, rec.exit_code, rec.exit_signal, rec.log_offset,
         json.dumps(rec.last_patrol)),
    )
    return get(store, rec.id)


ACTIVE = ("launching", "running")


def active_holder(store: Store, host: str, name: str) -> JobRecord | None:
    """The not-yet-finished job that holds `name` on `host`: the claim's job when it is still active, else
    (registries from before claims existed) the newest active job of that name."""
    rows = store.query(f"SELECT {', '.join('j.' + c.strip() for c in _COLUMNS.split(','))} "  # noqa: S608
                       "FROM job_name_claims c JOIN jobs j ON j.id=c.job_id "
                       "WHERE c.host=? AND c.name=? AND j.state IN (?,?)", (host, name, *ACTIVE))
    if rows:
        return _row(rows[0])
    rows = store.query(f"SELECT {_COLUMNS} FROM jobs WHERE host=? AND name=? AND state IN (?,?) "  # noqa: S608
                       "ORDER BY created_at DESC, rowid DESC LIMIT 1", (host, name, *ACTIVE))
    return _row(rows[0]) if rows else None


def claim(store: Store, rec: JobRecord) -> tuple[JobRecord, bool]:
    """Insert `rec` as THE active job called `rec.name` on `rec.host`, atomically across every process that
    shares this registry (one IMMEDIATE transaction: check, insert, claim). Returns `(rec, True)` when it was
    claimed, or `(holder, False)` when another unfinished job holds the name: nothing was inserted and the
    caller hands back the holder (launch stays idempotent by name). A finished holder releases the name."""
    with store.atomic() as conn:
        holder = active_holder(store, rec.host, rec.name)
        if holder is not None:
            return holder, False
        insert(store, rec)
        conn.execute("INSERT INTO job_name_claims(host, name, job_id, claimed_at) VALUES (?,?,?,?) "
                     "ON CONFLICT(host, name) DO UPDATE SET job_id=excluded.job_id, claimed_at=excluded.claimed_at",
                     (rec.host, rec.name, rec.id, iso()))
    return get(store, rec.id), True


def find(store: Store, job_id: str) -> JobRecord | None:
    rows = store.query(f"SELECT {_COLUMNS} FROM jobs WHERE id=?", (job_id,))  # noqa: S608
    return _row(rows[0]) if rows else None


def get(store: Store, job_id: str) -> JobRecord:
    rec = find(store, job_id)
    if rec is None:
        raise NotFoundError(f"no job {job_id!r} in the registry", hint="list jobs with job_list / `mcp-gpu jobs`")
    return rec


def find_by_name(store: Store, host: str, name: str) -> JobRecord | None:
    """The latest attempt of the job called `name` on `host`."""
    rows = store.query(f"SELECT {_COLUMNS} FROM jobs WHERE host=? AND name=? "  # noqa: S608
                       "ORDER BY attempt DESC, created_at DESC, rowid DESC LIMIT 1", (host, name))
    return _row(rows[0]) if rows else None


def resolve(store: Store, ref: str, host: str | None = None) -> JobRecord:
    """A job by id, or by name (latest attempt; the name must be unambiguous across hosts unless `host` is given)."""
    rec = find(store, ref)
    if rec is not None:
        return rec
    sql = f"SELECT {_COLUMNS} FROM jobs WHERE name=?"  # noqa: S608
    params: tuple[Any, ...] = (ref,)
    if host:
        sql += " AND host=?"
        params += (host,)
    rows = store.query(sql + " ORDER BY attempt DESC, created_at DESC, rowid DESC", params)
    if not rows:
        raise NotFoundError(f"no job with id or name {ref!r}", hint="list jobs with job_list / `mcp-gpu jobs`")
    hosts = {r["host"] for r in rows}
    if len(hosts) > 1:
        raise ConfigError(f"job name {ref!r} exists on several hosts: {', '.join(sorted(hosts))}",
                          hint="use the job id, or give the host")
    return _row(rows[0])


def list_jobs(store: Store, *, host: str | None = None, state: str | JobState | None = None,
              name: str | None = None, active: bool | None = None, limit: int | None = None) -> list[JobRecord]:
    """Jobs, newest first. `active=True` keeps launching/running ones, `False` the finished ones."""
    where: list[str] = []
    params: list[Any] = []
    if host:
        where.append("host=?")
        params.append(host)
    if state:
        where.append("state=?")
        params.append(JobState(state).value)
    if name:
        where.append("name=?")
        params.append(name)
    if active is not None:
        where.append("state IN ('launching','running')" if active else "state NOT IN ('launching','running')")
    sql = f"SELECT {_COLUMNS} FROM jobs"  # noqa: S608
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY created_at DESC, rowid DESC"
    if limit:
        sql += f" LIMIT {int(limit)}"
    return [_row(r) for r in store.query(sql, tuple(params))]


def update(store: Store, job_id: str, *, state: JobState | None = None, handle: dict[str, Any] | None = None,
           spec: dict[str, Any] | None = None, run_dir: str | None = None, workdir: str | None = None,
           script_sha: str | None = None, exit_code: Any = _UNSET, exit_signal: Any = _UNSET,
           finished_at: Any = _UNSET, log_offset: int | None = None,
           last_patrol: dict[str, Any] | None = None) -> JobRecord:
    """Change the given fields (None = leave as is; exit_code/exit_signal/finished_at may be set to None)."""
    sets: list[str] = ["updated_at=?"]
    params: list[Any] = [iso()]
    for col, val in (("state", state.value if state else None), ("run_dir", run_dir), ("workdir", workdir),
                     ("script_sha", script_sha), ("log_offset", log_offset),
                     ("handle_json", _handle_json(handle) if handle is not None else None),
                     ("spec_json", json.dumps(spec) if spec is not None else None),
                     ("last_patrol_json", json.dumps(last_patrol) if last_patrol is not None else None)):
        if val is not None:
            sets.append(f"{col}=?")
            params.append(val)
    for col, val in (("exit_code", exit_code), ("exit_signal", exit_signal), ("finished_at", finished_at)):
        if val is not _UNSET:
            sets.append(f"{col}=?")
            params.append(val)
    params.append(job_id)
    with store.atomic() as conn:
        cur = conn.execute(f"UPDATE jobs SET {', '.join(sets)} WHERE id=?", tuple(params))  # noqa: S608
        if cur.rowcount != 1:
            raise NotFoundError(f"no job {job_id!r} in the registry")
    return get(store, job_id)


def append_event(store: Store, job_id: str, kind: str, state: JobState | str | None = None,
                 detail: dict[str, Any] | None = None) -> int:
    st = JobState(state).value if state else None
    return store.execute("INSERT INTO job_events(job_id, at, kind, state, detail_json) VALUES (?,?,?,?,?)",
                         (job_id, iso(), kind, st, json.dumps(detail or {}, default=str)))


def set_state(store: Store, job_id: str, state: JobState, *, kind: str = "state", exit_code: int | None = None,
              exit_signal: str | None = None, detail: dict[str, Any] | None = None) -> JobRecord:
    """Move a job to `state` and record the event in one transaction; finished states stamp finished_at."""
    with store.atomic():
        kwargs: dict[str, Any] = {"state": state}
        if state.finished:
            kwargs.update(exit_code=exit_code, exit_signal=exit_signal, finished_at=iso())
        rec = update(store, job_id, **kwargs)
        append_event(store, job_id, kind, state, detail)
    return rec


def events(store: Store, job_id: str) -> list[JobEvent]:
    rows = store.query("SELECT id, job_id, at, kind, state, detail_json FROM job_events WHERE job_id=? ORDER BY id",
                       (job_id,))
    return [JobEvent(id=r["id"], job_id=r["job_id"], at=r["at"], kind=r["kind"], state=r["state"],
                     detail=json.loads(r["detail_json"] or "{}")) for r in rows]
