"""`ranch serve` flags for the policies (docs/policies.md); each has an environment variable."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ranch.config import parse_duration
from ranch.fanout.signing import MIN_SECRET
from ranch.hub.app import Settings
from ranch.identity.sessions import DEFAULT_SESSION_TTL
from ranch.policy.limits import DEFAULT_MAX_MESSAGE_BYTES

RATE_FIELDS = ("caller_rate", "caller_burst", "agent_rate", "agent_burst")
FAILURE_FIELDS = ("auth_failure_rate", "auth_failure_burst")


def _env_flag(*names: str) -> bool:
    return any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on") for name in names)


def _rate(text: str) -> float | None:
    """Requests per second; `off` or 0 switches the limit off."""
    if text.strip().lower() in ("off", "none", "0", ""):
        return None
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"a rate is >= 0 requests per second, not {text}")
    return value


def _ttl(text: str) -> float | None:
    """Seconds; `off` or 0 switches sessions off."""
    if text.strip().lower() in ("off", "none", "0", ""):
        return None
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a session TTL is > 0 seconds, not {text}")
    return value


def _secret(text: str) -> str | None:
    """The replicas' shared secret; empty = none."""
    if not text:
        return None
    if len(text) < MIN_SECRET:
        raise argparse.ArgumentTypeError(f"at least {MIN_SECRET} characters, not {len(text)}")
    return text


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a number of seconds > 0, not {text}")
    return value


def _duration(text: str) -> float:
    """A lifetime or period: seconds, or with a unit (90s, 15m, 12h, 30d, 2w); `off` is 0 (off)."""
    try:
        return parse_duration(text) or 0.0
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


RETENTION_FLAGS = {
    "tasks": "finished tasks (completed, failed, canceled, rejected), from their last status change",
    "events": "room events (the WebSocket replay), from when they happened; off by default",
    "messages": "room messages (and their handled deliveries), from when posted; off by default",
    "conversations": "team conversations and remote members' sessions idle that long",
    "push_outbox": "push-outbox rows held that long (sent but not released, or given up); at least 1h",
    "keys": "API keys revoked or expired that long ago",
    "every": "the period of the pruning rounds, each on one replica",
}
"""Each `retention:` setting that has a flag (`--retention-tasks`) and a variable (RANCH_RETENTION_TASKS)."""


def add_retention_arguments(parser: argparse.ArgumentParser) -> None:
    """`--retention-*`: over the config file's `retention:` section (docs/deploy.md, "Retention")."""
    env = os.environ.get
    group = parser.add_argument_group("retention (docs/deploy.md; over the config's retention: section)")
    for name, what in RETENTION_FLAGS.items():
        variable = f"RANCH_RETENTION_{name.upper()}"
        group.add_argument(
            f"--retention-{name.replace('_', '-')}",
            dest=f"retention_{name}",
            type=_duration,
            default=env(variable) or None,
            metavar="DURATION",
            help=f"{what} (env {variable}; seconds or 30d, 12h, 15m; off)",
        )
    group.add_argument(
        "--retention-batch",
        type=int,
        default=env("RANCH_RETENTION_BATCH") or None,
        metavar="N",
        help="rows deleted per transaction (env RANCH_RETENTION_BATCH; default 500)",
    )


def retention_from(args: argparse.Namespace) -> dict[str, Any]:
    """The `retention:` settings given as flags or variables (None: not given; 0.0: off)."""
    given = {name: getattr(args, f"retention_{name}") for name in (*RETENTION_FLAGS, "batch")}
    return {name: ("off" if value == 0.0 and name != "batch" else value) for name, value in given.items()}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    group = parser.add_argument_group("policies (docs/policies.md)")
    group.add_argument(
        "--max-message-bytes",
        type=int,
        default=int(env("RANCH_MAX_MESSAGE_BYTES", DEFAULT_MAX_MESSAGE_BYTES)),
        help=f"largest message in bytes (env RANCH_MAX_MESSAGE_BYTES; default {DEFAULT_MAX_MESSAGE_BYTES})",
    )
    for name in RATE_FIELDS:
        default = getattr(Settings, name)
        flag, variable = name.replace("_", "-"), f"RANCH_{name.upper()}"
        kind = _rate if name.endswith("rate") else int
        what = "requests/s" if name.endswith("rate") else "bucket size"
        group.add_argument(
            f"--{flag}",
            type=kind,
            default=kind(env(variable, str(default))),
            help=f"{what} (env {variable}; default {default}{'; off = unlimited' if kind is _rate else ''})",
        )
    group.add_argument(
        "--auth-failure-rate",
        type=_rate,
        default=_rate(env("RANCH_AUTH_FAILURE_RATE", str(Settings.auth_failure_rate))),
        help="refused API keys per second per client address, refilled; past the burst the address "
        f"gets 429 (env RANCH_AUTH_FAILURE_RATE; default {Settings.auth_failure_rate}; off = unlimited)",
    )
    group.add_argument(
        "--auth-failure-burst",
        type=int,
        default=int(env("RANCH_AUTH_FAILURE_BURST", str(Settings.auth_failure_burst))),
        help=f"refused API keys an address may present at once (env RANCH_AUTH_FAILURE_BURST; "
        f"default {Settings.auth_failure_burst})",
    )
    group.add_argument(
        "--redis-url",
        default=env("RANCH_REDIS_URL") or None,
        help="share rate limits and events with the other replicas through Redis (env RANCH_REDIS_URL)",
    )
    group.add_argument(
        "--redis-prefix",
        default=env("RANCH_REDIS_PREFIX", "ranch"),
        help="what this hub's Redis keys and channels start with (env RANCH_REDIS_PREFIX; default ranch)",
    )
    group.add_argument(
        "--cluster-secret",
        type=_secret,
        default=env("RANCH_CLUSTER_SECRET", ""),
        metavar="SECRET",
        help="a secret every replica shares (16+ characters): what they write to Redis is signed with it "
        "and what is not is dropped (env RANCH_CLUSTER_SECRET, preferred: flags show in ps); docs/deploy.md",
    )
    group.add_argument(
        "--allow-private-outbound",
        "--allow-loopback-webhooks",  # its old name, when it covered push webhooks only
        dest="allow_private_outbound",
        action="store_true",
        default=_env_flag("RANCH_ALLOW_PRIVATE_OUTBOUND", "RANCH_ALLOW_LOOPBACK_WEBHOOKS"),
        help="let what tenants steer (webhooks, their agents, cards, model providers, MCP servers) reach "
        "loopback/private addresses; local development only (env RANCH_ALLOW_PRIVATE_OUTBOUND)",
    )
    group.add_argument(
        "--card-timeout",
        type=_positive,
        default=_positive(env("RANCH_CARD_TIMEOUT", "5")),
        help="seconds to fetch a remote agent's card (env RANCH_CARD_TIMEOUT; default 5)",
    )
    group.add_argument(
        "--max-card-bytes",
        type=int,
        default=int(env("RANCH_MAX_CARD_BYTES", str(512 * 1024))),
        help="largest remote agent card read, in bytes (env RANCH_MAX_CARD_BYTES; default 524288)",
    )
    group.add_argument(
        "--max-reply-bytes",
        type=int,
        default=int(env("RANCH_MAX_REPLY_BYTES", "0")) or None,
        help="largest member reply, in bytes (env RANCH_MAX_REPLY_BYTES; default --max-message-bytes)",
    )
    group.add_argument(
        "--auth",
        choices=["off", "keys"],
        default=env("RANCH_AUTH", "off"),
        help="keys: every A2A call and /mcp need an API key (env RANCH_AUTH; default off)",
    )
    group.add_argument(
        "--session-ttl",
        type=_ttl,
        default=_ttl(env("RANCH_SESSION_TTL", str(DEFAULT_SESSION_TTL))),
        help=f"seconds a (caller, context) session lives unused (env RANCH_SESSION_TTL; "
        f"default {DEFAULT_SESSION_TTL:g}; off = no sessions)",
    )
    group.add_argument(
        "--signing-key",
        default=env("RANCH_SIGNING_KEY") or None,
        help="PEM private key that signs every served agent card (env RANCH_SIGNING_KEY)",
    )
    group.add_argument(
        "--debug",
        action="store_true",
        default=_env_flag("RANCH_DEBUG", "PROTOCOL_DEBUG"),
        help="log messages (the first 4 KB) and timings, still scrubbed (env RANCH_DEBUG or PROTOCOL_DEBUG)",
    )
    add_retention_arguments(parser)


def settings_from(args: argparse.Namespace) -> dict[str, Any]:
    """The `Settings` fields these flags set."""
    return {
        "max_message_bytes": args.max_message_bytes,
        **{name: getattr(args, name) for name in RATE_FIELDS + FAILURE_FIELDS},
        "redis_url": args.redis_url,
        "redis_prefix": args.redis_prefix,
        "cluster_secret": args.cluster_secret,
        "allow_private_outbound": args.allow_private_outbound,
        "card_timeout": args.card_timeout,
        "max_card_bytes": args.max_card_bytes,
        "max_reply_bytes": args.max_reply_bytes,
        "debug": args.debug,
        "auth": args.auth,
        "session_ttl": args.session_ttl,
        "signing_key": args.signing_key,
    }
