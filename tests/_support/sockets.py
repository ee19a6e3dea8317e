"""Raw connections from chosen loopback addresses: another client is another address to a server.

127.0.0.0/8 is loopback: a client bound to 127.0.0.3 reaches a server on 127.0.0.1, which sees it
as 127.0.0.3, so tests can play several clients (and a proxy) without leaving the machine.
"""

from __future__ import annotations

import socket
import time

import httpx

from _support.servers import HOST


def connect_from(source: str, port: int) -> socket.socket:
    """A connection to 127.0.0.1:`port` from the address `source`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.connect((HOST, port))
    return sock


def read_to_end(sock: socket.socket, within: float) -> bytes | None:
    """Everything the server sends until it closes the connection; None if still open after `within` s."""
    received = b""
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return None
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk
    return None


def client_from(source: str, timeout: float = 10) -> httpx.Client:
    """An HTTP client whose connections come from `source`."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=timeout, trust_env=False)


def refused_keys(url: str, source: str, forwarded_for: list[str], key: str = "rk_wrong") -> list[int]:
    """The statuses of REST calls from `source`, one per X-Forwarded-For value, each with `key`."""
    with client_from(source) as client:
        return [
            client.get(
                f"{url}/api/v1/rooms", headers={"X-API-Key": key, "X-Forwarded-For": forged}
            ).status_code
            for forged in forwarded_for
        ]
