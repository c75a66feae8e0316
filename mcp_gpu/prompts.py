"""Registers prompts/*.md as MCP prompts (bodies are Markdown with {argument} placeholders)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer


def register_all(server: MCPServer) -> None:
    return None
