"""Where the gRPC server listens (importable without grpcio: cards name it)."""

from __future__ import annotations


class GrpcPort:
    """The gRPC server's address; `port` is the bound one once it runs (0 picks a free port)."""

    def __init__(self, host: str, port: int, tls: tuple[str, str] | None = None) -> None:
        self.host, self.port, self.tls = host, port, tls

    def target(self, host: str) -> str:
        """The interface URL cards list: `host:port`, the target a gRPC channel dials."""
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"
