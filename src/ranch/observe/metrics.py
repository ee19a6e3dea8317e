"""Prometheus metrics, served at `GET /metrics` when `ranch serve --metrics` is on.

The metrics are prometheus-client's, registered once per process. Off (the default), each
recording function returns on one flag check, so the request path pays nothing. With
`--workers N`, every worker writes its samples to `PROMETHEUS_MULTIPROC_DIR` (set by
`ranch serve` before the workers start) and `/metrics`, answered by any one of them, sums
them all (`render`). docs/observability.md lists every metric.
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector

CONTENT_TYPE = CONTENT_TYPE_LATEST
MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus-client's own variable: where each worker process writes its samples."""

_enabled = False
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_HOPS = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50)
_BATCH = (1, 2, 4, 8, 16, 32, 64, 128, 256)

REQUESTS = Counter(
    "ranch_requests", "HTTP requests answered, by entry, method and status", ["entry", "method", "status"]
)
TURN_SECONDS = Histogram("ranch_turn_seconds", "Team turns, start to end", ["team"], buckets=_SECONDS)
TURN_HOPS = Histogram("ranch_turn_hops", "Hops per team turn", ["team"], buckets=_HOPS)
HOP_SECONDS = Histogram(
    "ranch_hop_seconds", "One member's hop in a team turn", ["team", "agent"], buckets=_SECONDS
)
ERRORS = Counter("ranch_errors", "Errors answered or ending a turn, by ranch error type", ["type"])
RATE_LIMITED = Counter("ranch_rate_limited", "Requests refused by a rate limit, by bucket", ["bucket"])
RUNS = Gauge("ranch_runs_in_flight", "Agent runs (task turns) in flight", multiprocess_mode="livesum")
WEBSOCKETS = Gauge("ranch_websockets_open", "Open WebSocket connections", multiprocess_mode="livesum")
COMMIT_BATCH = Histogram("ranch_commit_batch_rows", "Rows per group commit of the task store", buckets=_BATCH)
PUSH_ATTEMPTS = Counter("ranch_push_attempts", "Push notification POSTs tried")
PUSH_FAILURES = Counter("ranch_push_failures", "Push notifications given up after every attempt")


def enable() -> None:
    """Record from now on (`--metrics`)."""
    global _enabled
    _enabled = True


def disable() -> None:
    global _enabled
    _enabled = False


def enabled() -> bool:
    return _enabled


def render() -> bytes:
    """The Prometheus text of every metric: this process's, or all workers' in multiprocess mode."""
    if os.environ.get(MULTIPROCESS_DIR):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
    return generate_latest()


# -- recording: each returns at once while metrics are off ----------------------------------------


def request(entry: str, method: str, status: int) -> None:
    if _enabled:
        REQUESTS.labels(entry, method, str(status)).inc()


def turn(team: str, seconds: float, hops: int) -> None:
    if _enabled:
        TURN_SECONDS.labels(team).observe(seconds)
        TURN_HOPS.labels(team).observe(hops)


def hop(team: str, agent: str, seconds: float) -> None:
    if _enabled:
        HOP_SECONDS.labels(team, agent).observe(seconds)


def error(kind: str) -> None:
    if _enabled:
        ERRORS.labels(kind).inc()


def rate_limited(bucket: str) -> None:
    if _enabled:
        RATE_LIMITED.labels(bucket).inc()


def runs(change: int) -> None:
    if _enabled:
        RUNS.inc(change)


def websockets(change: int) -> None:
    if _enabled:
        WEBSOCKETS.inc(change)


def commit_batch(rows: int) -> None:
    if _enabled:
        COMMIT_BATCH.observe(rows)


def push_attempt() -> None:
    if _enabled:
        PUSH_ATTEMPTS.inc()


def push_failure() -> None:
    if _enabled:
        PUSH_FAILURES.inc()
