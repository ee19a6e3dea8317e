"""The hub's REST API under /api/v1 and its WebSocket (docs/api.md)."""
