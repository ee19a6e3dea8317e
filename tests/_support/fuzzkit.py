"""Hypothesis budgets and strategies shared by the property tests (bindings, REST API, WebSocket, MCP,
the codec, the JSON-RPC dispatcher and the task store).

conftest.py loads one profile for the whole run. In the suite (`ranch`) every property runs
derandomized with a fixed example budget and no deadline, so a run is the same on every machine,
however loaded, and a failure reproduces. `make fuzz` sets `RANCH_FUZZ=long` (`ranch-long`): the
same properties, random, with `LONG_FACTOR` times the examples. An input that once failed stays as
an explicit `@example` of its property.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st

PROFILES = {"ci": "ranch", "long": "ranch-long"}
"""`RANCH_FUZZ` -> the hypothesis profile conftest.py loads."""
LONG_FACTOR = 50
"""How many times each property's budget `make fuzz` runs."""
MODE = os.environ.get("RANCH_FUZZ", "ci")
if MODE not in PROFILES:
    raise ValueError(f"RANCH_FUZZ must be one of {', '.join(PROFILES)}, not {MODE!r}")
PROFILE = PROFILES[MODE]


def fuzzing(examples: int) -> settings:
    """The settings of one property: `examples` of them in the suite, `LONG_FACTOR` times that under
    `make fuzz`; everything else comes from the loaded profile."""
    scale = LONG_FACTOR if MODE == "long" else 1
    return settings(settings.get_profile(PROFILE), max_examples=examples * scale)


json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
"""Any JSON value, nested a few levels."""


def nested(depth: int, leaf: str = "1") -> str:
    """A JSON object nesting `depth` levels: `{"a":{"a":…1…}}`."""
    return '{"a":' * depth + leaf + "}" * depth
