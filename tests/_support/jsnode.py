"""The @a2a-js packages bench/js pins (`make benchjs`), for the tests that run Node peers and clients."""

from __future__ import annotations

import shutil

import pytest

from _support import TESTS

JS = TESTS.parent / "bench" / "js"


def missing(package: str) -> str | None:
    """Why Node with `package` from bench/js cannot run here (naming the step that installs it), else None."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (JS / "node_modules" / package).is_dir():
        return f"bench/js/node_modules has no {package}: run `make benchjs`"
    return None


def needs(package: str) -> pytest.MarkDecorator:
    """Skip, saying what is missing and how to install it, when `package` cannot run here."""
    why = missing(package)
    return pytest.mark.skipif(why is not None, reason=str(why))
