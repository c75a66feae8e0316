"""Red team: verify_artifacts writes where the agent says (`dest`). Pulled files must never land in the server's
state dir (outside its artifacts folder) or over a provider key file: a remote folder named like the state dir,
pulled into its parent, would replace the TOTP secret with one the agent knows (or the HTTP token, the audit head)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_gpu import totp
from mcp_gpu.app import App
from tests.security.human_gate_helpers import agent, text

pytestmark = pytest.mark.anyio

ATTACKER_SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"


@pytest.mark.parametrize("where", ["parent", "home", "home-via-dotdot", "symlink"])
async def test_verify_artifacts_cannot_write_into_the_state_dir(app: App, tmp_path: Path, where: str) -> None:
    home = app.settings.home
    real_secret = totp.enrol(home)
    evil = tmp_path / "evil" / home.name
    evil.mkdir(parents=True)
    (evil / "totp.key").write_text(ATTACKER_SECRET)
    (evil / "http.token").write_text("agent-knows-this")
    link = tmp_path / "innocent-looking"
    link.symlink_to(home)
    paths, dest = {
        "parent": ([str(evil)], str(home.parent)),
        "home": ([str(evil / "totp.key")], str(home)),
        "home-via-dotdot": ([str(evil / "totp.key")], str(home / "artifacts" / "..")),
        "symlink": ([str(evil / "totp.key")], str(link)),
    }[where]
    async with agent(app) as c:
        r = await c.call_tool("verify_artifacts", {"host": "local", "paths": paths, "dest": dest})
    assert (home / "totp.key").read_text().strip() == real_secret
    assert not (home / "http.token").exists() or (home / "http.token").read_text() != "agent-knows-this"
    assert not any(p.name == "totp.key" for p in home.rglob("totp.key") if p.parent != home)
    assert r.is_error and "state dir" in text(r), text(r)


async def test_verify_artifacts_may_still_pull_into_the_artifacts_folder(app: App, tmp_path: Path) -> None:
    src = tmp_path / "outputs"
    src.mkdir()
    (src / "metrics.json").write_text('{"loss": 1.0}')
    async with agent(app) as c:
        r = await c.call_tool("verify_artifacts", {"host": "local", "paths": [str(src)],
                                                   "dest": str(app.settings.artifacts_dir / "mine")})
    assert not r.is_error, text(r)
    assert (app.settings.artifacts_dir / "mine" / "outputs" / "metrics.json").exists()


@pytest.mark.parametrize("what", ["state-dir", "key-file", "parent-of-state-dir", "symlink-to-key"])
async def test_verify_artifacts_does_not_copy_the_state_dir_out_of_hiding(app: App, tmp_path: Path, what: str) -> None:
    """Pulling from `local` copies files to a dest a smoke can read: the TOTP secret (codes in unattended mode),
    the HTTP token and the registry must not be a source."""
    home = app.settings.home
    totp.enrol(home)
    link = tmp_path / "outputs-link"
    link.symlink_to(home / "totp.key")
    src = {"state-dir": str(home), "key-file": str(home / "totp.key"), "parent-of-state-dir": str(home.parent),
           "symlink-to-key": str(link)}[what]
    dest = tmp_path.parent / f"{tmp_path.name}-pulled-{what}"
    async with agent(app) as c:
        r = await c.call_tool("verify_artifacts", {"host": "local", "paths": [src], "dest": str(dest)})
    assert not [p for p in dest.rglob("*") if p.name in ("totp.key", "registry.sqlite3")] if dest.exists() else True
    assert r.is_error and "state dir" in text(r), text(r)
