"""Alembic, driven from code: `upgrade(engine)` on start and `ranch db upgrade`.

The migration scripts ship inside the package (`ranch/db/migrations`), so an
installed ranch migrates its database without an alembic.ini. A database already
at head costs one query and no import of alembic (a fifth of a second of every start): the
revision is read from `alembic_version` directly and compared with `HEAD`, which a test holds
to the scripts' own head; alembic and the scripts are loaded only when there is something to do.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine

if TYPE_CHECKING:  # alembic loads only when a database is migrated
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
HEAD = "0018"
"""The newest migration script's revision (tests/db/test_migrations.py checks it against the scripts)."""
VERSION_TABLE = "alembic_version"


def alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Bring the database to `revision`; a no-op when it is already there."""
    async with engine.begin() as connection:
        await connection.run_sync(_upgrade, revision)


def _upgrade(connection: Any, revision: str) -> None:
    if revision == "head" and _revision(connection) == HEAD:
        return  # every start but the first: no scripts loaded, no environment run
    from alembic import command

    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


def _revision(connection: Any) -> str | None:
    """The revision in `alembic_version` (None before the first migration), as alembic reads it."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    found = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    return str(found[0]) if len(found) == 1 else None


async def current(engine: AsyncEngine) -> str | None:
    """The revision the database is at (None before the first migration)."""
    async with engine.connect() as connection:
        return await connection.run_sync(_revision)


def head() -> str:
    """The newest revision of the scripts, which ship with the code."""
    return HEAD


def scripts_head() -> str | None:
    """The newest revision as the scripts themselves say (read with alembic; tests hold `HEAD` to it)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()
