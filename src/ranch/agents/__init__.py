"""Things that answer messages. Every kind implements `ranch.agents.base.Agent`."""
