"""`python -m mcp_gpu` is the same as the `mcp-gpu` console script."""

from mcp_gpu.cli import main

raise SystemExit(main())
