"""The recorded team, served once per module (tests/replay/team.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from _support import databases
from replay.team import Recorded, recorded_on


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """The team served on SQLite, one turn recorded."""
    folder = tmp_path_factory.mktemp("replay")
    store = f"sqlite+aiosqlite:///{databases.migrated_sqlite(folder / 'hub.db')}"
    with recorded_on(store, folder) as served:
        yield served


@pytest.fixture(scope="module")
def recorded_on_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """The same on a fresh PostgreSQL database at 127.0.0.1:5432 (required)."""
    name = f"ranch_test_{uuid.uuid4().hex[:12]}"
    try:
        databases.run(lambda: databases.clone(name, databases.postgres_template()))
    except (TimeoutError, OSError) as exc:
        pytest.fail(f"this test needs PostgreSQL at 127.0.0.1:5432 (user postgres, trust auth): {exc}")
    try:
        with recorded_on(databases.postgres_url(name), tmp_path_factory.mktemp("replay-pg")) as served:
            yield served
    finally:
        databases.drop_later(name)
