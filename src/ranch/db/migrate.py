"""Alembic, driven from code: `upgrade(engine)` on start and `ranch db upgrade`.

The migration scripts ship inside the package (`ranch/db/migrations`), so an
installed ranch migrates its database without an alembic.ini. A database already
at head costs one query: the scripts are read only when there is something to do.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Bring the database to `revision`; a no-op when it is already there."""
    async with engine.begin() as connection:
        await connection.run_sync(_upgrade, revision)


def _upgrade(connection: Any, revision: str) -> None:
    if revision == "head" and _revision(connection) == head():
        return  # every start but the first: no scripts loaded, no environment run
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


def _revision(connection: Any) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def current(engine: AsyncEngine) -> str | None:
    """The revision the database is at (None before the first migration)."""
    async with engine.connect() as connection:
        return await connection.run_sync(_revision)


@functools.cache
def head() -> str | None:
    """The newest revision of the scripts; read once per process, since they ship with the code."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()
