"""Registers prompts/*.md as MCP prompts.

Each file has a small TOML head between `+++` lines (title, description, [[arguments]] with name, description,
required, default) and a Markdown body in which `{name}` stands for an argument. Only declared names are
substituted, so other braces in the body are left alone. The directory is found like the profiles'
(MCP_GPU_PROMPTS_DIR overrides it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import MCPError
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Message, Prompt, PromptArgument
from mcp.types import INVALID_PARAMS
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_gpu import frontmatter
from mcp_gpu.errors import ConfigError

ENV_DIR = "MCP_GPU_PROMPTS_DIR"


class ArgumentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str
    required: bool = False
    default: str = ""


class PromptHead(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str
    description: str
    arguments: list[ArgumentSpec] = Field(default_factory=list)


@dataclass(frozen=True)
class PromptFile:
    name: str
    head: PromptHead
    body: str

    def render(self, values: dict[str, str]) -> str:
        specs = {a.name: a for a in self.head.arguments}
        missing = [n for n, a in specs.items() if a.required and not (values.get(n) or "").strip()]
        if missing:
            raise ValueError(f"prompt {self.name!r} needs: {', '.join(missing)}")

        def sub(m: re.Match[str]) -> str:
            spec = specs[m.group(1)]
            value = values.get(spec.name)
            return value if value not in (None, "") else spec.default

        if not specs:
            return self.body
        pattern = re.compile(r"\{(" + "|".join(map(re.escape, specs)) + r")\}")
        return pattern.sub(sub, self.body)


def prompts_dir() -> Path:
    return frontmatter.data_dir("prompts", ENV_DIR)


def load_prompt(path: Path) -> PromptFile:
    head_raw, body = frontmatter.split(path.read_text(encoding="utf-8"), path.name)
    try:
        head = PromptHead.model_validate(head_raw)
    except ValidationError as exc:
        field = frontmatter.field_path(exc.errors()[0]["loc"])
        raise ConfigError(f"{path.name}: field {field}: {exc.errors()[0]['msg']}",
                          data={"file": path.name, "field": field}) from None
    for arg in head.arguments:
        if "{" + arg.name + "}" not in body:
            raise ConfigError(f"{path.name}: argument {arg.name!r} is never used as {{{arg.name}}} in the body",
                              data={"file": path.name, "field": f"arguments.{arg.name}"})
    return PromptFile(name=path.stem, head=head, body=body)


def all_prompts() -> list[PromptFile]:
    return [load_prompt(p) for p in sorted(prompts_dir().glob("*.md")) if not p.name.startswith("_")]


class _FilePrompt(Prompt):
    """The SDK reports a missing required argument as a bare internal error; say which one instead."""

    async def render(self, arguments: dict[str, Any] | None, context: Any) -> Any:
        missing = [a.name for a in self.arguments or [] if a.required and not (arguments or {}).get(a.name)]
        if missing:
            raise MCPError(INVALID_PARAMS, f"prompt {self.name!r} needs the argument(s): {', '.join(missing)}")
        rendered: list[Message] | Any = await super().render(arguments, context)
        return rendered


def _as_prompt(pf: PromptFile) -> Prompt:
    def render(**values: str) -> str:
        return pf.render(values)

    return _FilePrompt(name=pf.name, title=pf.head.title, description=pf.head.description, fn=render, context_kwarg=None,
                  arguments=[PromptArgument(name=a.name, description=a.description, required=a.required)
                             for a in pf.head.arguments])


def register_all(server: MCPServer) -> None:
    for pf in all_prompts():
        server.add_prompt(_as_prompt(pf))
