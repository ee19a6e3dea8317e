"""The deprecation helper warns once and names the removal version."""

from __future__ import annotations

import warnings

import pytest

from ranch import deprecation
from ranch.deprecation import RanchDeprecationWarning, deprecated, warn_deprecated


@deprecated(since="0.1.0", removal="1.0.0", use="new_add")
def old_add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_warns_once_naming_the_removal_version() -> None:
    deprecation.reset()
    with pytest.warns(
        RanchDeprecationWarning, match=r"removed in ranch 1\.0\.0; use new_add instead"
    ) as caught:
        assert old_add(1, 2) == 3
    assert caught[0].filename == __file__  # points at the caller
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert old_add(2, 3) == 5  # no second warning
    assert "Deprecated" in (old_add.__doc__ or "") and old_add.__name__ == "old_add"


def test_named_deprecations_warn_once_each() -> None:
    deprecation.reset()
    with pytest.warns(RanchDeprecationWarning, match="--old-flag is deprecated since ranch 0.1.0"):
        assert warn_deprecated("--old-flag", since="0.1.0", removal="0.3.0")
    assert not warn_deprecated("--old-flag", since="0.1.0", removal="0.3.0")
