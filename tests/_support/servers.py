"""Run ASGI apps and `ranch` processes for real, on loopback only.

Tests that go through a real socket catch what in-process transports hide: framing,
streaming, timeouts, shutdown. Everything here binds and connects to 127.0.0.1 only,
and every wait is bounded so a broken server fails a test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import httpx
import uvicorn

HOST = "127.0.0.1"
"""The only address these helpers ever bind or connect to."""

# Bounds on waits for a server's state (each wait returns as soon as the state is reached): wide
# enough for a slow host running the suite on every core (a clean-clone run on a VM three times
# slower per request than usual took 10-20 s to spawn two workers), narrow enough that a hang fails.
STARTED_WITHIN = 30.0
"""Seconds a server in a thread may take to accept connections."""
STOPPED_WITHIN = 30.0
"""Seconds a server in a thread may take to stop (half asked, half forced)."""
SPAWNED_WITHIN = 60.0
"""Seconds a server process may take to answer its health path."""


def free_port() -> int:
    """A port that was free a moment ago (the kernel picks it; another process could still take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def bind_socket() -> socket.socket:
    """A socket already bound to 127.0.0.1:<free port>, so no other process can take the port first."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, 0))
    return sock


SHUTDOWN_POLL = 0.005
"""Seconds between a stopping server's looks at its open connections and tasks."""


class _Server(uvicorn.Server):
    """uvicorn's server, whose main loop wakes when `stop` asks instead of at its next 0.1 s tick,
    and whose shutdown looks at what is still open every few milliseconds instead of sleeping 0.1 s
    first and then in 0.1 s steps (uvicorn 0.54 `Server.shutdown`): the same steps in the same order,
    which cost every test server a tenth of a second or more at each stop."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._woken: asyncio.Event | None = None

    def wake(self) -> None:
        """From any thread: the main loop looks at `should_exit` now."""
        loop, woken = self._loop, self._woken
        if loop is not None and woken is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already ended
                loop.call_soon_threadsafe(woken.set)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        try:
            await asyncio.wait_for(self._drained(), timeout=self.config.timeout_graceful_shutdown)
        except TimeoutError:
            for task in self.server_state.tasks:
                task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        if not self.force_exit:
            await self.lifespan.shutdown()

    async def _drained(self) -> None:
        """Until every connection has closed and every task ended (or `force_exit`)."""
        await asyncio.sleep(0)  # the connections' shutdowns run first
        while (self.server_state.connections or self.server_state.tasks) and not self.force_exit:  # noqa: ASYNC110 (uvicorn's sets, no event)
            await asyncio.sleep(SHUTDOWN_POLL)
        for server in self.servers:
            await server.wait_closed()

    def still_running(self) -> str:
        """What the server's loop is still doing (each task's chain of awaits): the clue when it will
        not stop. Read from another thread: a diagnostic only."""
        loop = self._loop
        if loop is None:
            return "(no loop)"
        tasks = [f"  {task.get_name()}: {_awaiting(task)}" for task in list(asyncio.all_tasks(loop))]
        threads = {thread.ident: thread.name for thread in threading.enumerate()}
        stacks = [
            f"  thread {threads.get(ident, ident)}: "
            + " -> ".join(
                f"{f.name} ({Path(f.filename).name}:{f.lineno})" for f in traceback.extract_stack(frame)[-6:]
            )
            for ident, frame in sys._current_frames().items()
            if ident != threading.get_ident()
        ]
        return "\n".join(tasks + stacks)

    async def main_loop(self) -> None:
        self._loop, self._woken = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), 0.1)


LEFTOVERS_WITHIN = 2.0
"""Seconds a stopped server's loop gives the tasks still running to end once cancelled."""


def _end_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what the server left running and give it LEFTOVERS_WITHIN seconds, where `asyncio.run`
    waits for ever: SQLAlchemy's graceful close of a SQLite connection cancelled mid-query can await
    aiosqlite's stopped worker thread for good (aiosqlite 0.22 under SQLAlchemy 2.1), which would hold
    the test up instead of the server's own shutdown being what is tested."""
    leftovers = asyncio.all_tasks(loop)
    for task in leftovers:
        task.cancel()
    if leftovers:
        loop.run_until_complete(asyncio.wait(leftovers, timeout=LEFTOVERS_WITHIN))
    loop.run_until_complete(loop.shutdown_asyncgens())
    with contextlib.suppress(TimeoutError):  # as asyncio.run does, within the same bound
        loop.run_until_complete(asyncio.wait_for(loop.shutdown_default_executor(), LEFTOVERS_WITHIN))


def _awaiting(task: asyncio.Task[Any]) -> str:
    """Where `task` waits: its coroutines from the outermost to the one suspended."""
    chain: list[str] = []
    awaited: Any = task.get_coro()
    while awaited is not None and len(chain) < 25:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is not None:
            chain.append(f"{frame.f_code.co_name} ({Path(frame.f_code.co_filename).name}:{frame.f_lineno})")
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    return " -> ".join(chain) or "(not started)"


class ServerThread:
    """One uvicorn server on its own event loop in a background thread.

    Give either a `port` or a pre-bound `sock` (see `bind_socket`); with neither, a socket is
    bound here, so `port` and `url` are known before `start()`. One start per instance: to
    "restart" on the same port, build a new ServerThread with that port.
    """

    def __init__(
        self,
        app: Any,
        port: int | None = None,
        *,
        sock: socket.socket | None = None,
        graceful_timeout: int = 2,
        name: str = "server",
    ) -> None:
        if port is not None and sock is not None:
            raise ValueError("give port or sock, not both")
        if port is None and sock is None:
            sock = bind_socket()
        self._sock = sock
        self.port: int = sock.getsockname()[1] if sock is not None else int(port or 0)
        config = uvicorn.Config(
            app,
            host=HOST,
            port=self.port,
            log_level="warning",
            lifespan="on",
            # An in-flight request (a slow peer, an open stream) must not hold shutdown forever.
            timeout_graceful_shutdown=graceful_timeout,
        )
        self.server = _Server(config)
        self.name = name
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        """Base URL of the server, without a trailing slash."""
        return f"http://{HOST}:{self.port}"

    def _run(self) -> None:
        sockets = [self._sock] if self._sock is not None else None
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self.server.serve(sockets=sockets))
        except BaseException as exc:  # uvicorn reports bind and lifespan failures as SystemExit
            self._error = exc
        finally:
            _end_leftovers(loop)
            loop.close()
            if self._sock is not None:
                self._sock.close()

    def start(self, timeout: float = STARTED_WITHIN) -> Self:
        """Start serving and wait (at most `timeout` s) until the server accepts connections."""
        if self._thread is not None or self.server.started:
            raise RuntimeError(f"{self.name} was already started; make a new ServerThread to restart")
        self._thread = threading.Thread(target=self._run, name=f"{self.name}:{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"{self.name} on {self.url} exited during startup: {self._error!r}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"{self.name} on {self.url} did not start within {timeout:.0f}s")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = STOPPED_WITHIN) -> None:
        """Ask the server to exit, then force it; raise if the thread still lives after `timeout` s."""
        thread = self._thread
        if thread is None:
            if self._sock is not None:
                self._sock.close()
            return
        self.server.should_exit = True
        self.server.wake()
        thread.join(timeout / 2)
        if thread.is_alive():
            self.server.force_exit = True
            thread.join(timeout / 2)
        if thread.is_alive():
            raise TimeoutError(
                f"{self.name} on {self.url} did not stop within {timeout:.0f}s; still running:\n"
                + self.server.still_running()
            )
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _tail(path: Path, limit: int = 4000) -> str:
    """The last `limit` characters of a log file, for error messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"<could not read {path}: {exc}>"
    return text[-limit:]


def ranch_serve_process(
    folder: Path,
    config: str,
    *flags: str,
    admin_key: str,
    name: str = "ranch",
    env: Mapping[str, str] | None = None,
) -> ServerProcess:
    """`ranch serve` of the YAML `config` with `flags`, as a child process (not started yet) on a free
    port: its config, SQLite file (hub.db) and log (serve.log) in `folder`; `env` adds to ours."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hub.yaml").write_text(config)
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(folder / "hub.yaml"), "--port", str(port)]
    command += ["--db", f"sqlite+aiosqlite:///{folder / 'hub.db'}", *flags]
    environment = {**os.environ, "RANCH_ADMIN_KEY": admin_key, **(env or {})}
    return ServerProcess(command, port, env=environment, log_path=folder / "serve.log", name=name)


def process_running(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's zombie may wait long for a reaper);
    it reads /proc, so Linux only."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class ServerProcess:
    """A server run as a child process (e.g. `python -m ranch serve ...`), ready once healthy.

    stdout and stderr go to one file (`log_path`, a temp file by default); its tail is in every
    startup error, and `output()` returns all of it, also after the process ended.
    """

    def __init__(
        self,
        command: Sequence[str],
        port: int,
        *,
        health_path: str = "/healthz",
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        log_path: str | os.PathLike[str] | None = None,
        name: str = "process",
        scheme: str = "http",
        verify: Any = True,
    ) -> None:
        self.command = list(command)
        self.scheme = scheme
        self.verify = verify
        """What the health check trusts (an SSL context or CA file, for a server with its own certificate)."""
        self.port = port
        self.health_path = health_path if health_path.startswith("/") else f"/{health_path}"
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.log_path: Path | None = Path(log_path) if log_path is not None else None

    @property
    def url(self) -> str:
        """Base URL of the server, without a trailing slash."""
        return f"{self.scheme}://{HOST}:{self.port}"

    @property
    def returncode(self) -> int | None:
        """The exit code, or None while it runs (or before start)."""
        return self.proc.poll() if self.proc is not None else None

    def output(self) -> str:
        """Everything the process wrote to stdout and stderr so far."""
        return self.log_path.read_text(errors="replace") if self.log_path is not None else ""

    def _healthy(self, client: httpx.Client) -> bool:
        try:
            return client.get(f"{self.url}{self.health_path}").status_code == 200
        except httpx.HTTPError:
            return False

    def start(self, timeout: float = SPAWNED_WITHIN) -> Self:
        """Spawn the command and wait (at most `timeout` s) until the health path answers 200."""
        if self.proc is not None:
            raise RuntimeError(f"{self.name} already started")
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix=f"{self.name}-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            self.command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.cwd,
            env=self.env,
        )
        deadline = time.monotonic() + timeout
        # trust_env=False: a proxy from the environment must never see loopback traffic.
        with httpx.Client(timeout=1.0, trust_env=False, verify=self.verify) as client:
            while not self._healthy(client):
                code = self.proc.poll()
                if code is not None:
                    self._close_log()
                    raise RuntimeError(
                        f"{self.name} exited with code {code} before {self.health_path} answered 200.\n"
                        f"command: {self.command}\n--- output tail ---\n{_tail(self.log_path)}"
                    )
                if time.monotonic() > deadline:
                    self.kill()
                    raise TimeoutError(
                        f"{self.name}: {self.url}{self.health_path} not 200 within {timeout:.0f}s.\n"
                        f"command: {self.command}\n--- output tail ---\n{_tail(self.log_path)}"
                    )
                time.sleep(0.1)
        return self

    def _wait(self, timeout: float) -> int | None:
        if self.proc is None:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.proc.wait(timeout)
        return None

    def kill(self, timeout: float = 5.0) -> int | None:
        """SIGKILL the process (a crash, as far as it is concerned) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        code = self._wait(timeout)
        self._close_log()
        return code

    def terminate(self, timeout: float = 10.0) -> int | None:
        """SIGTERM and wait for a graceful exit; SIGKILL if it takes longer than `timeout` s."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
        code = self._wait(timeout)
        if code is None:
            return self.kill()
        self._close_log()
        return code

    def stop(self, timeout: float = 10.0) -> int | None:
        """Stop however it takes: graceful first, then forced."""
        return self.terminate(timeout)

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


Run = Callable[..., subprocess.CompletedProcess[str]]
"""A command run to its end (`ranch("send", "helpdesk", "hi", timeout=60)`): its exit code and output."""
