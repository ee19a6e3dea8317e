"""Every request model refuses a bad value naming its field, as docs/api.md spells it.

In-process: the models and the one translation of pydantic's errors the REST endpoints and the
WebSocket share (`api.errors.parsed`). The table covers every body, query and frame model the
route table documents.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

from ranch.api.errors import parsed
from ranch.api.imports import ImportCatalog
from ranch.api.models import (
    CompleteExecution,
    CreateOrg,
    CreateUser,
    Listing,
    TaskQuery,
    UpdateOrg,
    Window,
)
from ranch.api.replaying import ReplayRequest
from ranch.api.routes import OPERATIONS
from ranch.api.ws import FRAMES
from ranch.catalog.discovery import Wanted
from ranch.catalog.requests import REGISTRATION, RegisterExternal, RegisterRules, RegisterTeam
from ranch.exceptions import InvalidInput
from ranch.identity.keys import CreateKey
from ranch.protocol.invalid import spelled
from ranch.rooms.requests import AddParticipant, CreateRoom, HandOff, PostMessage, UpdateRoom

Model = type[BaseModel] | TypeAdapter[Any]

REFUSALS: list[tuple[Model, dict[str, Any], str | None]] = [
    (ImportCatalog, {"catalog_url": "ftp://example.com/ai-catalog.json"}, "catalog_url"),
    (ImportCatalog, {"catalog_url": "https://example.com/", "extra": 1}, "extra"),
    (ReplayRequest, {"task_id": "t", "config": "new", "mode": "fast"}, "mode"),
    (ReplayRequest, {"task_id": "t", "config": "new", "yaml": "agents: []"}, "yaml"),
    (ReplayRequest, {"task_id": "", "config": "new"}, "task_id"),
    (CompleteExecution, {"reason": "x" * 1001}, "reason"),
    (CompleteExecution, {"reason": 5}, "reason"),
    (CompleteExecution, {"why": "no"}, "why"),
    (HandOff, {}, "agent"),
    (HandOff, {"agent": ""}, "agent"),
    (HandOff, {"agent": "helper", "reason": "x" * 1001}, "reason"),
    (HandOff, {"agent": "helper", "to": "x"}, "to"),
    (HandOff, {"agent": "helper", "message": "  "}, "message"),
    (CreateRoom, {"id": 5}, "id"),
    (CreateRoom, {"id": "acme.ops"}, "id"),
    (CreateRoom, {"id": "x" * 65}, "id"),
    (CreateRoom, {"title": "x" * 301}, "title"),
    (CreateRoom, {"title": "ring \u0007"}, "title"),
    (CreateRoom, {"type": "huge"}, "type"),
    (CreateRoom, {"participants": "bob"}, "participants"),
    (CreateRoom, {"participants": ["bob"]}, "participants[0]"),
    (CreateRoom, {"participants": [{"kind": "robot", "id": "x"}]}, "participants[0].kind"),
    (CreateRoom, {"participants": [{"kind": "user", "id": "a"}, {"kind": "agent"}]}, "participants[1].id"),
    (CreateRoom, {"participants": [{"kind": "agent", "id": "x", "role": "boss"}]}, "participants[0].role"),
    (CreateRoom, {"default_agent": ""}, "default_agent"),
    (CreateRoom, {"surprise": 1}, "surprise"),
    (UpdateRoom, {"title": "  "}, "title"),
    (UpdateRoom, {"title": None}, "title"),
    (UpdateRoom, {"status": "gone"}, "status"),
    (UpdateRoom, {"default_agent": 5}, "default_agent"),
    (AddParticipant, {"kind": "team"}, "id"),
    (AddParticipant, {"kind": "agent", "id": "x\u0000"}, "id"),
    (PostMessage, {}, "text"),
    (PostMessage, {"text": 5}, "text"),
    (PostMessage, {"text": " \n"}, "text"),
    (PostMessage, {"text": "ring \u0007"}, "text"),
    (PostMessage, {"text": "x", "type": "task"}, "type"),
    (PostMessage, {"text": "x", "mentions": "triage"}, "mentions"),
    (PostMessage, {"text": "x", "mentions": ["triage", 1]}, "mentions[1]"),
    (PostMessage, {"text": "x", "metadata": []}, "metadata"),
    (PostMessage, {"text": "x", "thread_id": 5}, "thread_id"),
    (PostMessage, {"text": "x", "reply_to": ""}, "reply_to"),
    (PostMessage, {"parts": [{"text": "a", "url": "https://x"}]}, "parts[0]"),
    (PostMessage, {"parts": [{"url": "ftp://x"}]}, "parts[0].url"),
    (Window, {"before": "-1"}, "before"),
    (Window, {"limit": "0"}, "limit"),
    (CreateUser, {}, "name"),
    (CreateUser, {"name": "Ann", "id": "Bad Id"}, "id"),
    (CreateUser, {"name": "Ann", "id": "acme.ann"}, "id"),
    (CreateUser, {"name": "Ann", "id": "user"}, "id"),
    (CreateUser, {"name": "Ann", "role": "boss"}, "role"),
    (CreateOrg, {}, "id"),
    (CreateOrg, {"id": "acme", "allowed_agent_urls": ["ftp://x"]}, "allowed_agent_urls[0]"),
    (CreateOrg, {"id": "acme", "owner_id": "Bad"}, "owner_id"),
    (UpdateOrg, {"name": ""}, "name"),
    (UpdateOrg, {"allowed_agent_urls": "https://x"}, "allowed_agent_urls"),
    (CreateKey, {"expires_in": 0}, "expires_in"),
    (CreateKey, {"expires_in": True}, "expires_in"),
    (CreateKey, {"expires_at": "tomorrow"}, "expires_at"),
    (CreateKey, {"expires_at": 1893456000}, "expires_at"),
    (CreateKey, {"expires_at": "2999-01-01T00:00:00Z", "expires_in": 60}, "expires_in"),
    (CreateKey, {"owner": {"kind": "robot", "id": "x"}}, "owner"),
    (CreateKey, {"owner": {"kind": "user"}}, "owner"),
    (REGISTRATION, {"id": "x"}, "kind"),
    (REGISTRATION, {"id": "x", "kind": "python"}, "kind"),
    (REGISTRATION, {"kind": "echo"}, "id"),
    (REGISTRATION, {"id": "Bad Id", "kind": "echo"}, "id"),
    (REGISTRATION, {"id": "acme.x", "kind": "echo"}, "id"),
    (REGISTRATION, {"id": "x" * 65, "kind": "echo"}, "id"),
    (REGISTRATION, {"id": "sender", "kind": "echo"}, "id"),
    (REGISTRATION, {"id": "x", "kind": "echo", "history_length": 2**31}, "history_length"),
    (REGISTRATION, {"id": "x", "kind": "echo", "history_length": True}, "history_length"),
    (REGISTRATION, {"id": "x", "kind": "echo", "visibility": "public"}, "visibility"),
    (REGISTRATION, {"id": "x", "kind": "echo", "surprise": 1}, "surprise"),
    (REGISTRATION, {"id": "x", "kind": "echo", "tools": [1]}, "tools[0]"),
    (REGISTRATION, {"id": "x", "kind": "rules", "rules": []}, "rules"),
    (REGISTRATION, {"id": "x", "kind": "rules", "rules": [{"match": "a"}]}, "rules[0].reply"),
    (
        REGISTRATION,
        {"id": "x", "kind": "rules", "rules": [{"reply": "a"}, {"reply": "b", "match": 5}]},
        "rules[1].match",
    ),
    (REGISTRATION, {"id": "x", "kind": "remote"}, "url"),
    (REGISTRATION, {"id": "x", "kind": "remote", "url": "ftp://x"}, "url"),
    (REGISTRATION, {"id": "x", "kind": "llm"}, "model"),
    (REGISTRATION, {"id": "x", "kind": "llm", "model": "m", "api_key": "sk-1"}, "api_key"),
    (REGISTRATION, {"id": "x", "kind": "llm", "model": "m", "temperature": 3}, "temperature"),
    (
        REGISTRATION,
        {"id": "x", "kind": "llm", "model": "m", "mcp_servers": [{"name": "n", "url": "ftp://x"}]},
        "mcp_servers[0].url",
    ),
    (REGISTRATION, {"id": "x", "kind": "llm", "model": "m", "remote_agents": [5]}, "remote_agents[0]"),
    (REGISTRATION, {"id": "t", "kind": "team", "members": [], "default_agent": "a"}, "members"),
    (REGISTRATION, {"id": "t", "kind": "team", "members": ["a", "a"], "default_agent": "a"}, "members"),
    (REGISTRATION, {"id": "t", "kind": "team", "members": ["a"], "default_agent": "b"}, "default_agent"),
    (REGISTRATION, {"id": "x", "kind": "external", "url": "https://x"}, "url"),
    (FRAMES, {}, "type"),
    (FRAMES, {"type": "shout"}, "type"),
    (FRAMES, {"type": "subscribe"}, "rooms"),
    (FRAMES, {"type": "subscribe", "rooms": []}, "rooms"),
    (FRAMES, {"type": "subscribe", "rooms": ["r1", ""]}, "rooms[1]"),
    (FRAMES, {"type": "subscribe", "rooms": ["r1"], "cursor": -1}, "cursor"),
    (FRAMES, {"type": "subscribe", "rooms": ["r1"], "cursor": "5"}, "cursor"),
    (FRAMES, {"type": "subscribe", "rooms": ["r1"], "cursor": 2**63}, "cursor"),
    (FRAMES, {"type": "subscribe", "rooms": {}}, "rooms"),
    (FRAMES, {"type": "subscribe", "rooms": {"r1": -1}}, "rooms.r1"),
    (FRAMES, {"type": "subscribe", "rooms": {"r1": "5"}}, "rooms.r1"),
    (FRAMES, {"type": "subscribe", "rooms": {"r1": 2**63}}, "rooms.r1"),
    (FRAMES, {"type": "subscribe", "rooms": {"r1": 0, "r2": None}}, "rooms.r2"),
    (FRAMES, {"type": "unsubscribe", "rooms": "r1"}, "rooms"),
    (FRAMES, {"type": "ack"}, "delivery_id"),
    (FRAMES, {"type": "ping", "surprise": 1}, "surprise"),
    (FRAMES, {"type": "delta", "text": "x"}, "room_id"),
    (FRAMES, {"type": "delta", "room_id": "r1", "text": "x" * 10_001}, "text"),
    (FRAMES, {"type": "delta", "room_id": "r1", "text": "bell \u0007"}, "text"),
    (Window, {"since": "x"}, "since"),
    (Window, {"since": str(2**63)}, "since"),
    (Window, {"limit": "0"}, "limit"),
    (Window, {"limit": "201"}, "limit"),
    (Listing, {"limit": "many"}, "limit"),
    (TaskQuery, {"history_length": "-1"}, "history_length"),
    (Wanted, {"skill": " "}, "skill"),
    (Wanted, {"tag": "t" * 201}, "tag"),
    (Wanted, {"mode": "text/\x01"}, "mode"),
]


def _adapter(model: Model) -> TypeAdapter[Any]:
    return model if isinstance(model, TypeAdapter) else TypeAdapter(model)


@pytest.mark.parametrize(("model", "value", "field"), REFUSALS)
def test_a_bad_value_is_refused_naming_its_field(model: Model, value: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parsed(_adapter(model), value)
    assert refused.value.field == field
    assert str(refused.value) and "\n" not in str(refused.value)


def test_the_table_covers_every_model_the_api_reads() -> None:
    read = {operation.body for operation in OPERATIONS} | {operation.query for operation in OPERATIONS}
    covered = {model for model, _, _ in REFUSALS}
    assert read - {None} <= covered
    assert FRAMES in covered


@pytest.mark.parametrize(
    ("model", "value", "kind"),
    [
        (
            REGISTRATION,
            {"id": "x", "kind": "rules", "rules": [{"reply": "hi"}], "tools": ["search"]},
            RegisterRules,
        ),
        (
            REGISTRATION,
            {"id": "t", "kind": "team", "members": ["a", "b"], "default_agent": "b"},
            RegisterTeam,
        ),
        (REGISTRATION, {"id": "scout", "kind": "external", "model": "own"}, RegisterExternal),
    ],
)
def test_a_registration_is_the_config_entry_of_its_kind(
    model: Model, value: dict[str, Any], kind: type
) -> None:
    assert isinstance(parsed(_adapter(model), value), kind)


def test_a_tag_error_names_the_tag_and_what_it_may_be() -> None:
    with pytest.raises(InvalidInput) as refused:
        parsed(REGISTRATION, {"id": "x", "kind": "python"})
    assert refused.value.field == "kind"
    assert "rules" in str(refused.value) and "external" in str(refused.value)


def test_fields_are_spelled_as_the_docs_spell_them() -> None:
    assert spelled(["rules", 0, "match"]) == "rules[0].match"
    assert spelled(["participants", 1, "kind"]) == "participants[1].kind"
    assert spelled([]) == ""


def test_each_response_model_reads_its_own_json_back() -> None:
    """What `ranch.client` relies on: an answer's JSON validates into the model that wrote it."""
    from ranch.api.models import KeyView
    from ranch.rooms.views import MessageView, ParticipantView

    at = "2026-01-01T00:00:00Z"
    key = {"id": "k1", "prefix": "rk_Ab", "owner": {"kind": "agent", "id": "a"}, "org_id": "o",
           "created_at": at, "expires_at": None, "revoked": False, "revoked_at": None}  # fmt: skip
    message = {"id": "m1", "cursor": 7, "room_id": "r", "type": "text", "sender": {"kind": "team", "id": "t"},
               "text": "hi", "mentions": [], "metadata": {"a": 1}, "thread_id": None, "execution_id": None,
               "created_at": at, "parts": [{"data": {"n": 1}},
               {"url": "/api/v1/rooms/r/messages/m1/parts/2", "mediaType": "image/png", "filename": "a.png",
                "size": 3}]}  # fmt: skip  # text lives in `text` alone; a file's bytes behind the hub's link
    participant = {
        "kind": "agent",
        "id": "a",
        "role": "member",
        "name": "A",
        "joined_at": "2026-01-01T00:00:00Z",
    }
    for model, data in ((KeyView, key), (MessageView, message), (ParticipantView, participant)):
        assert model.model_validate(data).model_dump(mode="json") == data
