"""Every remote script is a file under mcp_gpu/probes/, checked by shellcheck, assembled by the include loader."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mcp_gpu.probes import assemble, load

PROBES = Path(__file__).resolve().parent.parent / "mcp_gpu" / "probes"
SCRIPTS = sorted(p.relative_to(PROBES).as_posix() for p in PROBES.rglob("*.sh"))
# Scripts not yet under shellcheck (none left); an entry here is an expected failure until it passes.
PENDING: set[str] = set()


def _param(name: str) -> object:
    if name in PENDING:
        return pytest.param(name, marks=pytest.mark.xfail(reason="moved under shellcheck by its owner", strict=False))
    return name


@pytest.mark.parametrize("name", [_param(n) for n in SCRIPTS])
def test_shellcheck_passes(name: str) -> None:
    exe = shutil.which("shellcheck")
    if exe is None:
        pytest.fail("shellcheck is not installed (apt-get install shellcheck; .ci/services.sh installs it)")
    res = subprocess.run([exe, "-s", "bash", "-x", name], cwd=PROBES, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("name", [n for n in SCRIPTS if not n.startswith("lib/")])
def test_assembled_probe_passes_shellcheck_and_has_no_include_left(name: str) -> None:
    text = load(name)
    assert "# include:" not in text
    exe = shutil.which("shellcheck")
    assert exe is not None
    if name in PENDING:
        pytest.xfail("moved under shellcheck by its owner")
    res = subprocess.run([exe, "-s", "bash", "-"], input=text, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout


def test_loader_expands_each_include_once_in_order_and_nested() -> None:
    files = {"main.sh": "# include: lib/a.sh\n# include: lib/b.sh\nmain\n",
             "lib/a.sh": "a1\n# include: lib/c.sh\n", "lib/b.sh": "# include: lib/c.sh\nb1\n", "lib/c.sh": "c1\n"}
    out = assemble("main.sh", files.__getitem__)
    assert out.splitlines() == ["a1", "c1", "# (included above: lib/c.sh)", "b1", "main"]


def test_loader_refuses_cycles_and_unknown_files() -> None:
    cyc = {"m.sh": "# include: lib/x.sh\n", "lib/x.sh": "# include: lib/y.sh\n", "lib/y.sh": "# include: lib/x.sh\n"}
    with pytest.raises(ValueError, match="cycle"):
        assemble("m.sh", cyc.__getitem__)
    with pytest.raises(KeyError):
        assemble("m.sh", {"m.sh": "# include: lib/missing.sh\n"}.__getitem__)
    with pytest.raises(ValueError, match="leaves"):
        load("../wrapper.py")


def test_the_observation_probe_includes_its_libraries() -> None:
    text = load("observe.sh")
    for fn in ("rec()", "proc_snapshot()", "slurm_observe()"):
        assert text.count(fn) == 1, fn
