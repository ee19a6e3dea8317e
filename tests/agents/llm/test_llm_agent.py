"""`kind: llm` against a scripted OpenAI-compatible server, driven by the real `openai` client.

Streaming to an A2A client, retries, a provider that is down, secrets kept out of errors,
and memory per context.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.types import Task, TaskState
from google.protobuf.json_format import MessageToDict

from _support.fake_openai import FakeOpenAI, error, text
from _support.hubkit import serve_ranch
from _support.sdk import sdk_client, send, user_message
from _support.servers import free_port
from ranch.agents.base import Call, text_of
from ranch.agents.fold import collect
from ranch.agents.llm import LlmAgent
from ranch.catalog.build import build_agent
from ranch.config import parse_config
from ranch.exceptions import AgentError, AgentUnavailable
from ranch.wire.client import ClientPool

pytestmark = pytest.mark.anyio


def llm_yaml(base_url: str, *, model: str = "solo", extra: str = "") -> str:
    return f"""
agents:
  - id: writer
    kind: llm
    model: {model}
    base_url: {base_url}
    system_prompt: You write short answers.
    retry_count: 2
    timeout: 10
{extra}
"""


def llm_agent(yaml: str) -> LlmAgent:
    agent = build_agent(parse_config(yaml).agents[0], ClientPool())
    assert isinstance(agent, LlmAgent)
    return agent


async def test_tokens_stream_to_an_a2a_client_as_artifact_updates(
    fake: FakeOpenAI, base_url: str, tmp_path: Path
) -> None:
    fake.script("solo", text("Otters hold hands while they sleep", delay=0.01))
    with serve_ranch(llm_yaml(base_url), tmp_path / "t.db") as ranch:
        async with sdk_client(ranch.agent_url("writer"), streaming=True) as client:
            responses = await send(client, user_message("tell me about otters"))
    kinds = [r.WhichOneof("payload") for r in responses]
    updates = [r.artifact_update for r in responses if r.WhichOneof("payload") == "artifact_update"]
    deltas = [u for u in updates if not u.last_chunk]
    assert len(deltas) == 6  # one per streamed word
    assert [u.append for u in deltas] == [False] + [True] * 5
    assert len({u.artifact.artifact_id for u in updates}) == 1
    assert "".join(u.artifact.parts[0].text for u in deltas) == "Otters hold hands while they sleep"
    assert (
        updates[-1].last_chunk and updates[-1].artifact.parts[0].text == "Otters hold hands while they sleep"
    )
    final = responses[-1].status_update
    assert kinds[-1] == "status_update" and final.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(final.status.message) == "Otters hold hands while they sleep"
    request = fake.requests_for("solo")[0]
    assert request["stream"] is True
    assert request["messages"][0] == {"role": "system", "content": "You write short answers."}
    assert request["messages"][-1] == {"role": "user", "content": "tell me about otters"}
    assert "tools" not in request  # no tools configured, no routing: nothing offered


async def test_a_429_with_retry_after_is_retried_and_succeeds(fake: FakeOpenAI, base_url: str) -> None:
    fake.script("solo", error(429, "slow down", retry_after=0.8), text("fine now"))
    async with llm_agent(llm_yaml(base_url)) as agent:
        outcome = await collect(agent, user_message("hi"), Call())
    assert outcome.text == "fine now"
    assert len(fake.requests_for("solo")) == 2
    first, second = fake.arrivals
    assert second - first >= 0.8  # waited as the provider asked, not the default backoff (0.5 s)


async def test_5xx_is_retried_with_backoff_and_gives_up_with_the_providers_message(
    fake: FakeOpenAI, base_url: str
) -> None:
    fake.script("solo", *[error(503, "model overloaded", retry_after=0)] * 3)
    async with llm_agent(llm_yaml(base_url)) as agent:
        with pytest.raises(AgentUnavailable) as caught:
            await collect(agent, user_message("hi"), Call())
    assert len(fake.requests_for("solo")) == 3  # the first try and retry_count=2 retries
    assert str(caught.value) == (
        f"agent 'writer': llm provider at {base_url} answered HTTP 503 after 3 attempts: model overloaded"
    )


async def test_a_provider_that_is_down_fails_the_task_clearly_within_the_timeout(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}/v1"
    with serve_ranch(llm_yaml(down), tmp_path / "t.db") as ranch:
        async with sdk_client(ranch.agent_url("writer")) as client:
            responses = await send(client, user_message("hello?"))
    task = responses[0].task
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert text_of(task.status.message) == (
        f"agent 'writer': llm provider unreachable at {down} (connection refused) after 3 attempts"
    )
    # the provider's own failure after its retries, not the agent's 10 s timeout (AgentTimeout)


async def test_the_api_key_never_reaches_errors(
    fake: FakeOpenAI, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-very-secret-123")
    fake.script("solo", error(401, "Incorrect API key provided: sk-very-secret-123"))
    agent = llm_agent(llm_yaml(base_url, extra="    api_key: ${FAKE_KEY}"))
    async with agent:
        with pytest.raises(AgentError) as caught:
            await collect(agent, user_message("hi"), Call())
    assert fake.headers[-1]["authorization"] == "Bearer sk-very-secret-123"
    assert "sk-very-secret" not in str(caught.value)
    assert str(caught.value) == (
        f"agent 'writer': llm provider at {base_url} rejected the request (HTTP 401): "
        "Incorrect API key provided: ***"
    )
    assert "sk-very-secret" not in repr(parse_config(llm_yaml(base_url, extra="    api_key: ${FAKE_KEY}")))


async def test_api_key_env_names_the_variable(
    fake: FakeOpenAI, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_LLM_KEY", "k-42")
    fake.script("solo", text("ok"))
    async with llm_agent(llm_yaml(base_url, extra="    api_key_env: MY_LLM_KEY")) as agent:
        await collect(agent, user_message("hi"), Call())
    assert fake.headers[-1]["authorization"] == "Bearer k-42"


async def test_each_context_keeps_its_own_conversation(fake: FakeOpenAI, base_url: str) -> None:
    fake.script("solo", text("Hello Ada"), text("Your name is Ada"), text("I do not know"))
    async with llm_agent(llm_yaml(base_url)) as agent:
        await collect(agent, user_message("I am Ada", context_id="c1"), Call())
        await collect(agent, user_message("who am I?", context_id="c1"), Call())
        await collect(agent, user_message("who am I?", context_id="c2"), Call())
    first, second, other = fake.requests_for("solo")
    assert [m["content"] for m in second["messages"][1:]] == ["I am Ada", "Hello Ada", "who am I?"]
    assert [m["content"] for m in other["messages"][1:]] == ["who am I?"]


async def test_another_owner_on_the_same_context_shares_no_memory(fake: FakeOpenAI, base_url: str) -> None:
    fake.script("solo", text("Hello Ada"), text("I do not know"), text("Your name is Ada"))
    async with llm_agent(llm_yaml(base_url)) as agent:
        await collect(agent, user_message("I am Ada", context_id="c1"), Call(owner="writer/ada"))
        await collect(agent, user_message("who am I?", context_id="c1"), Call(owner="writer/eve"))
        await collect(agent, user_message("who am I?", context_id="c1"), Call(owner="writer/ada"))
    _, intruder, owner = fake.requests_for("solo")
    assert [m["content"] for m in intruder["messages"][1:]] == ["who am I?"]
    assert [m["content"] for m in owner["messages"][1:]] == ["I am Ada", "Hello Ada", "who am I?"]


async def test_non_streaming_mode_answers_with_one_artifact(
    fake: FakeOpenAI, base_url: str, tmp_path: Path
) -> None:
    fake.script("solo", text("one piece"))
    with serve_ranch(llm_yaml(base_url, extra="    stream: false"), tmp_path / "t.db") as ranch:
        async with sdk_client(ranch.agent_url("writer")) as client:
            responses = await send(client, user_message("hi"))
    task: Task = responses[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [MessageToDict(p)["text"] for a in task.artifacts for p in a.parts] == ["one piece"]
    assert "stream" not in fake.requests_for("solo")[0]
