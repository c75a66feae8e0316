#!/usr/bin/env bash
# The whole test suite, from a fresh Linux machine: installs the system packages the real-component tests
# need (OpenSSH server, tmux, rsync, single-node Slurm with MariaDB accounting), starts those services,
# builds the Python environments, then runs ruff, mypy --strict and pytest. Run as root (CI is root);
# as a normal user the root-only tests skip with their reason.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "mcp-gpu needs Python >= 3.11")'

# 1. system packages and services (sshd for tests is started per test session by the fixtures)
if [ "$(id -u)" = 0 ]; then
  bash .ci/services.sh up | tee /tmp/mcp-gpu-services.out
  conf=$(sed -n 's/^SLURM_CONF=//p' /tmp/mcp-gpu-services.out | tail -n 1)
  [ -n "$conf" ] && export MCP_GPU_TEST_SLURM_CONF="$conf"
  trap 'bash .ci/services.sh down >/dev/null 2>&1 || true' EXIT
else
  echo "not root: skipping apt installs and Slurm; root-only tests will skip" >&2
fi

# 2. Python environments: the project, and a separate one with torch 2.13 CPU for checkpoint tests
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
if [ ! -x .venv-torch/bin/python ] && ls /opt/wheels/torch-2.13.0+cpu* >/dev/null 2>&1; then
  "$PY" -m venv .venv-torch && .venv-torch/bin/pip install -q --disable-pip-version-check torch==2.13.0 numpy safetensors
fi
[ -x .venv-torch/bin/python ] && export MCP_GPU_TORCH_PYTHON="$PWD/.venv-torch/bin/python"

# 3. static checks, then the tests (real sshd, tmux, Slurm, SQLite; fakes only for provider APIs and GPUs)
.venv/bin/ruff check mcp_gpu tests benchmarks
.venv/bin/mypy
.venv/bin/pytest -q "$@"
