"""Agent-card signatures (A2A 1.0 and 0.3): sign the cards ranch serves, verify the cards it fetches.

A signature is a JWS over the card's RFC 8785 canonical JSON without `signatures`,
stored as `{protected, signature}` (detached payload). The a2a-sdk's
`a2a.utils.signing` does the canonicalisation and the JWS; this module picks the
algorithm from the key, names keys by their RFC 7638 thumbprint (`kid`), and reads
trusted keys from PEM files or JWKS files.

A served card holds the 1.0 fields and the 0.3 ones side by side. An A2A 0.3
client (a2a-sdk 0.3.x) reads only the 0.3 fields and verifies a signature over
*those*, canonicalised its own way (sorted-key JSON of the pydantic model without
defaults or empty values), so `sign_v03` adds a second signature, over that view,
with the same key. A verifier accepts a card when any signature verifies, so each
client finds the one made for what it reads.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from a2a.types import AgentCard
from a2a.utils.signing import (
    ProtectedHeader,
    SignatureVerificationError,
    create_agent_card_signer,
    create_signature_verifier,
)
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt import api_jws
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm
from jwt.api_jwk import PyJWK, PyJWKSet
from jwt.exceptions import PyJWKError, PyJWKSetError
from pydantic import ValidationError

__all__ = [
    "ALGORITHMS",
    "CardSigner",
    "CardVerifier",
    "SignatureVerificationError",
    "canonical_v03",
    "load_trusted_keys",
    "thumbprint",
]

ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
"""Accepted on remote cards: asymmetric only, so a public key can never pass for an HMAC secret."""

_CURVES = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
_THUMBPRINT_MEMBERS = {"RSA": ("e", "kty", "n"), "EC": ("crv", "kty", "x", "y"), "OKP": ("crv", "kty", "x")}

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey
VerifyKey = Any
"""A key PyJWT verifies with (a `cryptography` public key)."""


def public_jwk(key: PublicKey) -> dict[str, Any]:
    """The public key as a JWK (a dict)."""
    if isinstance(key, rsa.RSAPublicKey):
        return dict(RSAAlgorithm.to_jwk(key, as_dict=True))
    if isinstance(key, ec.EllipticCurvePublicKey):
        return dict(ECAlgorithm.to_jwk(key, as_dict=True))
    return dict(OKPAlgorithm.to_jwk(key, as_dict=True))


def thumbprint(jwk: dict[str, Any]) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public JWK, base64url without padding."""
    members = _THUMBPRINT_MEMBERS.get(str(jwk.get("kty")))
    if members is None:
        raise ValueError(f"unsupported key type {jwk.get('kty')!r}")
    canonical = json.dumps({m: jwk[m] for m in members}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()


class CardSigner:
    """Signs cards with one private key (RSA, EC P-256/384/521 or Ed25519, in PEM)."""

    def __init__(self, pem: bytes) -> None:
        key = serialization.load_pem_private_key(pem, password=None)
        if isinstance(key, rsa.RSAPrivateKey):
            self.alg = "RS256"
        elif isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name in _CURVES:
            self.alg = _CURVES[key.curve.name]
        elif isinstance(key, ed25519.Ed25519PrivateKey):
            self.alg = "EdDSA"
        else:
            raise ValueError("a signing key must be RSA, EC (P-256, P-384, P-521) or Ed25519")
        public = key.public_key()
        assert isinstance(public, PublicKey)
        self.jwk = {**public_jwk(public), "alg": self.alg, "use": "sig"}
        self.kid = thumbprint(self.jwk)
        self.jwk["kid"] = self.kid
        # `jku` is left out: the SDK's TypedDict lists it, but the JWS header does not need it
        self._header = {"alg": self.alg, "kid": self.kid, "typ": "JOSE"}
        self._pem = pem
        self._sign = create_agent_card_signer(pem, cast(ProtectedHeader, self._header))

    @classmethod
    def from_file(cls, path: str | Path) -> CardSigner:
        try:
            return cls(Path(path).read_bytes())
        except (OSError, ValueError, TypeError) as exc:
            raise ValueError(f"cannot use {path} as the card signing key: {exc}") from exc

    def sign(self, card: AgentCard) -> AgentCard:
        """`card` with its signatures replaced by this key's signature."""
        del card.signatures[:]
        return self._sign(card)

    def sign_v03(self, served: dict[str, Any]) -> dict[str, Any]:
        """Add to `served` (a card as JSON, 1.0 and 0.3 fields merged) a signature over its 0.3 view.

        A card without the 0.3 fields (no 0.3 interface) is left as it is.
        """
        payload = canonical_v03(served)
        if payload is None:
            return served
        token = api_jws.encode(payload.encode(), self._pem, algorithm=self.alg, headers=self._header)
        protected, _, signature = token.split(".")
        served.setdefault("signatures", []).append({"protected": protected, "signature": signature})
        return served

    def jwks(self) -> dict[str, Any]:
        """The public key as a JWK Set, for peers that verify ranch's cards."""
        return {"keys": [self.jwk]}


def canonical_v03(served: dict[str, Any]) -> str | None:
    """The bytes an A2A 0.3 client verifies a card's signatures against, or None without a 0.3 view.

    Mirrors a2a-sdk 0.3's `canonicalize_agent_card`: the card parsed as the 0.3 model
    (unknown 1.0 fields dropped), dumped by alias without signatures, defaults and None,
    empty values removed, then JSON with sorted keys and no spaces.
    """
    from a2a.compat.v0_3 import types as v03  # pydantic models; only needed when signing

    try:
        card = v03.AgentCard.model_validate({k: v for k, v in served.items() if k != "signatures"})
    except ValidationError:
        return None
    dumped = card.model_dump(exclude={"signatures"}, exclude_defaults=True, exclude_none=True, by_alias=True)
    return json.dumps(_without_empty(dumped), separators=(",", ":"), sort_keys=True)


def _without_empty(value: Any) -> Any:
    """Drop empty strings, lists and dicts, recursively (what a2a-sdk 0.3 signs without)."""
    if isinstance(value, dict):
        kept = {k: v for k, v in ((k, _without_empty(v)) for k, v in value.items()) if v is not None}
        return kept or None
    if isinstance(value, list):
        items = [v for v in (_without_empty(item) for item in value) if v is not None]
        return items or None
    if isinstance(value, str) and not value:
        return None
    return value


def load_trusted_keys(paths: Sequence[str | Path]) -> dict[str, VerifyKey]:
    """kid -> key, from PEM public keys (kid = thumbprint) and JWKS files (kid as given, else thumbprint)."""
    keys: dict[str, VerifyKey] = {}
    for path in paths:
        try:
            data = Path(path).read_bytes()
            if data.lstrip().startswith(b"{"):
                for jwk in PyJWKSet.from_json(data.decode()).keys:
                    raw = dict(jwk._jwk_data)
                    keys[jwk.key_id or thumbprint(raw)] = PyJWK(raw).key
            else:
                public = serialization.load_pem_public_key(data)
                if not isinstance(public, PublicKey):
                    raise ValueError("only RSA, EC and Ed25519 keys can verify cards")
                keys[thumbprint(public_jwk(public))] = public
        except (OSError, ValueError, PyJWKError, PyJWKSetError) as exc:
            raise ValueError(f"cannot read trusted key file {path}: {exc}") from exc
    return keys


class CardVerifier:
    """Accepts a card when at least one of its signatures verifies with a trusted key."""

    def __init__(self, keys: dict[str, VerifyKey]) -> None:
        self.keys = keys
        self._verify: Callable[[AgentCard], None] = create_signature_verifier(self._key, ALGORITHMS)

    def _key(self, kid: str | None, jku: str | None) -> VerifyKey:
        if kid is not None and kid in self.keys:
            return self.keys[kid]
        if kid is None and len(self.keys) == 1:
            return next(iter(self.keys.values()))
        raise PyJWKError(f"no trusted key with kid {kid!r}")  # jku is never followed: keys are configured

    def __call__(self, card: AgentCard) -> None:
        """Raises `SignatureVerificationError` naming what is wrong."""
        self._verify(card)
