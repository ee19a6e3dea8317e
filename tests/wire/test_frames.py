"""SSE frames: an event fanned out to many subscribers is encoded once, each frame keeps its own id."""

from __future__ import annotations

import orjson
from a2a.types import Message, Part, Role, TaskState, TaskStatus, TaskStatusUpdateEvent
from a2a.utils import proto_utils
from google.protobuf.json_format import MessageToDict

from ranch.wire.jsonrpc import _frame


def test_each_subscriber_gets_its_own_id_and_the_same_result() -> None:
    event = TaskStatusUpdateEvent(
        task_id="t",
        context_id="c",
        status=TaskStatus(
            state=TaskState.TASK_STATE_WORKING, message=Message(role=Role.ROLE_AGENT, parts=[Part(text="x")])
        ),
    )
    expected = MessageToDict(proto_utils.to_stream_response(event))
    frames = [orjson.loads(_frame(request_id, event)["data"]) for request_id in ("a", 7, None)]
    assert [frame["id"] for frame in frames] == ["a", 7, None]
    assert all(frame == {"jsonrpc": "2.0", "id": frame["id"], "result": expected} for frame in frames)


def test_a_new_event_is_not_served_from_another_events_encoding() -> None:
    first = Message(role=Role.ROLE_AGENT, message_id="1", parts=[Part(text="one")])
    second = Message(role=Role.ROLE_AGENT, message_id="2", parts=[Part(text="two")])
    assert orjson.loads(_frame(1, first)["data"])["result"]["message"]["messageId"] == "1"
    assert orjson.loads(_frame(1, second)["data"])["result"]["message"]["messageId"] == "2"
