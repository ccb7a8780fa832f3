"""Lopen as an MCP server (a face, like the CLI and the TUI): ``lopen.mcp.server``."""
