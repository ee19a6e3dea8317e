"""`ranch db upgrade|current|prune`: apply or inspect the database migrations (serve applies them
too), or prune once what is past its lifetime (serve prunes in the background; docs/deploy.md)."""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

from ranch.cli import policy_flags
from ranch.config import RetentionConfig, load_config
from ranch.db import migrate
from ranch.db.engine import open_engine
from ranch.exceptions import ConfigError
from ranch.hub.app import DEFAULT_DATABASE_URL
from ranch.retention.policy import describe, merged
from ranch.retention.pruner import Progress, Pruner

PROGRESS_EVERY = 5.0
"""Seconds between two progress lines of a long prune."""


def register(commands: Any) -> None:
    parser = commands.add_parser("db", help="apply or show the database migrations")
    parser.add_argument(
        "action",
        choices=["upgrade", "current", "prune"],
        help="upgrade to the newest schema, show it, or prune once what is past its lifetime",
    )
    parser.add_argument(
        "--db",
        default=os.environ.get("RANCH_DATABASE_URL", DEFAULT_DATABASE_URL),
        help=f"database URL (env RANCH_DATABASE_URL; default {DEFAULT_DATABASE_URL})",
    )
    parser.add_argument(
        "--config", metavar="CONFIG", help="prune: the lifetimes of this config file's retention: section"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="prune: count what would be deleted; delete nothing"
    )
    policy_flags.add_retention_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "prune":
        config = load_config(args.config).retention if args.config else RetentionConfig()
        retention = merged(config, policy_flags.retention_from(args))
        return asyncio.run(_prune(args.db, retention, dry_run=args.dry_run))
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


async def _prune(url: str, retention: RetentionConfig, *, dry_run: bool) -> int:
    """One prune to the end (no deadline), in batches; a line of progress every few seconds, then
    the count per kind. A database behind the newest schema is refused: nothing is changed."""
    engine = open_engine(url)
    try:
        at, head = await migrate.current(engine), migrate.head()
        if at != head:
            behind = f"database {_safe(url)} is at {at or 'no revision'}, not {head}"
            raise ConfigError([f"{behind}: run `ranch db upgrade` first"])
        doing = "counting" if dry_run else "pruning"
        print(f"database {_safe(url)}: {doing} {describe(retention)}", flush=True)
        result = await Pruner(engine, retention).run(dry_run=dry_run, progress=_progress())
    finally:
        await engine.dispose()
    verb = "would be deleted" if dry_run else "deleted"
    for label, count in result.counts.items():
        print(f"  {label:<16} {count:>10,} {verb}")
    note = " (dry run: nothing changed)" if dry_run else ""
    print(f"{result.total:,} row(s) {verb} in {result.seconds:.1f} s{note}")
    return 0


def _progress() -> Progress:
    """A progress callback that prints at most one line every PROGRESS_EVERY seconds."""
    last = time.monotonic()

    def told(label: str, count: int) -> None:
        nonlocal last
        if time.monotonic() - last >= PROGRESS_EVERY:
            last = time.monotonic()
            print(f"  ... {label}: {count:,} deleted so far", flush=True)

    return told


def _safe(url: str) -> str:
    """The URL without its password."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
