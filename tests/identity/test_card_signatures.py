"""Agent-card signatures: ranch signs what it serves; remote cards are verified when configured."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from a2a.types import AgentCard
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from google.protobuf.json_format import ParseDict

from _support.hubkit import serve_ranch
from _support.peers import running_peer
from ranch.catalog.registry import Registry
from ranch.config import parse_config
from ranch.exceptions import ConfigError
from ranch.wire.cards import build_card
from ranch.wire.client import ClientPool
from ranch.wire.signing import CardSigner, CardVerifier, SignatureVerificationError, load_trusted_keys

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


def write_key(directory: Path, name: str, key: PrivateKey) -> tuple[Path, Path]:
    """The private key's PEM file and its public key's PEM file."""
    private = directory / f"{name}.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    public = directory / f"{name}.pub.pem"
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def a_card() -> AgentCard:
    return build_card(
        agent_id="a",
        name="A",
        description="é and ü",
        skills=[],
        extensions=[],
        base_url="http://h",
        version="1",
    )


KEYS: dict[str, Callable[[], PrivateKey]] = {
    "RS256": lambda: rsa.generate_private_key(65537, 2048),
    "ES256": lambda: ec.generate_private_key(ec.SECP256R1()),
    "EdDSA": ed25519.Ed25519PrivateKey.generate,
}


@pytest.mark.parametrize("alg", list(KEYS))
def test_a_signed_card_verifies_with_the_public_key_and_fails_once_tampered(tmp_path: Path, alg: str) -> None:
    private, public = write_key(tmp_path, "k", KEYS[alg]())
    signer = CardSigner.from_file(private)
    assert signer.alg == alg
    card = signer.sign(a_card())
    verify = CardVerifier(load_trusted_keys([public]))
    verify(card)
    jwks = tmp_path / "jwks.json"
    jwks.write_text(httpx.Response(200, json=signer.jwks()).text)
    CardVerifier(load_trusted_keys([jwks]))(card)  # the same key as a JWKS
    card.description = "tampered"
    with pytest.raises(SignatureVerificationError):
        verify(card)
    with pytest.raises(SignatureVerificationError):
        verify(a_card())  # no signature at all


def test_unreadable_keys_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="missing.pem"):
        CardSigner.from_file(tmp_path / "missing.pem")
    (tmp_path / "bad.pem").write_text("not a key")
    with pytest.raises(ValueError, match="bad.pem"):
        load_trusted_keys([tmp_path / "bad.pem"])
    config = parse_config(
        f"""
agents:
  - id: peer
    kind: remote
    url: http://127.0.0.1:1
    verify_card: true
    trusted_keys: [{tmp_path / "bad.pem"}]
"""
    )
    with pytest.raises(ConfigError, match="agent 'peer'"):
        Registry(config, ClientPool())
    with pytest.raises(ConfigError, match="verify_card needs trusted_keys"):
        parse_config("agents: [{id: p, kind: remote, url: 'http://127.0.0.1:1', verify_card: true}]")


def test_ranch_serves_signed_cards_and_its_public_key(tmp_path: Path) -> None:
    private, public = write_key(tmp_path, "hub", ec.generate_private_key(ec.SECP256R1()))
    config = "agents: [{id: greeter, kind: echo}]"
    with serve_ranch(config, tmp_path / "t.db", signing_key=str(private), auth="keys") as ranch:
        served = httpx.get(f"{ranch.agent_url('greeter')}/.well-known/agent-card.json").json()
        jwks = httpx.get(f"{ranch.url}/.well-known/jwks.json").json()
    card = ParseDict(served, AgentCard(), ignore_unknown_fields=True)  # 0.3 fields sit beside 1.0 ones
    assert len(card.signatures) == 2 and card.security_schemes  # 1.0's and 0.3's; the schemes are signed too
    CardVerifier(load_trusted_keys([public]))(card)
    assert jwks["keys"][0]["kid"] == CardSigner.from_file(private).kid
    card.name = "someone else"
    with pytest.raises(SignatureVerificationError):
        CardVerifier(load_trusted_keys([public]))(card)


A2A03_PYTHON = Path(__file__).parents[2] / ".venv-a2a03" / "bin" / "python"
VERIFY_V03 = Path(__file__).parents[1] / "a2a03" / "verify_card.py"


@pytest.mark.parametrize("alg", list(KEYS))
def test_a_signed_card_verifies_in_an_a2a_0_3_client(tmp_path: Path, alg: str) -> None:
    """The real a2a-sdk 0.3 verifier, in its own venv (`make a2a03`), checks what ranch serves."""
    if not A2A03_PYTHON.exists():
        pytest.fail(f"this test needs a2a-sdk 0.3 in {A2A03_PYTHON.parent.parent}: run `make a2a03`")
    private, public = write_key(tmp_path, "hub", KEYS[alg]())
    other_private, other_public = write_key(tmp_path, "other", KEYS[alg]())
    config = """
agents:
  - {id: greeter, kind: echo, name: "Grüße", description: "é, ü and a skill", skills: [{id: s, name: S}]}
teams:
  - {id: crew, members: [greeter], default_agent: greeter}
"""
    with serve_ranch(config, tmp_path / "t.db", signing_key=str(private), auth="keys") as ranch:
        for agent in ("greeter", "crew"):
            verified = _verify_v03(ranch.agent_url(agent), public)
            assert verified.returncode == 0 and verified.stdout.startswith("verified"), verified.stdout
        refused = _verify_v03(ranch.agent_url("greeter"), other_public)  # the wrong key never verifies
        assert refused.returncode == 1 and "InvalidSignaturesError" in refused.stdout, refused.stdout
    assert other_private.exists()


def _verify_v03(url: str, public_key: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(A2A03_PYTHON), str(VERIFY_V03), url, str(public_key)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def ask(url: str) -> dict[str, object]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        },
    }
    answer: dict[str, object] = httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=30).json()
    return answer


@pytest.mark.parametrize("signed_by", ["trusted", "stranger", None])
def test_a_remote_card_must_carry_a_trusted_signature_when_verify_card_is_on(
    tmp_path: Path, signed_by: str | None
) -> None:
    _trusted_private, trusted = write_key(tmp_path, "trusted", ec.generate_private_key(ec.SECP256R1()))
    stranger_private, _ = write_key(tmp_path, "stranger", ec.generate_private_key(ec.SECP256R1()))
    signers = {"trusted": _trusted_private, "stranger": stranger_private}
    sign: Callable[[AgentCard], AgentCard] | None = (
        CardSigner.from_file(signers[signed_by]).sign if signed_by else None
    )
    with running_peer("plain", sign=sign) as peer:
        config = f"""
agents:
  - id: partner
    kind: remote
    url: {peer.url}
    verify_card: true
    trusted_keys: [{trusted}]
"""
        with serve_ranch(config, tmp_path / "t.db") as ranch:
            answer = ask(ranch.agent_url("partner"))
    if signed_by == "trusted":
        assert "result" in answer, answer
        return
    error = answer.get("error") or answer["result"]["task"]["status"]["message"]  # type: ignore[index]
    text = str(error)
    assert "agent 'partner'" in text and "no signature from a trusted key" in text, answer
    assert not peer.recorder.posts()  # the message never reached the refused peer
