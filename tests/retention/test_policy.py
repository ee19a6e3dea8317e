"""Lifetimes: the config's `retention:` section, flags and environment variables over it."""

from __future__ import annotations

import pytest

from ranch.cli import build_parser, policy_flags
from ranch.config import RetentionConfig, parse_config
from ranch.exceptions import ConfigError
from ranch.retention.policy import describe, merged

DAY = 86400.0


def test_the_section_takes_seconds_units_and_off_and_names_each_bad_field() -> None:
    config = parse_config("retention: {tasks: 30d, events: 12h, keys: 600, messages: off, every: 5m}")
    assert config.retention.tasks == 30 * DAY and config.retention.events == 12 * 3600
    assert (config.retention.keys, config.retention.messages, config.retention.every) == (600, None, 300)
    assert describe(config.retention) == "tasks 30d, events 12h, push_outbox 1w, keys 10m"

    with pytest.raises(ConfigError) as refused:
        parse_config("retention: {tasks: 3 days, push_outbox: 60, every: off, batch: 0, rooms: 1d}")
    assert refused.value.problems == [
        "retention.tasks: '3 days' is no duration: give seconds (3600) or 90s, 15m, 12h, 30d, 2w, or off",
        "retention.push_outbox: at least 3600 s (1h): an update may still be on its way",
        "retention.every: a round needs a period: give seconds or 10m, 1h (turn each lifetime off instead)",
        "retention.batch: Input should be greater than or equal to 1",
        "retention.rooms: Extra inputs are not permitted",
    ]


def test_defaults_keep_everything_but_push_outbox_leftovers() -> None:
    default = parse_config("agents: []").retention
    assert default == RetentionConfig()
    assert describe(default) == "push_outbox 1w"


def test_flags_and_environment_go_over_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANCH_RETENTION_MESSAGES", "90d")
    monkeypatch.setenv("RANCH_RETENTION_TASKS", "1d")
    args = build_parser(["serve"]).parse_args(
        ["serve", "--retention-tasks", "7d", "--retention-push-outbox", "off"]
    )
    file = parse_config("retention: {tasks: 30d, conversations: 14d}").retention

    retention = merged(file, policy_flags.retention_from(args))

    assert retention.tasks == 7 * DAY  # the flag over the variable over the file
    assert retention.messages == 90 * DAY  # the variable
    assert retention.conversations == 14 * DAY  # the file
    assert retention.push_outbox is None  # off by flag
    with pytest.raises(ConfigError, match=r"retention.push_outbox: at least .* \(--retention-push-outbox\)"):
        merged(file, {"push_outbox": 60.0})
