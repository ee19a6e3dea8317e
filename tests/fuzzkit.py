"""Hypothesis settings and strategies shared by the fuzz tests (A2A bindings, REST API, WebSocket, MCP).

In the suite every property runs derandomized with a fixed example budget, so a run is the same
on every machine and a failure reproduces. `make fuzz` sets `RANCH_FUZZ=long`: the same
properties, random, with `LONG_FACTOR` times the examples. An input that once failed stays as
an explicit `@example` of its property.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

PROFILES = ("ci", "long")
LONG_FACTOR = 50
"""How many times each property's budget `make fuzz` runs."""
PROFILE = os.environ.get("RANCH_FUZZ", "ci")
if PROFILE not in PROFILES:
    raise ValueError(f"RANCH_FUZZ must be one of {', '.join(PROFILES)}, not {PROFILE!r}")

_COMMON: dict[str, Any] = {"deadline": None, "database": None, "suppress_health_check": list(HealthCheck)}
settings.register_profile("ranch-fuzz-ci", derandomize=True, **_COMMON)
settings.register_profile("ranch-fuzz-long", derandomize=False, print_blob=True, **_COMMON)


def fuzzing(examples: int) -> settings:
    """The settings of one fuzz property: `examples` derandomized, or random and longer under `make fuzz`."""
    scale = LONG_FACTOR if PROFILE == "long" else 1
    return settings(settings.get_profile(f"ranch-fuzz-{PROFILE}"), max_examples=examples * scale)


json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
"""Any JSON value, nested a few levels."""


def nested(depth: int, leaf: str = "1") -> str:
    """A JSON object nesting `depth` levels: `{"a":{"a":…1…}}`."""
    return '{"a":' * depth + leaf + "}" * depth
