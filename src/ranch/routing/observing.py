"""What operators see of a turn: its span and each hop's (a child of it), and the turn and hop
metrics (docs/observability.md). Off, tracing costs one check: no span, not even its attributes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from a2a.types import TaskState
from opentelemetry.trace import Span

from ranch.observe import metrics, tracing
from ranch.routing.steps import Next
from ranch.routing.trail import Hop


class TurnObserver:
    """The spans and metrics of one turn of team `team`."""

    def __init__(self, team: str) -> None:
        self.team = team
        self.began = time.perf_counter()
        self.span: Span | None = None
        """The turn's span while tracing is on; each hop's span is its child."""
        self.hop_span: Span | None = None

    def begin(self, attributes: Callable[[], dict[str, Any]]) -> None:
        """The turn starts; `attributes` are asked for only when tracing is on."""
        self.began = time.perf_counter()
        if tracing.tracer() is not None:
            self.span = tracing.start(f"ranch.turn {self.team}", attributes())

    def hop_started(self, target: str, attributes: dict[str, Any]) -> None:
        """A hop starts, inside the turn's span (asked only while there is one)."""
        if self.span is not None:
            self.hop_span = tracing.start(f"ranch.hop {target}", attributes, parent=self.span)

    def hop_failed(self, exc: BaseException) -> None:
        if self.hop_span is not None:
            tracing.failed(self.hop_span, exc)
            self.end_hop()

    def hop_done(self, hop: Hop, step: Next, invalid: Exception | None) -> None:
        metrics.hop(self.team, hop.agent, hop.ms / 1000)
        span = self.hop_span
        if span is None:
            return
        span.set_attribute("ranch.recipient", hop.recipient)
        span.set_attribute("ranch.reason", hop.reason)
        span.set_attribute("ranch.fallback", step.fallback)
        if step.loop:
            span.set_attribute("ranch.loop", True)
        if hop.problem is not None:
            span.set_attribute("ranch.routing.problem", hop.problem)
        if invalid is not None:
            tracing.failed(span, invalid)
        self.end_hop()

    def end_hop(self) -> None:
        if self.hop_span is not None:
            self.hop_span.end()
            self.hop_span = None

    def failed(self, exc: BaseException) -> None:
        tracing.failed(self.span, exc)

    def end(self, state: TaskState, hops: int) -> None:
        metrics.turn(self.team, time.perf_counter() - self.began, hops)
        span = self.span
        if span is None:
            return
        self.end_hop()  # a turn cancelled mid-hop
        span.set_attribute("ranch.hops", hops)
        span.set_attribute("ranch.state", TaskState.Name(state))
        span.end()
