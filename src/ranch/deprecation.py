"""Deprecations: warn once per name, and say which version removes it and what to use instead.

    @deprecated(since="0.2.0", removal="1.0.0", use="ranch.Team.run")
    def old_run(...): ...

    warn_deprecated("--max-body", since="0.2.0", removal="1.0.0", use="--max-body-bytes")

Each deprecation is also listed in CHANGELOG.md and in docs/policies.md (compatibility).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_warned: set[str] = set()


class RanchDeprecationWarning(DeprecationWarning):
    """Something ranch will remove; the message names the version that removes it."""


def deprecation_message(name: str, *, since: str, removal: str, use: str | None = None) -> str:
    instead = f"; use {use} instead" if use else ""
    return f"{name} is deprecated since ranch {since} and will be removed in ranch {removal}{instead}"


def warn_deprecated(
    name: str, *, since: str, removal: str, use: str | None = None, stacklevel: int = 2
) -> bool:
    """Warn about `name` the first time it is used in this process; True when a warning was issued."""
    if name in _warned:
        return False
    _warned.add(name)
    message = deprecation_message(name, since=since, removal=removal, use=use)
    warnings.warn(message, RanchDeprecationWarning, stacklevel=stacklevel + 1)
    return True


def deprecated(
    *, since: str, removal: str, use: str | None = None
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Mark a function or method deprecated: the first call warns, every call still works."""

    def mark(function: Callable[P, R]) -> Callable[P, R]:
        name = f"{function.__module__}.{function.__qualname__}"

        @functools.wraps(function)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            warn_deprecated(name, since=since, removal=removal, use=use, stacklevel=2)
            return function(*args, **kwargs)

        wrapper.__doc__ = (
            f"Deprecated: {deprecation_message(name, since=since, removal=removal, use=use)}.\n\n"
            + (function.__doc__ or "")
        )
        return wrapper

    return mark


def reset() -> None:
    """Forget which deprecations warned (for tests)."""
    _warned.clear()
