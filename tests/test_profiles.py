"""Platform profiles: every file validates, broken ones name file and field, audit hooks, `mcp-gpu profiles`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mcp_gpu import gotchas, profiles
from mcp_gpu.errors import ConfigError, NotFoundError

REPO = Path(__file__).resolve().parent.parent
EXPECTED = {"autodl", "runpod", "vastai", "lambda", "paperspace", "hengyuan", "matpool", "featurize", "lanrui",
            "generic-ssh", "slurm", "kubernetes", "colab-kaggle", "local"}
API_CREDENTIALS = {"runpod": "RUNPOD_API_KEY", "vastai": "VAST_API_KEY", "lambda": "LAMBDA_API_KEY",
                   "paperspace": "PAPERSPACE_API_KEY"}


def _copy_profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "profiles"
    shutil.copytree(REPO / "profiles", d)
    monkeypatch.setenv("MCP_GPU_PROFILES_DIR", str(d))
    return d


def test_every_platform_has_a_profile_that_loads_and_validates() -> None:
    loaded = {p.name: p for p in profiles.all_profiles()}
    assert set(loaded) == EXPECTED
    for p in loaded.values():
        assert p.head.storage.tiers and p.head.meter_stop.verb
        assert set(p.fact_months()) >= {"meter_stop", "storage", "spot", "teardown", "danger"}


def test_every_api_teardown_names_its_credential_variables_and_verbs() -> None:
    api = {p.name: p for p in profiles.all_profiles() if p.head.teardown.method == "api"}
    assert set(api) == set(API_CREDENTIALS)
    for name, var in API_CREDENTIALS.items():
        assert var in api[name].head.credentials.env
        assert api[name].head.teardown.provider == name
    assert api["runpod"].head.teardown.verbs == ["terminate", "stop"]
    assert api["vastai"].head.teardown.verbs == ["destroy", "stop"]
    assert api["lambda"].head.teardown.verbs == ["terminate"]
    assert api["paperspace"].head.teardown.verbs == ["destroy", "stop"]


def test_console_platforms_carry_exact_manual_steps() -> None:
    for p in profiles.all_profiles():
        if p.head.teardown.method in ("console", "cli"):
            assert len(p.head.teardown.console_steps) >= 2, p.name


def test_profile_gotcha_references_all_exist_in_the_catalogue() -> None:
    cat = gotchas.load_catalogue()
    for p in profiles.all_profiles():
        for gid in p.head.gotchas:
            assert gid in cat.by_id, f"{p.name} references unknown {gid}"


def test_key_platform_facts_are_encoded() -> None:
    autodl = profiles.load_profile("autodl").head
    assert autodl.meter_stop.irreversible is False
    fs = next(t for t in autodl.storage.tiers if t.path == "/root/autodl-fs")
    assert fs.survives_destroy and fs.inode_cap == 200_000
    assert any(c.after_s == 15 * 86400 for c in autodl.danger.clocks)
    runpod = profiles.load_profile("runpod").head
    assert runpod.spot.available and runpod.spot.grace_s == 5
    assert profiles.load_profile("vastai").head.spot.grace_s == 0


def test_unknown_profile_is_not_found_with_the_known_names() -> None:
    with pytest.raises(NotFoundError) as err:
        profiles.load_profile("nimbus")
    assert "runpod" in (err.value.hint or "")


def test_a_corrupted_field_fails_naming_the_file_and_the_field_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _copy_profiles(tmp_path, monkeypatch)
    path = d / "runpod.md"
    path.write_text(path.read_text().replace("irreversible = true", 'irreversible = "sometimes"', 1))
    with pytest.raises(profiles.ProfileError) as err:
        profiles.load_profile("runpod")
    assert isinstance(err.value, ConfigError)
    assert "runpod.md" in err.value.message and "meter_stop.irreversible" in err.value.message
    assert err.value.data["field"] == "meter_stop.irreversible"


def test_a_bad_storage_tier_is_reported_with_its_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _copy_profiles(tmp_path, monkeypatch)
    path = d / "autodl.md"
    path.write_text(path.read_text().replace("inode_cap = 200000", "inode_cap = -5"))
    with pytest.raises(profiles.ProfileError, match=r"autodl\.md.*storage\.tiers\[2\]\.inode_cap"):
        profiles.load_profile("autodl")


def test_a_profile_without_its_head_fence_or_a_body_section_fails_clearly(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    d = _copy_profiles(tmp_path, monkeypatch)
    (d / "lambda.md").write_text("# no head at all\n")
    with pytest.raises(profiles.ProfileError, match=r"lambda\.md.*\+\+\+"):
        profiles.load_profile("lambda")
    vast = d / "vastai.md"
    vast.write_text(vast.read_text().replace("## Daemon", "## Demon"))
    with pytest.raises(profiles.ProfileError, match=r"vastai\.md.*Daemon") as err:
        profiles.load_profile("vastai")
    assert err.value.data["field"] == "body.Daemon"


def test_a_credential_value_instead_of_a_name_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _copy_profiles(tmp_path, monkeypatch)
    path = d / "runpod.md"
    path.write_text(path.read_text().replace('env = ["RUNPOD_API_KEY"]', 'env = ["RUNPOD_API_KEY=rpa_123456789"]'))
    with pytest.raises(profiles.ProfileError, match=r"credentials\.env"):
        profiles.load_profile("runpod")


def test_briefing_teaches_the_danger_clocks_and_survival_in_a_few_lines() -> None:
    lines = profiles.platform_briefing(profiles.load_profile("autodl"))
    text = "\n".join(lines)
    assert 3 <= len(lines) <= 10
    assert "15 days" in text and "(/root/autodl-fs) stop=yes destroy=yes" in text and "关机" in text
    runpod = "\n".join(profiles.platform_briefing(profiles.load_profile("runpod")))
    assert "irreversible" in runpod and "5 s grace" in runpod


def test_briefing_names_each_storage_tier() -> None:
    """Two RunPod tiers share /workspace and survive differently: without names the line contradicts itself."""
    for name in profiles.profile_names():
        prof = profiles.load_profile(name)
        text = "\n".join(profiles.platform_briefing(prof))
        for t in prof.head.storage.tiers:
            assert f"{t.name} ({t.path}) stop=" in text, (name, t.name)
    runpod = "\n".join(profiles.platform_briefing(profiles.load_profile("runpod")))
    assert "volume disk (/workspace) stop=yes destroy=NO" in runpod
    assert "network volume (/workspace) stop=yes destroy=yes" in runpod
    assert "container disk (/) stop=NO destroy=NO" in runpod


def test_checks_flag_a_missing_durable_dir_and_an_inode_cap_near_full() -> None:
    autodl = profiles.load_profile("autodl")
    now = datetime(2026, 7, 1, tzinfo=UTC)
    full = {"/root/autodl-tmp": (10 * 2**30, 1000, 3_000_000), "/root/autodl-fs": (150 * 2**30, 196_000, 10**9)}
    found = {f.cls: f for f in profiles.profile_checks(autodl, full, now=now)}
    assert set(found) == {"inode_exhausted"}
    assert found["inode_exhausted"].severity == "error" and found["inode_exhausted"].gotcha == "universal.U7"
    missing = profiles.profile_checks(autodl, {"/root/autodl-tmp": (10 * 2**30, 1000, 3_000_000)}, now=now)
    assert [f.cls for f in missing] == ["durable_dir_missing"]
    healthy = {"/root/autodl-fs": (150 * 2**30, 20_000, 10**9)}
    assert profiles.profile_checks(autodl, healthy, now=now) == []


def test_facts_older_than_a_year_are_stale_and_become_info_findings() -> None:
    assert profiles.stale_facts(datetime(2026, 12, 1, tzinfo=UTC)) == []
    later = datetime(2027, 7, 2, tzinfo=UTC)
    stale = profiles.stale_facts(later)
    assert {s.profile for s in stale} == EXPECTED and all(s.age_days > 365 for s in stale)
    checks = profiles.profile_checks(profiles.load_profile("local"), {"~/mcp-gpu-runs": (1, 1, 10)}, now=later)
    assert {f.cls for f in checks} == {"stale_profile"} and all(f.severity == "info" for f in checks)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcp_gpu", *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={**os.environ, **(env or {})})


def test_profiles_verb_lists_every_platform_and_stale_lists_old_facts() -> None:
    listing = _cli("profiles", "--json")
    assert listing.returncode == 0, listing.stderr
    assert {r["name"] for r in json.loads(listing.stdout)} == EXPECTED
    fresh = _cli("profiles", "--stale", "--now", "2026-12-01")
    assert fresh.returncode == 0 and "no fact older" in fresh.stdout
    old = _cli("profiles", "--stale", "--now", "2027-08-01")
    assert old.returncode == 1 and "runpod" in old.stdout and "verified 2026-06" in old.stdout


def test_profiles_verb_shows_one_profile_and_reports_a_broken_one_on_stderr(tmp_path: Path) -> None:
    shown = _cli("profiles", "vastai")
    assert shown.returncode == 0 and "destroy" in shown.stdout and "## Teardown and billing" in shown.stdout
    d = tmp_path / "profiles"
    shutil.copytree(REPO / "profiles", d)
    (d / "slurm.md").write_text((d / "slurm.md").read_text().replace('kind = "slurm"', 'kind = "mainframe"'))
    broken = _cli("profiles", "slurm", env={"MCP_GPU_PROFILES_DIR": str(d)})
    assert broken.returncode == 2 and "slurm.md" in broken.stderr and "field kind" in broken.stderr
