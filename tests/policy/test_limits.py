"""policy.limits: the one check every entry runs on an incoming message."""

from __future__ import annotations

import pytest
from a2a.types import Message, Part, Role
from google.protobuf.struct_pb2 import Struct

from _support.sdk import user_message
from ranch.exceptions import InvalidInput, PayloadTooLarge
from ranch.policy.limits import Limits, check_message, check_value_keys


def test_size_limit_names_the_limit() -> None:
    check_message(user_message("x" * 900), Limits(max_message_bytes=1000))
    with pytest.raises(PayloadTooLarge, match="limit is 1000 bytes") as caught:
        check_message(user_message("x" * 1000), Limits(max_message_bytes=1000))
    assert caught.value.limit == 1000 and caught.value.size > 1000


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x7f", "\x85", "\x9f", "\x0b"])
def test_control_characters_are_refused(char: str) -> None:
    with pytest.raises(InvalidInput, match=f"U\\+{ord(char):04X}") as caught:
        check_message(user_message(f"a{char}b"), Limits())
    assert caught.value.field == "message.parts[0].text"


def test_tab_newline_and_other_unicode_pass() -> None:
    check_message(user_message("a\tb\nc\r\nd — é 中文 🐄 \u200b"), Limits())


@pytest.mark.parametrize(("texts", "index"), [([""], 0), (["hello", ""], 1)])
def test_an_empty_text_part_is_refused_naming_it(texts: list[str], index: int) -> None:
    message = Message(role=Role.ROLE_USER, message_id="m1", parts=[Part(text=text) for text in texts])
    with pytest.raises(InvalidInput, match="is empty") as caught:
        check_message(message, Limits())
    assert caught.value.field == f"message.parts[{index}].text"
    check_message(user_message(" "), Limits())  # a space is text


def test_a_part_with_no_content_is_refused_naming_it() -> None:
    message = Message(role=Role.ROLE_USER, message_id="m1", parts=[Part(text="hi"), Part()])
    with pytest.raises(InvalidInput, match="has no content") as caught:
        check_message(message, Limits())
    assert caught.value.field == "message.parts[1]"


def test_ids_are_checked() -> None:
    with pytest.raises(InvalidInput, match="message.contextId"):
        check_message(user_message(context_id="c" * 300), Limits())
    with pytest.raises(InvalidInput, match="message.taskId"):
        check_message(user_message(task_id="t\x00"), Limits())


def test_metadata_keys() -> None:
    message = user_message()
    message.metadata.update({"ok": {"nested": [1, {"deeper": True}]}})
    check_message(message, Limits())
    message.metadata.update({"bad\x01key": 1})
    with pytest.raises(InvalidInput, match="message.metadata"):
        check_message(message, Limits())
    with pytest.raises(InvalidInput, match="keys must be strings"):
        check_value_keys({"a": {1: "x"}}, "metadata", Limits())
    with pytest.raises(InvalidInput, match="1 to 256"):
        check_value_keys({"": 1}, "metadata", Limits())
    deep: dict[str, object] = {}
    cursor = deep
    for _ in range(40):
        cursor["k"] = {}
        cursor = cursor["k"]  # type: ignore[assignment]
    struct = Struct()
    struct.update(deep)
    with pytest.raises(InvalidInput, match="deeper than 32"):
        check_value_keys(struct, "metadata", Limits())
