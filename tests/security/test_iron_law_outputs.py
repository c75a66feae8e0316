"""Required outputs fixed at launch (attack 3 and its variants), through the real MCP client on the loopback sshd.

A decoy manifest cannot stand in for a corrupt checkpoint: verify_artifacts(paths=...) only ADDS to what the job
must keep. A job that wrote nothing does not trap the user: the gate says so, and only the phrase a human
types can accept it.
"""
# ruff: noqa: F811  (fixtures imported from tests.teardown_helpers are redefined as parameters)

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_gpu.server import build_server
from tests.fake_providers import FakeCloud
from tests.jobhelpers import wait_until
from tests.teardown_helpers import IID, Box, box, cloud, destroys  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio


def text(r: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in r.content)


def corrupt_safetensors(path: Path) -> None:
    """A header that promises 64 bytes of F32 data the file does not hold: the load check calls it corrupt."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [16], "data_offsets": [0, 64]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 8)


async def test_attack_3_a_decoy_path_cannot_stand_in_for_a_corrupt_checkpoint(box: Box, cloud: FakeCloud) -> None:
    job = box.job()
    out = box.outputs(job)
    for f in out.iterdir():
        f.unlink()
    corrupt_safetensors(out / "model.safetensors")
    decoy = box.root / "decoy"
    decoy.mkdir()
    (decoy / "tiny.json").write_text('{"ok": true}')
    async with Client(build_server(app=box.app)) as c:
        honest = await c.call_tool("verify_artifacts", {"job_id": job.id})
        assert honest.structured_content["all_ok"] is False
        forged = await c.call_tool("verify_artifacts", {"job_id": job.id, "paths": [str(decoy)]})
        # the decoy is ADDED to the job's required outputs: the corrupt checkpoint is still in the verdict
        assert forged.structured_content["all_ok"] is False
        assert any(f["result"] == "corrupt" for f in forged.structured_content["files"])
        loose = await c.call_tool("verify_artifacts", {"host": "box", "paths": [str(decoy)]})
        assert loose.structured_content["all_ok"] is True  # a manifest of something else, bound to no job
        r = await c.call_tool("request_teardown", {"host": "box", "reason": "done"})
        if not r.is_error:
            await c.call_tool("confirm_teardown", {"token": r.structured_content["token"],
                                                   "confirmation": r.structured_content["phrase"]})
    assert r.is_error and "not all_ok" in text(r)
    assert destroys(cloud) == []


async def test_a_manifest_that_skips_a_required_output_does_not_count(box: Box, cloud: FakeCloud) -> None:
    """A manifest recorded for the job over other paths (an older client, a hand-made row) covers nothing."""
    job = box.job()
    box.verify(job)
    from mcp_gpu.artifacts.listing import Newest
    from mcp_gpu.artifacts.manifest import Manifest, record_manifest

    elsewhere = str(box.root / "elsewhere")
    record_manifest(box.app.store, Manifest(job=job.id, host="box", dest=str(box.root / "p2"), paths=[elsewhere],
                                            all_ok=True, checked=True, counts={"ok": 1}, bytes_total=1,
                                            newest_remote_checkpoint=Newest(name=f"{elsewhere}/x.pt", mtime=1),
                                            files=[]))
    async with Client(build_server(app=box.app)) as c:
        r = await c.call_tool("request_teardown", {"host": "box", "reason": "done"})
    assert r.is_error and "does not cover its required outputs" in text(r) and str(box.outputs(job)) in text(r)
    assert destroys(cloud) == []


async def test_a_job_that_wrote_nothing_is_said_plainly_and_only_the_phrase_accepts_it(
        box: Box, cloud: FakeCloud) -> None:
    work = box.root / "work"
    work.mkdir(parents=True)
    async with Client(build_server(app=box.app)) as c:
        launched = await c.call_tool("launch_detached", {
            "host": "box", "command": "echo hello", "workdir": str(work), "name": "nothing", "probe_s": 5,
            "run_root": str(box.root / "runs"), "backend": "nohup"})
        assert not launched.is_error, text(launched)
        jid = launched.structured_content["job_id"]

        async def ended() -> bool:
            jobs = (await c.call_tool("job_list", {})).structured_content["jobs"]
            return any(j["job_id"] == jid and j["state"] == "succeeded" for j in jobs)

        await wait_until(ended, what="the job to finish")
        v = await c.call_tool("verify_artifacts", {"job_id": jid})
        assert v.structured_content["all_ok"] is True  # its logs arrived; its checkpoints dir never existed
        r = await c.call_tool("request_teardown", {"host": "box", "reason": "done"})
        assert r.is_error and "wrote nothing under its required outputs" in text(r)
        assert f"job {jid} keeps nothing" in text(r)
        ok = await c.call_tool("request_teardown", {"host": "box", "reason": "done", "accept_loss": True})
    assert not ok.is_error, text(ok)
    assert ok.structured_content["phrase"] == f"destroy vastai {IID} and accept that job {jid} keeps nothing"
    assert destroys(cloud) == []


async def test_required_outputs_cannot_be_rewritten_in_the_registry(box: Box) -> None:
    import sqlite3

    from mcp_gpu.store import jobs

    job = box.job()
    with pytest.raises(sqlite3.IntegrityError, match="fixed at launch"):
        jobs.update(box.app.store, job.id, spec={**job.spec, "outputs": [str(box.root / "decoy")]})
    assert jobs.get(box.app.store, job.id).spec["outputs"] == job.spec["outputs"]
    jobs.update(box.app.store, job.id, spec={**job.spec, "note": "other fields may change"})
