"""api keys: the key that made each one for its own holder, and an index by owner

`parent_id` is null for a key made by an owner or admin, at sign-up or at registration, and for
every key before this revision. A key made with a key never outlives it and is revoked with it.
The owner index serves the cap on live keys per principal and the listing of one's own keys.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("parent_id", sa.String(length=64), nullable=True))
        batch_op.create_index(batch_op.f("ix_api_keys_parent_id"), ["parent_id"], unique=False)
        batch_op.create_index("api_keys_owner", ["owner_kind", "owner_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_index("api_keys_owner")
        batch_op.drop_index(batch_op.f("ix_api_keys_parent_id"))
        batch_op.drop_column("parent_id")
