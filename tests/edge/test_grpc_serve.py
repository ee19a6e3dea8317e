"""`ranch serve --grpc-port`: the gRPC port beside the HTTP one, its TLS, its shutdown, and a clear
answer when grpcio is missing. Real `ranch serve` processes on 127.0.0.1."""

from __future__ import annotations

import ssl
import subprocess
import sys
from pathlib import Path

import anyio
import grpc
import pytest
from a2a.types import SendMessageRequest

from _support.grpc_client import grpc_client, stub
from _support.hubkit import wait_until
from _support.sdk import said, user_message
from _support.servers import ServerProcess, free_port, ranch_serve_process
from _support.tls import self_signed

YAML = "agents:\n  - {id: echo, kind: echo}\n"
TIMEOUT = 10.0


async def echo_over_grpc(target: str, credentials: grpc.ChannelCredentials | None = None) -> str:
    channel = (
        grpc.aio.secure_channel(target, credentials) if credentials else grpc.aio.insecure_channel(target)
    )
    async with channel:
        service = stub(channel)
        request = SendMessageRequest(tenant="echo", message=user_message("ping"))
        response = await service.SendMessage(request, timeout=TIMEOUT)
    return "".join(part.text for part in response.message.parts)


async def reachable(target: str) -> bool:
    async with grpc.aio.insecure_channel(target) as channel:
        try:
            with anyio.fail_after(1):
                await channel.channel_ready()
        except TimeoutError:
            return False
    return True


def test_serve_grpc_beside_http_and_stop_both(tmp_path: Path) -> None:
    grpc_port = free_port()
    server = ranch_serve_process(tmp_path, YAML, "--grpc-port", str(grpc_port), admin_key="rk_admin")
    with server:
        banner = f"gRPC  127.0.0.1:{grpc_port}"  # printed as it starts: it may follow the first answer
        wait_until(lambda: banner in server.output(), what="the gRPC line of the start-up banner")

        async def turn() -> str:
            async with grpc_client(f"{server.url}/a2a/agents/echo") as client:
                request = SendMessageRequest(message=user_message("hello over grpc"))
                with anyio.fail_after(TIMEOUT):
                    (answer,) = [response async for response in client.send_message(request)]
            return said(answer.task) if answer.HasField("task") else answer.message.parts[0].text

        assert "hello over grpc" in anyio.run(turn)
        assert server.terminate() in (0, -15)  # uvicorn ends by raising the signal it stopped on
        assert "stopped serving A2A over gRPC" in server.output()
        assert "Application shutdown complete" in server.output()
    assert not anyio.run(reachable, f"127.0.0.1:{grpc_port}")


def test_serve_grpc_with_tls(tmp_path: Path) -> None:
    certfile, keyfile = self_signed(tmp_path)
    grpc_port = free_port()
    tls = ("--ssl-certfile", str(certfile), "--ssl-keyfile", str(keyfile))
    port = free_port()
    command = [
        *(sys.executable, "-m", "ranch", "serve", str(tmp_path / "hub.yaml"), "--port", str(port)),
        *("--db", f"sqlite+aiosqlite:///{tmp_path / 't.db'}", "--grpc-port", str(grpc_port), *tls),
    ]
    (tmp_path / "hub.yaml").write_text(YAML)
    trusted = ssl.create_default_context(cafile=str(certfile))
    with ServerProcess(command, port, scheme="https", verify=trusted, log_path=tmp_path / "serve.log"):
        credentials = grpc.ssl_channel_credentials(root_certificates=certfile.read_bytes())
        assert anyio.run(echo_over_grpc, f"127.0.0.1:{grpc_port}", credentials).endswith("ping")
        with pytest.raises(grpc.aio.AioRpcError) as plain:
            anyio.run(echo_over_grpc, f"127.0.0.1:{grpc_port}")
        assert plain.value.code() == grpc.StatusCode.UNAVAILABLE


def test_grpc_port_without_grpcio_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "hub.yaml").write_text(YAML)
    script = "import sys; sys.modules['grpc'] = None; from ranch.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", script, "serve", str(tmp_path / "hub.yaml"), "--grpc-port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        done.stderr.strip()
        == "error: --grpc-port needs grpcio: pip install 'a2a-sdk[grpc]' (make install does)"
    )
