"""Which members of a team changed: compared by a fingerprint of their config entries.

A recorded replay gives back an unchanged member's recorded answer and calls the others, so it
must tell them apart. A member's fingerprint is a hash of its config entry (a member team's: of its
own entry and its members' fingerprints), so it can be kept in a suite file (`baseline:`) without
the config itself, its secrets included.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping

from ranch.config import RanchConfig, TeamConfig, load_config
from ranch.exceptions import ConfigError
from ranch.replay.recording import ReplayInputError

Fingerprints = dict[str, str]
"""Member id (and the team's own id) -> the hash of its config entry."""


def team_of(config: RanchConfig, team: str, source: str) -> TeamConfig:
    """The team `team` of `config`; a one-line error naming the teams there when it is not one."""
    for entry in config.teams:
        if entry.id == team:
            return entry
    teams = ", ".join(entry.id for entry in config.teams) or "none"
    raise ReplayInputError(f"{source} has no team '{team}' (its teams: {teams})")


def fingerprints(config: RanchConfig, team: str) -> Fingerprints:
    """The team's own entry's fingerprint, and each of its members' (a member team's covers its
    members too)."""
    entries = {entry.id: entry for entry in [*config.agents, *config.teams]}
    found: Fingerprints = {}

    def of(agent_id: str) -> str:
        if agent_id not in found:
            entry = entries[agent_id]
            data = entry.model_dump(mode="json")
            if isinstance(entry, TeamConfig):  # a member team changes when anything inside it does
                data["members"] = {member: of(member) for member in entry.members}
            found[agent_id] = _hash(data)
        return found[agent_id]

    own = team_of(config, team, "the config")
    for member in own.members:
        of(member)
    found[team] = _hash(own.model_dump(mode="json"))  # its own settings: the members count apart
    return found


def _hash(data: object) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def changed_members(
    config: RanchConfig, team: str, baseline: Mapping[str, str] | None, named: Collection[str] = ()
) -> dict[str, str]:
    """Member -> why it counts as changed: named (`--changed`), not in the baseline, or its entry
    differs from it. Without a baseline, only the named members have changed."""
    now = fingerprints(config, team)
    members = team_of(config, team, "the config").members
    changed: dict[str, str] = {}
    for member in members:
        if member in named:
            changed[member] = "named by --changed"
        elif baseline is None:
            continue
        elif member not in baseline:
            changed[member] = "new"
        elif baseline[member] != now[member]:
            changed[member] = "changed"
    return changed


def team_settings_changed(config: RanchConfig, team: str, baseline: Mapping[str, str] | None) -> bool:
    """Whether the team's own entry (routes, max_hops, members...) differs from the baseline's."""
    if baseline is None or team not in baseline:
        return False
    return fingerprints(config, team)[team] != baseline[team]


def checked_config(path: str, shown: str | None = None) -> RanchConfig:
    """The config at `path`, or one line saying it fails `ranch check` (its first problem); `shown`
    names it in that line instead of its path (the REST replay names a config, never its file)."""
    named = shown or path
    try:
        return load_config(path)
    except ConfigError as exc:
        more = ""
        if len(exc.problems) > 1:
            command = "ranch check" if shown else f"ranch check {path}"
            more = f" (and {len(exc.problems) - 1} more; `{command}` lists them)"
        first = exc.problems[0].replace(path, named)  # a named config's file stays the operator's
        raise ReplayInputError(f"{named} fails `ranch check`: {first}{more}") from exc
