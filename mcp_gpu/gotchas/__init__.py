"""The gotcha catalogue (data in `data/*.toml`, validated by `catalogue`) and error lookup (`matching`)."""

from __future__ import annotations

from mcp_gpu.gotchas.catalogue import Catalogue, Gotcha, Signal, load_catalogue
from mcp_gpu.gotchas.matching import GotchaMatch, LookupResult, lookup

__all__ = ["Catalogue", "Gotcha", "GotchaMatch", "LookupResult", "Signal", "get", "load_catalogue", "lookup"]


def get(key: str) -> Gotcha:
    """One entry by id (`universal.U9`, or a bare `U9` when unambiguous); NotFoundError otherwise."""
    return load_catalogue().get(key)
