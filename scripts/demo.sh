#!/usr/bin/env bash
# The main job on a fresh machine: build the environment if needed, then run the full-lifecycle demo on
# `local` (this machine) through the MCP server: audit → (phase 1, SSH, skipped: `local` needs none) → smoke →
# launch → patrol → verify → teardown request, where the demo plays the human. Each run gets a fresh state dir
# under $MCP_GPU_HOME/demo/ (older runs are removed); the demo ends by printing the `mcp-gpu status` command
# that shows its jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "mcp-gpu needs Python >= 3.11")'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e . numpy
exec .venv/bin/mcp-gpu demo "$@"
