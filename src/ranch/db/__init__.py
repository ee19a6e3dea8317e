"""The hub's relational model: tables, engines, and alembic migrations."""
