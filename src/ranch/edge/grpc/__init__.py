"""A2A's gRPC binding: one port serving every agent and team, the request's `tenant` naming it.

grpcio comes with `a2a-sdk[grpc]`; without it nothing here is imported and `--grpc-port`
answers with `MISSING`, one line (`available`).
"""

from __future__ import annotations

MISSING = "--grpc-port needs grpcio: pip install 'a2a-sdk[grpc]' (make install does)"


def available() -> bool:
    """Whether grpcio can be imported (asked only when gRPC is to be served)."""
    try:
        import grpc  # noqa: F401
    except ImportError:
        return False
    return True
