"""A2A 0.3 messages, checked and mended as JSON before the a2a-sdk's 0.3 adapters convert them.

The adapters turn a 0.3 message into a 1.0 protobuf with `ParseDict` and their own converters,
before any of ranch's checks can run, and two things fail there as internal errors:

- metadata or data nested deeper than protobuf decodes (`Exceeded upb_DecodeOptions_MaxDepth`
  in `a2a/compat/v0_3/conversions.py` `to_core_part`): the depth rule of every entry
  (policy/limits.py `check_value_keys`) is checked here first, naming the field;
- a file part's bytes on HTTP+JSON: the adapter decodes the base64 twice (its protobuf parse
  decodes `fileWithBytes`, `proto_utils.FromProto.file` turns the bytes into text, and
  `to_core_part` base64-decodes that text again), so any file answered 500. The bytes are
  given to it encoded twice, and reach the agent as sent; text that is not base64 is refused.
  Its answers have the mirror fault (`proto_utils.ToProto.file` encodes the already encoded
  text): `answer_file_bytes` takes the extra encoding off.
"""

from __future__ import annotations

import base64
import binascii
from functools import cache
from typing import Any

from ranch.exceptions import InvalidInput
from ranch.policy.limits import Limits, check_value_keys

JSONRPC_MESSAGE_METHODS = frozenset({"message/send", "message/stream"})
"""The 0.3 JSON-RPC methods whose params hold a message (`params.message.parts`)."""
HTTP_MESSAGE_PATHS = ("/v1/message:send", "/v1/message:stream")
"""The 0.3 HTTP+JSON routes whose body holds a message (`message.content`)."""
_FILE_BYTES = ("fileWithBytes", "file_with_bytes")
"""The JSON names protobuf reads a 0.3 file's bytes from (its json_name and its own)."""


def check_jsonrpc_params(params: Any, limits: Limits) -> None:
    """Refuse (InvalidInput) metadata or data of a 0.3 JSON-RPC message deeper than the limits."""
    _check_message(params, "parts", limits)


def mend_http_body(body: Any, limits: Limits) -> bool:
    """Refuse (InvalidInput) a 0.3 HTTP+JSON message the adapter would fail on; encode its files'
    bytes once more for the adapter's second decoding. True when `body` was changed."""
    _check_message(body, "content", limits)
    if not sdk_encodes_twice():
        return False
    changed = False
    for index, part in enumerate(_parts(body, "content")):
        file = part.get("file")
        if isinstance(file, dict):
            changed = _encode_again(file, f"message.content[{index}].file") or changed
    return changed


def answer_file_bytes(answer: Any) -> Any:
    """A 0.3 HTTP+JSON answer (a message, a task, a stream event) with each file's bytes encoded
    once, as the 0.3 spec has them. Only the answer's structure is walked, never data or metadata
    (which may hold any key); nothing changes once the SDK encodes them once itself."""
    if isinstance(answer, dict) and sdk_encodes_twice():
        _message_bytes(answer.get("message"))
        for task in (answer, answer.get("task"), answer.get("statusUpdate")):
            _task_bytes(task)
        update = answer.get("artifactUpdate")
        if isinstance(update, dict):
            _artifact_bytes(update.get("artifact"))
    return answer


@cache
def sdk_encodes_twice() -> bool:
    """Whether the SDK's 0.3 converters still encode (and decode) a file's base64 twice: asked of
    them, so a fixed SDK is neither mended nor undone. Late: the SDK has an import cycle."""
    from a2a.compat.v0_3 import a2a_v0_3_pb2, types
    from a2a.compat.v0_3.proto_utils import FromProto, ToProto

    sent = ToProto.file(types.FileWithBytes(bytes="AA==")).file_with_bytes == b"AA=="
    read = FromProto.file(a2a_v0_3_pb2.FilePart(file_with_bytes=b"AA=="))
    return sent and isinstance(read, types.FileWithBytes) and read.bytes == "AA=="


def _task_bytes(task: Any) -> None:
    if not isinstance(task, dict):
        return
    status = task.get("status")
    if isinstance(status, dict):
        _message_bytes(status.get("message"))
    for message in _listed(task.get("history")):
        _message_bytes(message)
    for artifact in _listed(task.get("artifacts")):
        _artifact_bytes(artifact)


def _message_bytes(message: Any) -> None:
    if isinstance(message, dict):
        _parts_bytes(message.get("content"))


def _artifact_bytes(artifact: Any) -> None:
    if isinstance(artifact, dict):
        _parts_bytes(artifact.get("parts"))


def _parts_bytes(parts: Any) -> None:
    for part in _listed(parts):
        file = part.get("file") if isinstance(part, dict) else None
        if isinstance(file, dict) and isinstance(file.get("fileWithBytes"), str):
            file["fileWithBytes"] = base64.b64decode(file["fileWithBytes"]).decode("ascii")  # the SDK's text


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _check_message(params: Any, parts_key: str, limits: Limits) -> None:
    if not isinstance(params, dict):
        return  # the adapter refuses what is not an object, as it should
    check_value_keys(params.get("metadata"), "metadata", limits)
    message = _message(params)
    if message is None:
        return
    check_value_keys(message.get("metadata"), "message.metadata", limits)
    for index, part in enumerate(_parts(params, parts_key)):
        field = f"message.{parts_key}[{index}]"
        check_value_keys(part.get("metadata"), f"{field}.metadata", limits)
        data = part.get("data")
        if parts_key == "content" and isinstance(data, dict):  # HTTP+JSON: {"data": {"data": {...}}}
            check_value_keys(data.get("data"), f"{field}.data.data", limits)
        else:
            check_value_keys(data, f"{field}.data", limits)


def _message(params: dict[str, Any]) -> dict[str, Any] | None:
    message = params.get("message", params.get("request"))  # protobuf reads both names
    return message if isinstance(message, dict) else None


def _parts(params: Any, parts_key: str) -> list[dict[str, Any]]:
    message = _message(params) if isinstance(params, dict) else None
    parts = message.get(parts_key) if message is not None else None
    return [part for part in parts if isinstance(part, dict)] if isinstance(parts, list) else []


def _encode_again(file: dict[str, Any], field: str) -> bool:
    for key in _FILE_BYTES:
        text = file.get(key)
        if not isinstance(text, str):
            continue
        try:
            raw = _protobuf_bytes(text)
        except (binascii.Error, ValueError):
            raise InvalidInput(f"{field}.{key} is not base64", f"{field}.{key}") from None
        file[key] = base64.b64encode(base64.b64encode(raw)).decode("ascii")
        return True
    return False


def _protobuf_bytes(text: str) -> bytes:
    """`text` decoded as protobuf's JSON reader decodes bytes (either base64 alphabet, padding optional)."""
    encoded = text.encode("utf-8")
    return base64.urlsafe_b64decode(encoded + b"=" * (4 - len(encoded) % 4))
