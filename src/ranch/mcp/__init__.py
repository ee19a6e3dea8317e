"""MCP both ways: MCP servers as tools for llm agents (client), ranch agents as MCP tools (server)."""
