"""An `LlmAgent` from its config entry: the provider, the MCP servers, the remote allow-list."""

from __future__ import annotations

import os
from collections.abc import Callable

import httpx

from ranch.agents.base import AgentInfo
from ranch.agents.llm.agent import LlmAgent
from ranch.agents.llm.mcp import McpServer
from ranch.agents.llm.provider import ChatProvider, Sampling
from ranch.agents.llm.remote_tool import RemoteAgentTool, RemoteTarget
from ranch.agents.llm.tools import Toolbox
from ranch.config import LlmAgentConfig
from ranch.policy.egress import guarded_client
from ranch.policy.ssrf import UrlGuard
from ranch.wire.client import ClientPool


def build_llm_agent(config: LlmAgentConfig, info: AgentInfo, pool: ClientPool) -> LlmAgent:
    key = config.api_key.get_secret_value() if config.api_key is not None else None
    if config.api_key_env is not None:
        key = os.environ.get(config.api_key_env) or None
    provider = ChatProvider(
        config.id,
        Sampling(
            model=config.model,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            stream=config.stream,
        ),
        base_url=config.base_url,
        api_key=key,
        headers=config.headers,
        retry_count=config.retry_count,
        request_timeout=config.request_timeout,
        http_client=pool.new_client() if pool.guarded else None,
    )
    targets = [
        RemoteTarget(url=entry) if isinstance(entry, str) else RemoteTarget(**entry.model_dump())
        for entry in config.remote_agents
    ]
    remote = RemoteAgentTool(config.id, targets, pool, timeout=config.timeout) if targets else None
    http = pool.new_client if pool.guarded else None  # a tenant's MCP servers: guarded connections
    toolbox = Toolbox(config.id, [McpServer(server, http) for server in config.mcp_servers], remote)
    return LlmAgent(
        info,
        provider,
        toolbox,
        system_prompt=config.system_prompt,
        max_tool_rounds=config.max_tool_rounds,
        fetch=image_fetcher(config, pool),
    )


def image_fetcher(config: LlmAgentConfig, pool: ClientPool) -> Callable[[], httpx.AsyncClient]:
    """Opens the client that reads a message's image URLs. The URL is the caller's, whoever owns the
    agent, so every connection is judged: a tenant's agent through its pool's guard, the operator's
    (config, superuser) through a guard of its own that lets loopback and private addresses through
    only when the config says `fetch_private_urls`."""
    if pool.guarded:
        return pool.new_client
    guard = UrlGuard(allow_loopback=config.fetch_private_urls)
    return lambda: guarded_client(guard)
