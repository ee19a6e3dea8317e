"""`kind: llm`: OpenAI-compatible chat models that stream, call tools (MCP, remote agents) and route."""

from ranch.agents.llm.agent import MESSAGE_TYPE_KEY, TOOL_CALL, TOOL_RESULT, LlmAgent
from ranch.agents.llm.build import build_llm_agent

__all__ = ["MESSAGE_TYPE_KEY", "TOOL_CALL", "TOOL_RESULT", "LlmAgent", "build_llm_agent"]
