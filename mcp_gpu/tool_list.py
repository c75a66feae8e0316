"""A lean `tools/list`: what an agent needs to call a tool, and no more.

- Descriptions are dedented (`inspect.cleandoc`): docstrings keep their source indentation otherwise, and an
  agent pays for every space.
- Output schemas are published shallow: each top-level field with its type and description, nested models as
  plain `object`/`array` (their fields are in the structured content and described by the field's text). The
  full model still validates and produces the structured content (the SDK reads `fn_metadata.output_schema`
  live, and the output model stays), so nothing an application receives changes; only the advertisement
  shrinks. pydantic's `title` on every field is dropped from both schemas (it repeats the field name).
"""

from __future__ import annotations

import inspect
from typing import Any

_KEEP = ("type", "description", "enum", "const", "format", "default", "minimum", "maximum")


def _resolve(s: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = s.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref.rsplit("/", 1)[-1])
        if isinstance(target, dict):
            return {**target, **{k: v for k, v in s.items() if k != "$ref"}}
    return s


def _shallow_type(s: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """One property's type: enums and scalars kept (resolved through $defs), nested models as `object`."""
    s = _resolve(s, defs)
    if "$ref" in s or (depth > 0 and "properties" in s):
        return {"type": "object", **({"description": s["description"]} if s.get("description") else {})}
    out: dict[str, Any] = {k: v for k, v in s.items() if k in _KEEP}
    if "anyOf" in s:
        branches = [_shallow_type(b, defs, depth) for b in s["anyOf"]]
        uniq = [b for i, b in enumerate(branches) if b not in branches[:i]]
        out["anyOf"] = uniq
    if s.get("type") == "array":
        items = s.get("items")
        out["items"] = _shallow_type(items, defs, depth + 1) if isinstance(items, dict) else {}
    if s.get("type") == "object" and isinstance(s.get("additionalProperties"), dict):
        out["additionalProperties"] = _shallow_type(s["additionalProperties"], defs, depth + 1)
    if s.get("type") == "object" and "properties" in s:  # a nested model reached at the top: fields not listed
        out.pop("properties", None)
    return out


def shallow_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The top level of a JSON schema: field names, types, descriptions and `required`; no $defs, no titles."""
    out: dict[str, Any] = {"type": schema.get("type", "object")}
    if schema.get("description"):
        out["description"] = inspect.cleandoc(schema["description"])
    props = schema.get("properties")
    defs = schema.get("$defs") or {}
    if isinstance(props, dict):
        out["properties"] = {name: _shallow_type(p, defs, 1) for name, p in props.items()}
    if schema.get("required"):
        out["required"] = list(schema["required"])
    return out


def drop_titles(schema: Any) -> Any:
    """The schema without pydantic's per-field `title` (it repeats the property name)."""
    if isinstance(schema, dict):
        return {k: drop_titles(v) for k, v in schema.items()
                if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [drop_titles(x) for x in schema]
    return schema


def make_lean(server: Any) -> None:
    """Dedent every tool's description and publish shallow output schemas (see the module doc).

    Reaches the SDK's tool manager (`_tool_manager`): the only way to adjust a registered tool; a test lists
    the tools through a client and fails if this stops taking effect."""
    for tool in server._tool_manager.list_tools():
        if tool.description:
            tool.description = inspect.cleandoc(tool.description)
        # the published input schema only: arguments are validated by the tool's own argument model
        tool.parameters = drop_titles(tool.parameters)
        meta = tool.fn_metadata
        if meta.output_schema is not None:
            meta.output_schema = shallow_schema(meta.output_schema)
            tool.__dict__.pop("output_schema", None)  # drop a cached copy, if one was read already
