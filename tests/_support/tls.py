"""One TLS context per kind for every httpx client the tests make.

httpx parses the whole CA bundle for each client (about 20 ms of CPU), and the tests make thousands
of one-shot clients (`httpx.get`, the REST helpers, SDK clients), nearly all to http://127.0.0.1
where the context is never used. `share()` (conftest.py) makes httpx hand out one context per
(trust_env, SSL_CERT_FILE, SSL_CERT_DIR) instead; a context a test passes itself (`verify=<context>`)
and client certificates go through untouched. Every client here speaks HTTP/1.1, so the ALPN list
httpcore sets on a shared context is always the same.
"""

from __future__ import annotations

import os
import ssl
import threading
from typing import Any

import httpx
import httpx._config
import httpx._transports.default
import pytest

REAL = httpx._config.create_ssl_context
"""httpx's own: a new context, the CA bundle parsed again."""
WHERE = (httpx, httpx._config, httpx._transports.default)
"""Where httpx looks the function up (the transport imported it by name)."""

_lock = threading.Lock()
_made: dict[tuple[bool, str | None, str | None], ssl.SSLContext] = {}


def shared_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> ssl.SSLContext:
    """httpx's `create_ssl_context`, made once per kind for the default (verify=True, no cert)."""
    if verify is not True or cert is not None:
        return REAL(verify, cert, trust_env)
    environ = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")) if trust_env else (None, None)
    key = (trust_env, *environ)
    with _lock:
        if key not in _made:
            _made[key] = REAL(True, None, trust_env)
        return _made[key]


def share() -> None:
    """From now on, httpx clients in this process share their TLS contexts."""
    for module in WHERE:
        module.create_ssl_context = shared_context  # type: ignore[attr-defined]


def unshared(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx as it is, for this test: a test that counts the contexts ranch makes."""
    for module in WHERE:
        monkeypatch.setattr(module, "create_ssl_context", REAL)
