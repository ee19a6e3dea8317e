"""gRPC: SendMessage to an echo agent over A2A gRPC, ranch beside its JSON-RPC and the a2a-sdk's server.

Three rows per concurrency: `ranch serve --grpc-port` (its defaults, access log on, rate limits
off) called over gRPC with the agent as `tenant`; the same process over JSON-RPC at
/a2a/agents/echo (the load of bench/wire.py); and the a2a-sdk's own gRPC server (`GrpcHandler`
over `DefaultRequestHandler`) serving the same echo executor as bench/servers.py. One server
process each, pinned to one core; load from a separate process: `python -m bench.grpc load
TARGET ...` (grpc.aio, one channel, C calls in flight) or bench/load.py for JSON-RPC.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from bench.common import (
    LOAD_CPUS,
    SERVER_CPUS,
    cpu_seconds,
    free_port,
    load_run,
    percentile,
    ranch_serve,
    server_process,
    table,
)
from bench.servers import RANCH_CONFIG
from bench.wire import load as jsonrpc_load
from bench.wire import rpc

TENANT = "echo"
MESSAGE: dict[str, object] = {
    "message": {"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": "hello"}]}
}


# -- the load: one channel, C calls in flight ------------------------------------------------------


async def grpc_load(target: str, tenant: str, concurrency: int, seconds: float) -> dict[str, float]:
    import grpc
    from a2a.types import Message, Part, Role, SendMessageRequest, a2a_pb2_grpc

    request = SendMessageRequest(
        tenant=tenant,
        message=Message(role=Role.ROLE_USER, message_id="m-1", parts=[Part(text="hello")]),
    )
    metadata = (("a2a-version", "1.0"),)
    latencies: list[float] = []
    errors = 0
    async with grpc.aio.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        await stub.SendMessage(request, metadata=metadata, timeout=10)  # connected before the clock
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                try:
                    await stub.SendMessage(request, metadata=metadata, timeout=10)
                except grpc.aio.AioRpcError:
                    errors += 1
                latencies.append(time.perf_counter() - started)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - began
    return {
        "requests": len(latencies),
        "errors": errors,
        "rps": len(latencies) / elapsed,
        "p50_ms": percentile(latencies, 0.5) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }


def load(target: str, concurrency: int, seconds: float, tenant: str = TENANT) -> dict[str, float]:
    """One gRPC load run from a separate process (pinned to the load cores)."""
    command = [sys.executable, "-m", "bench.grpc", "load", target, "--tenant", tenant]
    command += ["--concurrency", str(concurrency), "--seconds", str(seconds)]
    return load_run(command, seconds)


# -- the a2a-sdk's own gRPC server -------------------------------------------------------------------


def sdk_grpc_app(grpc_port: int) -> Any:
    """A Starlette app (its health for the runner) whose lifespan serves the a2a-sdk's gRPC server."""
    import grpc
    from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
    from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, a2a_pb2_grpc
    from starlette.applications import Starlette

    from bench.servers import EchoExecutor

    card = AgentCard(
        name="echo",
        description="echo",
        version="1",
        supported_interfaces=[
            AgentInterface(protocol_binding="GRPC", protocol_version="1.0", url=f"127.0.0.1:{grpc_port}")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        server = grpc.aio.server()
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)  # type: ignore[no-untyped-call]
        server.add_insecure_port(f"127.0.0.1:{grpc_port}")
        await server.start()
        yield
        await server.stop(1)

    return Starlette(lifespan=lifespan)


@contextlib.contextmanager
def servers(folder: Path) -> Iterator[dict[str, tuple[int, str]]]:
    """ranch (gRPC and JSON-RPC in one process) and the a2a-sdk gRPC server: name -> (pid, target)."""
    config = folder / "bench.yaml"
    config.write_text(RANCH_CONFIG)
    port, grpc_port = free_port(), free_port()
    sdk_http, sdk_grpc = free_port(), free_port()
    ranch = ranch_serve(config, port, folder / "ranch.db", "--grpc-port", str(grpc_port), quiet_log=False)
    sdk = [sys.executable, "-m", "bench.grpc", "serve-sdk", str(sdk_http), str(sdk_grpc)]
    with (
        server_process(
            ranch, f"http://127.0.0.1:{port}/healthz", quiet=True, cpus=SERVER_CPUS, log=folder / "ranch.log"
        ) as ranch_process,
        server_process(sdk, f"http://127.0.0.1:{sdk_http}/", quiet=True, cpus=SERVER_CPUS) as sdk_process,
    ):
        yield {
            "ranch gRPC (`ranch serve --grpc-port`)": (ranch_process.pid, f"127.0.0.1:{grpc_port}"),
            "ranch JSON-RPC (same process)": (ranch_process.pid, f"http://127.0.0.1:{port}/a2a/agents/echo"),
            "a2a-sdk gRPC server (GrpcHandler)": (sdk_process.pid, f"127.0.0.1:{sdk_grpc}"),
        }


def measure(seconds: float) -> list[list[object]]:
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="ranch-grpc-") as folder, servers(Path(folder)) as running:
        for concurrency in (1, 32):
            results: dict[str, dict[str, float]] = {}
            for name, (pid, target) in running.items():
                before = cpu_seconds(pid)
                if target.startswith("http"):
                    row = jsonrpc_load(target, rpc("SendMessage", MESSAGE), concurrency, seconds, {})
                else:
                    row = load(target, concurrency, seconds)
                row["cpu_us"] = (cpu_seconds(pid) - before) / max(1.0, row["requests"]) * 1e6
                results[name] = row
            sdk_rps = results["a2a-sdk gRPC server (GrpcHandler)"]["rps"]
            for name, row in results.items():
                rows.append(
                    [
                        concurrency,
                        name,
                        f"{row['rps']:.0f}",
                        f"{row['p50_ms']:.2f}",
                        f"{row['p99_ms']:.2f}",
                        f"{row['cpu_us']:.0f}",
                        int(row["errors"]),
                        f"{row['rps'] / sdk_rps:.2f}x",
                    ]
                )
    return rows


def main(argv: list[str] | None = None) -> str:
    seconds = float(argv[0]) if argv else 5.0
    header = ["c", "server", "req/s", "p50 ms", "p99 ms", "server CPU µs/req", "errors", "vs a2a-sdk gRPC"]
    pinning = "no pinning"
    if SERVER_CPUS and LOAD_CPUS:
        pinning = f"servers pinned to core {min(SERVER_CPUS)}, load to {sorted(LOAD_CPUS)}"
    note = (
        f"SendMessage to an echo agent (answers with a Message), {seconds:g} s per row, one run ({pinning}); "
        "ranch's two rows are one `ranch serve` process (access log on, rate limits off)."
    )
    section = table("gRPC", header, measure(seconds), note)
    print(section)
    return section


def _cli() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "load":
        parser = argparse.ArgumentParser(prog="python -m bench.grpc load")
        parser.add_argument("target")
        parser.add_argument("--tenant", default=TENANT)
        parser.add_argument("--concurrency", type=int, default=1)
        parser.add_argument("--seconds", type=float, default=5.0)
        args = parser.parse_args(sys.argv[2:])
        print(json.dumps(asyncio.run(grpc_load(args.target, args.tenant, args.concurrency, args.seconds))))
    elif len(sys.argv) > 1 and sys.argv[1] == "serve-sdk":
        import uvicorn

        http_port, grpc_port = int(sys.argv[2]), int(sys.argv[3])
        uvicorn.run(sdk_grpc_app(grpc_port), host="127.0.0.1", port=http_port, log_level="warning")
    else:
        main(sys.argv[1:])


if __name__ == "__main__":
    _cli()
