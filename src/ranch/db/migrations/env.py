"""Alembic environment: runs on the connection `ranch.db.migrate` hands over."""

from __future__ import annotations

from alembic import context

from ranch.db.models import Base

target_metadata = Base.metadata
connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - ranch always passes its own connection
    raise RuntimeError("run migrations through ranch.db.migrate.upgrade (or `ranch db upgrade`)")
context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
