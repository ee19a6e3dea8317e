"""`ranch.__all__` is exactly the public names, sorted, and `import ranch` stays cheap."""

from __future__ import annotations

import subprocess
import sys
import types

import ranch


def test_all_is_exactly_the_public_names_sorted() -> None:
    for name in ranch.__all__:  # the lazy names load here, as a user's import would load them
        getattr(ranch, name)
    public = [
        name
        for name, value in vars(ranch).items()
        if (not name.startswith("_") or name == "__version__") and not isinstance(value, types.ModuleType)
    ]
    assert ranch.__all__ == sorted(public)


def test_the_lazy_names_are_the_objects_their_modules_define() -> None:
    from ranch.config import RanchConfig
    from ranch.hub.app import Settings, create_app

    assert (ranch.create_app, ranch.Settings, ranch.RanchConfig) == (create_app, Settings, RanchConfig)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        ranch.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("ranch.NoSuchThing should not exist")


def test_import_ranch_loads_neither_the_server_nor_the_config_nor_the_agent_types() -> None:
    code = "import sys, ranch; print(' '.join(sorted(sys.modules)))"
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    heavy = {
        "ranch.hub.app",
        "ranch.config",
        "starlette.applications",
        "sqlalchemy",
        "uvicorn",
        "openai",
        "yaml",
    }
    assert loaded & heavy == set()
    # the agent, team and routing types load on first use too (`ranch --help` does without them)
    assert {"ranch.agents.base", "ranch.routing.team", "ranch.wire.client_routing"} & loaded == set()


def test_star_import_gives_the_public_names() -> None:
    namespace: dict[str, object] = {}
    exec("from ranch import *", namespace)
    assert set(ranch.__all__) <= set(namespace)
