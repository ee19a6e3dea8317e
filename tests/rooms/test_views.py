"""A message's JSON, built directly for every post's event and answer, is `MessageView`'s, key for
key and in the same order: a post's answer, its event and a page of messages show one shape.

Hypothesis draws messages of every kind (text, files with bytes or a URL, data, mentions, metadata,
threads, executions), both as a message being written (`NewMessage`) and as a stored row
(`RoomMessage`); the model reads the same object by attribute, as the pages do.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from ranch.db.models import RoomMessage
from ranch.protocol.vocabulary import MessageType
from ranch.rooms import views
from ranch.rooms.bus import NewMessage
from ranch.rooms.views import MessageView

IDS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
PART = st.one_of(
    st.builds(lambda text: {"text": text}, st.text(max_size=10)),
    st.builds(
        lambda raw, media, name: {
            "raw": base64.b64encode(raw).decode(),
            "mediaType": media,
            "filename": name,
        },
        st.binary(max_size=12),
        st.sampled_from(["text/plain", "image/png"]),
        st.text(max_size=6),
    ),
    st.builds(lambda url: {"url": url, "mediaType": "text/plain"}, st.sampled_from(["https://a.example/f"])),
    st.builds(lambda data: {"data": data}, JSON),
)


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "id": draw(IDS),
        "room_id": draw(IDS),
        "type": draw(st.sampled_from(list(MessageType))),
        "sender_kind": draw(st.sampled_from(["user", "agent", "team", "system"])),
        "sender_id": draw(IDS),
        "text": draw(st.text(max_size=20)),
        "parts": draw(st.none() | st.lists(PART, max_size=4)),
        "mentions": draw(st.lists(IDS, max_size=3)),
        "meta": draw(st.dictionaries(st.text(max_size=6), JSON, max_size=3)),
        "thread_id": draw(st.none() | IDS),
        "execution_id": draw(st.none() | IDS),
        "created_at": draw(st.floats(0, 4e9)),
        "seq": draw(st.integers(1, 2**53)),
    }


@given(messages(), st.booleans())
def test_a_messages_json_is_the_views(columns: dict[str, Any], stored: bool) -> None:
    row: RoomMessage | NewMessage = RoomMessage(**columns) if stored else NewMessage(**columns)
    direct = views.message(row)
    model = MessageView.model_validate(row).model_dump(mode="json")
    assert direct == model
    assert list(direct) == list(model)
    assert orjson.dumps(direct) == orjson.dumps(model)  # the same bytes go out, types included


def test_a_message_of_a_plain_type_word_shows_the_word() -> None:
    """A writer may pass the type as the plain word (the column's value) or as the enum member."""
    columns: dict[str, Any] = dict(
        id="m",
        room_id="r",
        sender_kind="user",
        sender_id="ann",
        text="hi",
        parts=None,
        mentions=[],
        meta={},
        thread_id=None,
        execution_id=None,
        created_at=1.5,
        seq=3,
    )
    word = views.message(NewMessage(type="thought", **columns))
    member = views.message(NewMessage(type=MessageType.THOUGHT, **columns))
    assert orjson.dumps(word) == orjson.dumps(member)
    assert word["type"] == "thought" and type(word["type"]) is str
