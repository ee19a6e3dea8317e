"""A WebSocket client that reads only what a test tells it to: a plain socket with a small receive
buffer, so unlike a client library nothing reads ahead behind the test's back (what the server
holds for a reader that reads nothing is the server's)."""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
from typing import Any

from _support.hubkit import ADMIN_KEY


def kernel_buffers() -> int:
    """At most how many unread bytes the kernel holds for one loopback connection (both ends)."""
    with open("/proc/sys/net/ipv4/tcp_wmem") as wmem:
        sending = int(wmem.read().split()[2])
    return sending + 256 * 1024  # the reader's small receive buffer, and slack


class Silent:
    """A WebSocket client that reads only what it is told to (a plain socket with a small receive
    buffer: unlike a client library, nothing reads ahead behind the test's back)."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        self.sock.settimeout(60)
        self.sock.connect((host, int(port)))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET /api/v1/ws?token={ADMIN_KEY} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._read()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head
        self.close_code: int | None = None

    def _read(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection without a close frame")
        return chunk

    def _take(self, count: int) -> bytes:
        while len(self.buffer) < count:
            self.buffer += self._read()
        taken, self.buffer = self.buffer[:count], self.buffer[count:]
        return taken

    def send(self, frame: dict[str, Any]) -> None:
        data, mask = json.dumps(frame).encode(), os.urandom(4)
        assert len(data) < 126
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(bytes([0x81, 0x80 | len(data)]) + mask + masked)

    def recv(self) -> dict[str, Any] | None:
        """The next text frame; None once the server closed (its code in `close_code`)."""
        first, second = self._take(2)
        length = second & 0x7F
        if length == 126:
            length = struct.unpack("!H", self._take(2))[0]
        elif length == 127:
            length = struct.unpack("!Q", self._take(8))[0]
        payload = self._take(length)
        if first & 0x0F == 0x8:
            self.close_code = struct.unpack("!H", payload[:2])[0] if payload else 1005
            return None
        frame: dict[str, Any] = json.loads(payload)
        return frame

    def close(self) -> None:
        self.sock.close()


def read_all(connection: Silent, until_cursor: int) -> list[dict[str, Any]]:
    """Frames up to the one with `until_cursor`, or until the server closes the connection."""
    frames: list[dict[str, Any]] = []
    while not frames or frames[-1].get("cursor") != until_cursor:
        frame = connection.recv()
        if frame is None:
            break
        frames.append(frame)
    return frames
