"""Shared fixtures: loopback-only network, anyio on asyncio, fresh probes, databases, a fake model.

Helpers that are not fixtures live in `_support/` (servers, peers, probes, clients).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ranch.observe import tracing

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))  # `_support`, and `entry: _support.probes:Probe` in test configs
sys.path.append(str(TESTS.parent))  # `bench`: its OTLP receiver serves the tracing tests too

from _support import databases, probes, tls  # noqa: E402 - needs the path above
from _support.fake_openai import FakeOpenAI, serve_fake_openai  # noqa: E402
from _support.fuzzkit import PROFILE  # noqa: E402

pytest_plugins = ["_support.browser"]  # the page tests' chromium (`browser`)
from _support.servers import Run, ServerProcess, free_port  # noqa: E402

# -- hypothesis: the same examples on every machine, no clock in the way -------------------------

_PROFILE: dict[str, Any] = {"deadline": None, "database": None, "suppress_health_check": list(HealthCheck)}
settings.register_profile("ranch", derandomize=True, max_examples=100, **_PROFILE)
"""`make test`: derandomized (a failure reproduces), a fixed budget, no deadline (a loaded machine
runs the same examples, only slower)."""
settings.register_profile("ranch-long", derandomize=False, print_blob=True, max_examples=5000, **_PROFILE)
"""`make fuzz` (RANCH_FUZZ=long): random examples, `fuzzkit.LONG_FACTOR` times each property's budget."""
settings.load_profile(PROFILE)

tls.share()  # every httpx client of the tests shares its TLS context (_support/tls.py)

# -- the outside world --------------------------------------------------------------------------

_LOOPBACK = ("127.0.0.1", "::1", "localhost")
_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = address[0]
        if host not in _LOOPBACK:
            raise ConnectionRefusedError(f"tests may only connect to 127.0.0.1, not {host!r}")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fence off the outside world: any connection to a non-loopback host fails the test."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def fresh_probes() -> Iterator[None]:
    probes.reset()
    yield
    probes.reset()


# -- databases ----------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database at head: a SQLite file, then a PostgreSQL database at 127.0.0.1:5432, each a
    copy of the worker's migrated template (`_support.databases`); a server finds nothing to migrate.

    PostgreSQL is required: when it cannot be reached the test fails and says so.
    """
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{databases.migrated_sqlite(tmp_path / 'hub.db')}"
        return
    with databases.fresh_postgres() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database with nothing in it, as a user's first start finds it (migration tests)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
        return
    with databases.fresh_postgres(empty=True) as url:
        yield url


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database at head at 127.0.0.1:5432, for what only runs there (replicas on
    several machines). PostgreSQL is required: when it cannot be reached the test fails and says so."""
    with databases.fresh_postgres() as url:
        yield url


@pytest.fixture(scope="session", autouse=True)
def postgres_databases_dropped() -> Iterator[None]:
    """The worker's PostgreSQL databases are gone at the end: the tests' (dropped in the background
    as each test ends) and the template (made by the first test that needs it)."""
    yield
    databases.drop_postgres_databases()


# -- a model provider ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def provider() -> Iterator[tuple[FakeOpenAI, str]]:
    """One scripted OpenAI-compatible server per test module: (the fake, its base URL)."""
    with serve_fake_openai() as served:
        yield served


@pytest.fixture
def fake(provider: tuple[FakeOpenAI, str]) -> FakeOpenAI:
    """The module's fake, with an empty script and no recorded requests."""
    provider[0].reset()
    return provider[0]


@pytest.fixture
def base_url(provider: tuple[FakeOpenAI, str]) -> str:
    return provider[1]


# -- the `ranch` command, run as a user runs it ---------------------------------------------------

RANCH = [sys.executable, "-m", "ranch"]


@pytest.fixture(scope="session")
def ranch() -> Run:
    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*RANCH, *args], capture_output=True, text=True, timeout=timeout, check=False)

    return run


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`ranch serve` with no config: the built-in demo, in a real subprocess."""
    folder = tmp_path_factory.mktemp("demo")
    with _demo(f"sqlite+aiosqlite:///{folder / 'ranch.db'}", folder) as server:
        yield server


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def demo_on_each_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """The demo on SQLite, then on a fresh PostgreSQL database at 127.0.0.1:5432 (required)."""
    folder = tmp_path_factory.mktemp("demo")
    if request.param == "sqlite":
        with _demo(f"sqlite+aiosqlite:///{folder / 'ranch.db'}", folder) as server:
            yield server
        return
    with databases.fresh_postgres() as url, _demo(url, folder) as server:
        yield server


@contextlib.contextmanager
def _demo(database_url: str, folder: Path) -> Iterator[ServerProcess]:
    port = free_port()
    command = [*RANCH, "serve", "--port", str(port), "--db", database_url]
    with ServerProcess(command, port, log_path=folder / "ranch.log") as server:
        yield server


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """ranch's tracing on, every finished span kept in memory for the test to read."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    try:
        yield exporter
    finally:
        tracing.disable()
