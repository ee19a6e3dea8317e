"""Small tools each written once for every layer: a backoff policy, an LRU, task-group helpers."""
