"""mcp-gpu: deploy, watch, debug and safely tear down long GPU jobs on machines you rent or reach over SSH."""

__version__ = "0.1.0"
__all__ = ["__version__"]
