"""`ranch db upgrade|current`: apply or inspect the database migrations (serve applies them too)."""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from ranch.db import migrate
from ranch.db.engine import open_engine
from ranch.hub.app import DEFAULT_DATABASE_URL


def register(commands: Any) -> None:
    parser = commands.add_parser("db", help="apply or show the database migrations")
    parser.add_argument(
        "action", choices=["upgrade", "current"], help="upgrade to the newest schema, or show it"
    )
    parser.add_argument(
        "--db",
        default=os.environ.get("RANCH_DATABASE_URL", DEFAULT_DATABASE_URL),
        help=f"database URL (env RANCH_DATABASE_URL; default {DEFAULT_DATABASE_URL})",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args.action, args.db))


async def _run(action: str, url: str) -> int:
    engine = open_engine(url)
    try:
        before = await migrate.current(engine)
        if action == "upgrade":
            await migrate.upgrade(engine)
            after = await migrate.current(engine)
            print(f"database {_safe(url)}: {before or 'empty'} -> {after}")
        else:
            head = migrate.head()
            state = "up to date" if before == head else f"behind (newest is {head})"
            print(f"database {_safe(url)}: at {before or 'no revision'}; {state}")
    finally:
        await engine.dispose()
    return 0


def _safe(url: str) -> str:
    """The URL without its password."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
