"""Fetch an agent card and verify its signature as an a2a-sdk 0.3.x client does (run with .venv-a2a03).

Usage: verify_card.py AGENT_URL PUBLIC_KEY_PEM. Prints "verified <name>" and exits 0, or prints the
verifier's error and exits 1. Not collected by pytest: it runs in the 0.3 venv, as a subprocess.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx
from a2a.client import A2ACardResolver
from a2a.utils.signing import create_signature_verifier
from cryptography.hazmat.primitives import serialization


async def main(url: str, key_pem: bytes) -> int:
    key = serialization.load_pem_public_key(key_pem)
    verify = create_signature_verifier(lambda kid, jku: key, ["RS256", "ES256", "EdDSA"])  # type: ignore[arg-type,return-value]
    async with httpx.AsyncClient(timeout=10) as http:
        try:
            card = await A2ACardResolver(http, url).get_agent_card(signature_verifier=verify)
        except Exception as exc:
            print(f"{type(exc).__name__}: {exc}")
            return 1
    print(f"verified {card.name}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], Path(sys.argv[2]).read_bytes())))
