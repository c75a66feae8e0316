"""A lean tools/list: dedented descriptions, shallow output schemas without titles, structured content intact."""

from __future__ import annotations

import json

import jsonschema
import pytest
from mcp import Client

from mcp_gpu.app import App
from mcp_gpu.server import build_server
from mcp_gpu.tool_list import drop_titles, shallow_schema

pytestmark = pytest.mark.anyio


async def test_tools_list_is_lean_and_structured_content_still_arrives(app: App) -> None:
    async with Client(build_server(app=app)) as c:
        listing = await c.list_tools()
        tools = {t.name: t for t in listing.tools}
        for t in tools.values():
            assert t.description and "\n    " not in t.description, t.name  # no source indentation
            if t.output_schema is not None:
                assert "$defs" not in t.output_schema and "$ref" not in json.dumps(t.output_schema), t.name
                assert '"title": "' not in json.dumps(t.output_schema), t.name
            assert '"title": "' not in json.dumps(t.input_schema), t.name
        size = len(json.dumps(listing.model_dump(mode="json", by_alias=True, exclude_none=True),
                              separators=(",", ":")))
        assert size < 40_000, size  # 55 k for 15 tools before; ~37 k for 20 now: a budget, so a regression shows

        audit = tools["audit_env"].output_schema
        assert audit is not None and {"verdict", "summary", "findings", "gpus", "disks"} <= set(audit["properties"])
        r = await c.call_tool("audit_env", {"host": "local"})
        assert not r.is_error and r.structured_content is not None
        assert r.structured_content["findings"] is not None and "memory" in r.structured_content
        jsonschema.validate(r.structured_content, audit)  # what is published still describes what is sent
        state = tools["launch_detached"].output_schema["properties"]["state"]  # type: ignore[index]
        assert "running" in state["enum"] and state["type"] == "string"  # an enum stays an enum
        hl = await c.call_tool("host_list", {})
        assert hl.structured_content is not None and "hosts" in hl.structured_content
        schema = tools["host_list"].output_schema
        assert schema is not None
        jsonschema.validate(hl.structured_content, schema)


def test_shallow_schema_keeps_the_top_level() -> None:
    full = {"type": "object", "title": "R", "$defs": {"F": {"type": "object", "properties": {"x": {"type": "int"}}},
                                                      "S": {"type": "string", "enum": ["a", "b"], "title": "S"}},
            "properties": {"ok": {"type": "boolean", "title": "Ok", "description": "passed"},
                           "items": {"type": "array", "items": {"$ref": "#/$defs/F"}},
                           "one": {"anyOf": [{"$ref": "#/$defs/F"}, {"type": "null"}], "default": None},
                           "title": {"type": "string", "title": "Title"},
                           "state": {"$ref": "#/$defs/S", "description": "where it is"},
                           "states": {"type": "array", "items": {"$ref": "#/$defs/S"}}},
            "required": ["ok"]}
    assert shallow_schema(full) == {
        "type": "object", "required": ["ok"],
        "properties": {"ok": {"type": "boolean", "description": "passed"},
                       "items": {"type": "array", "items": {"type": "object"}},
                       "one": {"anyOf": [{"type": "object"}, {"type": "null"}], "default": None},
                       "title": {"type": "string"},
                       "state": {"type": "string", "enum": ["a", "b"], "description": "where it is"},
                       "states": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}}}
    assert drop_titles({"title": "X", "properties": {"title": {"title": "T", "type": "string"}}}) == \
        {"properties": {"title": {"type": "string"}}}
