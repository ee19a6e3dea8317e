"""The lifetimes in force: the config's `retention:` section, with flags and environment over it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from ranch.config import RetentionConfig, retention_problems
from ranch.exceptions import ConfigError

LIFETIMES = ("tasks", "events", "messages", "conversations", "push_outbox", "keys")
"""Each lifetime `retention:` takes, in the order rounds prune and reports list them."""
ROUND_BUDGET = 60.0
"""Seconds one background round may delete for at most; what is left waits for the next round."""


def merged(config: RetentionConfig, overrides: Mapping[str, Any]) -> RetentionConfig:
    """`config` with the settings given as flags or environment variables (None: not given) over it;
    checked like the file's section, so a bad value is an error naming its field."""
    given = {name: value for name, value in overrides.items() if value is not None}
    try:
        return RetentionConfig.model_validate({**config.model_dump(), **given})
    except ValidationError as exc:
        raise ConfigError(retention_problems(exc, flagged=given)) from None


def lifetimes(config: RetentionConfig) -> dict[str, float]:
    """The lifetimes that are on, in seconds, by name."""
    on = {name: getattr(config, name) for name in LIFETIMES}
    return {name: float(seconds) for name, seconds in on.items() if seconds is not None}


def round_budget(config: RetentionConfig) -> float:
    """How long one background round may run: at most half its period, so rounds never overlap."""
    return min(ROUND_BUDGET, config.every / 2)


def describe(config: RetentionConfig) -> str:
    """`tasks 30d, push_outbox 7d` (or `nothing`): what a log line or `ranch db prune` says is in force."""
    on = lifetimes(config)
    return ", ".join(f"{name} {_short(seconds)}" for name, seconds in on.items()) or "nothing"


def _short(seconds: float) -> str:
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"
