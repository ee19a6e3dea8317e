"""Per-conversation memory is bounded in bytes: team transcripts (per conversation and per team),
the task core's cache of recent tasks, and an llm agent's memory per context.

Deterministic: the bytes each structure holds are counted, not the process's RSS.
"""

from __future__ import annotations

import anyio
import pytest
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus

from _support import probes
from _support.sdk import user_message
from ranch.agents.base import CONTEXT_PART_KEY, Call
from ranch.agents.llm.agent import ChatMemory
from ranch.catalog.registry import Registry
from ranch.config import parse_config
from ranch.routing.context import Conversations
from ranch.routing.team import Team
from ranch.tasks.run import RecentTasks
from ranch.wire.client import ClientPool

pytestmark = pytest.mark.anyio

YAML = """
agents:
  - {id: first, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "first: {text}", route: second}}
  - {id: second, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "ok", route: user}}
teams:
  - {id: pair, members: [first, second], default_agent: first}
"""
KB = 1000


def team(conversations: Conversations) -> Team:
    built = Registry(parse_config(YAML), ClientPool()).get("pair")
    assert isinstance(built, Team)
    built.conversations = conversations
    return built


async def turn(pair: Team, text: str, context_id: str, owner: str = "pair/") -> TaskState:
    state = TaskState.TASK_STATE_UNSPECIFIED
    with anyio.fail_after(30):
        async for event in pair.run(user_message(text, context_id=context_id), Call(owner=owner)):
            if hasattr(event, "status"):
                state = event.status.state
    return state


def shown_to_second() -> str:
    """The context part the second member was shown in its latest hop."""
    latest = probes.RECEIVED["second"][-1]
    parts = [p.text for p in latest.parts if p.HasField("metadata") and CONTEXT_PART_KEY in p.metadata.fields]
    return parts[0] if parts else ""


async def test_one_conversation_keeps_at_most_its_bytes_and_the_newest_turns() -> None:
    pair = team(Conversations(per_conversation=200 * KB, max_bytes=10_000 * KB))
    for number in range(30):
        text = f"turn-{number} " + "x" * 50 * KB
        assert await turn(pair, text, "ctx") == TaskState.TASK_STATE_COMPLETED
        conversation = pair.conversations.get("pair/", "ctx")
        assert conversation.size <= 200 * KB
        assert pair.conversations.size == conversation.size
        assert f"user: turn-{number} " in shown_to_second()  # the newest turn is still there
    assert conversation.dropped > 0 and conversation.entries[0].text.startswith(("turn-", "first: turn-"))


async def test_a_team_keeps_at_most_its_bytes_dropping_the_least_recently_used() -> None:
    pair = team(Conversations(per_conversation=200 * KB, max_bytes=1_000 * KB))
    for number in range(60):
        assert (
            await turn(pair, f"ctx-{number} " + "y" * 50 * KB, f"ctx-{number}")
            == TaskState.TASK_STATE_COMPLETED
        )
        assert pair.conversations.size <= 1_000 * KB
    assert len(pair.conversations) < 60
    assert sum(c.size for c in pair.conversations._items.values()) == pair.conversations.size

    # the newest conversation still works and remembers its turn ...
    assert await turn(pair, "and then?", "ctx-59") == TaskState.TASK_STATE_COMPLETED
    assert pair.conversations.get("pair/", "ctx-59").entries[0].text.startswith("ctx-59 ")
    # ... the oldest was forgotten: the same context starts afresh
    assert await turn(pair, "and then?", "ctx-0") == TaskState.TASK_STATE_COMPLETED
    assert pair.conversations.get("pair/", "ctx-0").entries[0].text == "and then?"


async def test_a_conversation_in_a_turn_is_never_dropped() -> None:
    conversations = Conversations(per_conversation=100 * KB, max_bytes=150 * KB)
    busy = conversations.get("o", "busy")
    async with busy.lock:
        busy.add("user", "b" * 90 * KB)
        for number in range(5):
            conversations.get("o", f"idle-{number}").add("user", "i" * 90 * KB)
        assert conversations.get("o", "busy") is busy  # still the same conversation, lock and all
    assert conversations.size <= 150 * KB + 90 * KB  # over only by what a turn in flight holds


async def test_an_entry_larger_than_the_conversation_is_cut_and_kept() -> None:
    conversation = Conversations(per_conversation=10 * KB).get("o", "c")
    conversation.add("user", "z" * 50 * KB)
    assert conversation.size <= 10 * KB
    assert conversation.entries[-1].text.endswith("bytes more]")


def _task(number: int, size: int) -> Task:
    message = Message(message_id=f"m{number}", role=Role.ROLE_AGENT, parts=[Part(text="t" * size)])
    return Task(id=f"task-{number}", context_id="c", status=TaskStatus(message=message))


def test_the_recent_task_cache_keeps_at_most_its_bytes() -> None:
    recent = RecentTasks(max_count=1024, max_bytes=1_000 * KB)
    for number in range(100):
        recent.put("owner", _task(number, 95 * KB))
        assert recent.size <= 1_000 * KB
    assert len(recent) < 100
    newest = recent.get("task-99")
    assert newest is not None and newest[0] == "owner"
    assert recent.get("task-0") is None
    recent.put("owner", _task(100, 2_000 * KB))  # larger than the whole cache: not kept
    assert recent.get("task-100") is None and recent.size <= 1_000 * KB


def test_llm_memory_keeps_at_most_its_bytes_per_context_and_in_all() -> None:
    memory = ChatMemory(per_context=100 * KB, max_bytes=1_000 * KB)
    for number in range(50):
        memory.remember(("agent/", f"ctx-{number}"), "q" * 95 * KB, "a" * 95 * KB)
        assert memory.size <= 1_000 * KB
    recalled = memory.recall(("agent/", "ctx-49"))
    assert [m["role"] for m in recalled] == ["user", "assistant"]
    assert sum(len(m["content"]) for m in recalled) <= 100 * KB
    assert memory.recall(("agent/", "ctx-0")) == []
    for _ in range(10):  # one context's exchanges: only the newest within its share
        memory.remember(("agent/", "ctx-49"), "q" * 30 * KB, "a" * 30 * KB)
    assert sum(len(m["content"]) for m in memory.recall(("agent/", "ctx-49"))) <= 100 * KB
