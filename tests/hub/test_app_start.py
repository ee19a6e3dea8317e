"""What every app would make the same way is made once per process: the OpenAPI document and the
TLS context of outbound clients (a server start spent about a third of its time on them)."""

from __future__ import annotations

import gc
import ssl
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from _support import tls
from _support.databases import migrated_sqlite
from _support.hubkit import ADMIN_KEY
from ranch.api import openapi
from ranch.config import parse_config
from ranch.hub.app import Settings, create_app
from ranch.policy.egress import tls_context

pytestmark = pytest.mark.anyio

CONFIG = parse_config("agents:\n  - {id: echo, kind: echo}\n")


async def start_and_stop(database: Path) -> None:
    """One app through its whole lifespan: its pools, the webhook client, the task store."""
    settings = Settings(database_url=f"sqlite+aiosqlite:///{database}", admin_key=ADMIN_KEY, announce=print)
    app = create_app(CONFIG, settings)
    async with app.router.lifespan_context(app):
        pass


async def test_more_apps_make_no_openapi_document_and_no_tls_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tls.unshared(monkeypatch)  # httpx as ranch meets it, not the tests' shared contexts
    await start_and_stop(migrated_sqlite(tmp_path / "first.db"))  # what the process makes once
    documents: list[Any] = []
    contexts: list[Any] = []
    document, default_context = openapi.document, ssl.create_default_context

    def counted_document(*args: Any) -> dict[str, Any]:
        documents.append(args)
        return document(*args)

    def counted_context(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        contexts.append(args)
        return default_context(*args, **kwargs)

    monkeypatch.setattr(openapi, "document", counted_document)
    monkeypatch.setattr(ssl, "create_default_context", counted_context)

    for name in ("second.db", "third.db"):
        await start_and_stop(migrated_sqlite(tmp_path / name))

    assert documents == []
    assert contexts == []


def test_the_shared_tls_context_checks_certificates_and_host_names() -> None:
    for context in (tls_context(), tls_context(trust_env=False)):
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
        assert context.cert_store_stats()["x509_ca"] > 0  # the CA bundle is loaded


async def test_a_server_that_owns_its_process_freezes_what_start_up_made_and_an_embedded_one_does_not(
    tmp_path: Path,
) -> None:
    """`ranch serve` (`freeze_heap`) keeps the objects its start-up made out of the garbage
    collector's full scans; an app embedded in another process (here, the test's) leaves its GC
    alone."""
    database = migrated_sqlite(tmp_path / "hub.db")
    before = gc.get_freeze_count()
    settings = Settings(database_url=f"sqlite+aiosqlite:///{database}", admin_key=ADMIN_KEY, announce=print)
    app = create_app(CONFIG, settings)
    async with app.router.lifespan_context(app):
        assert gc.get_freeze_count() == before
    owner = create_app(CONFIG, replace(settings, freeze_heap=True))
    try:
        async with owner.router.lifespan_context(owner):
            assert gc.get_freeze_count() > before  # the app itself among what was frozen
    finally:
        gc.unfreeze()  # this test process goes on running other apps
