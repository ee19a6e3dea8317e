"""ranch's fast JSON <-> protobuf paths give exactly what the protobuf library gives.

`codec.to_json` must equal `MessageToDict`, and `codec.parse` must equal `ParseDict`
(same protobuf, or both refuse), for any A2A payload: hypothesis generates them,
bounded in examples so the suite stays fast.
"""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import (
    Artifact,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError, SerializeToJsonError
from google.protobuf.struct_pb2 import Value
from hypothesis import given
from hypothesis import strategies as st

from _support.fuzzkit import fuzzing
from ranch.wire import codec

SETTINGS = fuzzing(150)

text = st.text(max_size=20)
keys = st.text(min_size=1, max_size=8)
json_scalar = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=8,
)
json_object = st.dictionaries(keys, json_value, max_size=4)


@st.composite
def parts(draw: st.DrawFn) -> Part:
    kind = draw(st.sampled_from(["text", "raw", "url", "data"]))
    part = Part()
    if kind == "text":
        part.text = draw(text)
    elif kind == "raw":
        part.raw = draw(st.binary(max_size=16))
    elif kind == "url":
        part.url = draw(text)
    else:
        value = Value()
        value.struct_value.update(draw(json_object))
        part.data.CopyFrom(value)
    if draw(st.booleans()):
        part.metadata.update(draw(json_object))
    part.media_type = draw(st.sampled_from(["", "text/plain", "application/json"]))
    part.filename = draw(st.sampled_from(["", "a.txt"]))
    return part


@st.composite
def messages(draw: st.DrawFn) -> Message:
    message = Message(
        message_id=draw(text),
        context_id=draw(text),
        task_id=draw(text),
        role=draw(st.sampled_from([Role.ROLE_USER, Role.ROLE_AGENT, Role.ROLE_UNSPECIFIED])),
        parts=draw(st.lists(parts(), max_size=3)),
        extensions=draw(st.lists(text, max_size=2)),
        reference_task_ids=draw(st.lists(text, max_size=2)),
    )
    if draw(st.booleans()):
        message.metadata.update(draw(json_object))
    return message


@st.composite
def statuses(draw: st.DrawFn) -> TaskStatus:
    status = TaskStatus(state=draw(st.sampled_from(list(TaskState.values()))))
    if draw(st.booleans()):
        status.message.CopyFrom(draw(messages()))
    if draw(st.booleans()):
        status.timestamp.FromNanoseconds(draw(st.integers(0, 4_000_000_000 * 10**9)))
    return status


@st.composite
def artifacts(draw: st.DrawFn) -> Artifact:
    artifact = Artifact(
        artifact_id=draw(text),
        name=draw(text),
        description=draw(text),
        parts=draw(st.lists(parts(), max_size=2)),
    )
    if draw(st.booleans()):
        artifact.metadata.update(draw(json_object))
    return artifact


@st.composite
def tasks(draw: st.DrawFn) -> Task:
    task = Task(
        id=draw(text),
        context_id=draw(text),
        status=draw(statuses()),
        history=draw(st.lists(messages(), max_size=2)),
        artifacts=draw(st.lists(artifacts(), max_size=2)),
    )
    if draw(st.booleans()):
        task.metadata.update(draw(json_object))
    return task


@st.composite
def stream_responses(draw: st.DrawFn) -> StreamResponse:
    kind = draw(st.sampled_from(["task", "message", "status", "artifact"]))
    if kind == "task":
        return StreamResponse(task=draw(tasks()))
    if kind == "message":
        return StreamResponse(message=draw(messages()))
    if kind == "status":
        return StreamResponse(
            status_update=TaskStatusUpdateEvent(task_id=draw(text), status=draw(statuses()))
        )
    event = TaskArtifactUpdateEvent(
        task_id=draw(text), artifact=draw(artifacts()), append=draw(st.booleans())
    )
    return StreamResponse(artifact_update=event)


@SETTINGS
@given(tasks())
def test_task_json_is_message_to_dict(task: Task) -> None:
    assert codec.to_json(task) == MessageToDict(task)


@SETTINGS
@given(messages())
def test_message_json_is_message_to_dict(message: Message) -> None:
    assert codec.to_json(message) == MessageToDict(message)
    assert codec.to_json(SendMessageResponse(message=message)) == MessageToDict(
        SendMessageResponse(message=message)
    )


@SETTINGS
@given(stream_responses())
def test_stream_response_json_is_message_to_dict(response: StreamResponse) -> None:
    assert codec.to_json(response) == MessageToDict(response)


def test_a_value_message_to_dict_refuses_is_refused_the_same_way() -> None:
    message = Message()
    message.metadata.update({"n": 1.0})
    message.metadata.fields["n"].number_value = float("inf")
    with pytest.raises(SerializeToJsonError, match="Infinity"):
        MessageToDict(message)
    with pytest.raises(SerializeToJsonError, match="Infinity"):
        codec.to_json(message)


# -- parse ----------------------------------------------------------------------------------------

part_dicts = st.fixed_dictionaries(
    {"text": text},
    optional={"metadata": json_object, "mediaType": text, "filename": text},
)
message_dicts = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["ROLE_USER", "ROLE_AGENT", "ROLE_UNSPECIFIED", "user", 1]),
        "messageId": text,
        "contextId": text,
        "taskId": text,
        "parts": st.lists(part_dicts, max_size=3),
        "metadata": json_object,
        "extensions": st.lists(text, max_size=2),
        "referenceTaskIds": st.lists(text, max_size=2),
    },
)
config_dicts = st.fixed_dictionaries(
    {},
    optional={
        "acceptedOutputModes": st.lists(text, max_size=2),
        "historyLength": st.integers(-5, 2**31 - 1),
        "returnImmediately": st.booleans(),
    },
)
request_dicts = st.fixed_dictionaries(
    {"message": message_dicts},
    optional={"configuration": config_dicts, "metadata": json_object, "tenant": text},
)
# what a careless or hostile client sends: wrong types, unknown and snake_case keys, files
odd_values = (
    st.none() | st.integers() | st.booleans() | text | st.lists(st.integers(), max_size=2) | json_object
)
odd_keys = st.sampled_from(
    ["message_id", "kind", "parts", "role", "raw", "url", "data", "unknown", "metadata"]
)


@st.composite
def mangled(draw: st.DrawFn) -> dict[str, Any]:
    request: dict[str, Any] = draw(request_dicts)
    message: dict[str, Any] = request["message"]
    target: dict[str, Any] = draw(st.sampled_from([request, message]))
    if draw(st.booleans()) and message.get("parts"):
        target = message["parts"][0]
    target[draw(odd_keys)] = draw(odd_values)
    return request


def parse_dict(params: dict[str, Any]) -> SendMessageRequest | str:
    try:
        result: SendMessageRequest = ParseDict(params, SendMessageRequest(), ignore_unknown_fields=True)
    except ParseError:
        return "refused"
    return result


def fast_parse(params: dict[str, Any]) -> SendMessageRequest | str:
    try:
        return codec.parse(params, SendMessageRequest)
    except codec.ParamsError:
        return "refused"


@SETTINGS
@given(request_dicts)
def test_parse_equals_parse_dict_for_plain_requests(params: dict[str, Any]) -> None:
    assert fast_parse(params) == parse_dict(params)


@SETTINGS
@given(mangled())
def test_parse_equals_parse_dict_for_mangled_requests(params: dict[str, Any]) -> None:
    assert fast_parse(params) == parse_dict(params)


id_requests = st.fixed_dictionaries(
    {},
    optional={
        "id": text | st.integers() | st.none(),
        "tenant": text,
        "historyLength": st.integers(-(2**32), 2**32) | st.booleans() | text,
        "metadata": json_object,
    },
)


@SETTINGS
@given(st.sampled_from([GetTaskRequest, CancelTaskRequest, SubscribeToTaskRequest]), id_requests)
def test_parse_equals_parse_dict_for_task_id_requests(cls: Any, params: dict[str, Any]) -> None:
    def reference() -> Any:
        try:
            return ParseDict(params, cls(), ignore_unknown_fields=True)
        except ParseError:
            return "refused"

    def ours() -> Any:
        try:
            return codec.parse(params, cls)
        except codec.ParamsError:
            return "refused"

    assert ours() == reference()
