"""Every gotcha id a finding can carry resolves in the catalogue (gpu://gotchas/{id} opens it)."""

from __future__ import annotations

import re
from pathlib import Path

from mcp_gpu.gotchas.catalogue import load_catalogue
from mcp_gpu.triage import rules

SRC = Path(__file__).resolve().parent.parent / "mcp_gpu"


def test_every_gotcha_id_used_in_code_resolves_in_the_catalogue() -> None:
    cat = load_catalogue()
    used: set[str] = set()
    for path in SRC.rglob("*.py"):
        used |= set(re.findall(r'gotcha="([^"]+)"', path.read_text()))
    used |= {r.gotcha for r in rules.RULES if getattr(r, "gotcha", None)} if hasattr(rules, "RULES") else set()
    missing = sorted(g for g in used if cat.resolve(g) is None)
    assert not missing, f"gotcha ids with no catalogue entry: {missing}"
    assert len(used) > 20
