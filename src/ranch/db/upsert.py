"""`INSERT ... ON CONFLICT` on either backend: the dialect picks the insert construct that has it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.dialects import postgresql, sqlite


def insert_for(dialect_name: str) -> Callable[[Any], Any]:
    """`insert(table)` with `.on_conflict_do_update` for the engine's dialect (PostgreSQL or SQLite)."""
    return postgresql.insert if dialect_name == "postgresql" else sqlite.insert
