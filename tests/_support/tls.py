"""One TLS context per kind for every httpx client the tests make, and a self-signed certificate
for the HTTPS and gRPC TLS tests (`self_signed`).

httpx parses the whole CA bundle for each client (about 20 ms of CPU), and the tests make thousands
of one-shot clients (`httpx.get`, the REST helpers, SDK clients), nearly all to http://127.0.0.1
where the context is never used. `share()` (conftest.py) makes httpx hand out one context per
(trust_env, SSL_CERT_FILE, SSL_CERT_DIR) instead; a context a test passes itself (`verify=<context>`)
and client certificates go through untouched. Every client here speaks HTTP/1.1, so the ALPN list
httpcore sets on a shared context is always the same.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import threading
from pathlib import Path
from typing import Any

import httpx
import httpx._config
import httpx._transports.default
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

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


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made here (PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certfile, keyfile = directory / "cert.pem", directory / "key.pem"
    certfile.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return certfile, keyfile
