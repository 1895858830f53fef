"""JSON Web Tokens as Pulsar's ``AuthenticationProviderToken`` uses them.

Theory of operation. A token is a JWT signed either with a secret key
(HS256/384/512) or with the private half of a key pair (RS256/384/512,
ES256/384/512); a server that holds the secret key or the public key checks
the signature and the expiry (``exp``, when the token has one) and takes the
*role* from one claim (``sub`` unless ``token_auth_claim`` names another).
Which algorithms a key may verify follows from the key itself, never from
the token's header, so a token cannot choose a weaker check (the classic
"alg: none" and HMAC-with-the-public-key confusions). Keys are named as
Pulsar names them: ``file:///path`` (raw secret bytes, or a DER or PEM key)
or ``data:;base64,...``. ``pyjwt`` does the signing and checking.

A verified token is remembered (a bounded map, oldest forgotten first) with
its role and expiry, so a stream of calls with one token pays for one
signature check; the expiry is still checked on every call.
"""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Mapping
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from protos.token_types import (
    EC_ALGORITHMS,
    HMAC_ALGORITHMS,
    KEY_PAIR_ALGORITHMS,
    RSA_ALGORITHMS,
    TokenError,
    Verified,
)

SECRET_KEY_BYTES = 32  # HS256's own size, as `pulsar tokens create-secret-key`
_EC_CURVES = {"ES256": ec.SECP256R1(), "ES384": ec.SECP384R1(), "ES512": ec.SECP521R1()}


def read_key_url(url: str) -> bytes:
    """The bytes a Pulsar key setting names: ``file:///path`` or ``data:;base64,...``."""
    if url.startswith("file://"):
        path = url.removeprefix("file://")
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as exc:
            raise TokenError(f"cannot read the key {url}: {exc.strerror}") from None
    if url.startswith("data:"):
        _, sep, data = url.partition(",")
        if not sep or ";base64" not in url[: url.index(",")]:
            raise TokenError(f"key {url[:24]}...: only data:;base64,... is understood")
        try:
            return base64.b64decode(data, validate=True)
        except ValueError:
            raise TokenError("the data: key is not valid base64") from None
    raise TokenError(f"key {url[:40]!r}: name it file:///path or data:;base64,...")


def _load_private(data: bytes) -> Any:
    try:
        if data.lstrip().startswith(b"-----"):
            return serialization.load_pem_private_key(data, password=None)
        return serialization.load_der_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise TokenError(f"not a private key (PEM or DER, unencrypted): {exc}") from None


def _load_public(data: bytes) -> Any:
    try:
        if data.lstrip().startswith(b"-----"):
            return serialization.load_pem_public_key(data)
        return serialization.load_der_public_key(data)
    except (ValueError, TypeError) as exc:
        raise TokenError(f"not a public key (PEM or DER): {exc}") from None


def _algorithms_of(key: Any) -> tuple[str, ...]:
    if isinstance(key, rsa.RSAPrivateKey | rsa.RSAPublicKey):
        return RSA_ALGORITHMS
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        return EC_ALGORITHMS
    raise TokenError(f"keys of type {type(key).__name__} are not supported (RSA or EC)")


# ---------------------------------------------------------------- keys


def create_secret_key() -> bytes:
    return secrets.token_bytes(SECRET_KEY_BYTES)


def create_key_pair(algorithm: str = "RS256") -> tuple[bytes, bytes]:
    """(private, public) in DER, as `pulsar tokens create-key-pair` writes them."""
    if algorithm in RSA_ALGORITHMS:
        private: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif algorithm in _EC_CURVES:
        private = ec.generate_private_key(_EC_CURVES[algorithm])
    else:
        raise TokenError(
            f"algorithm {algorithm!r} is not a key-pair algorithm: {', '.join(KEY_PAIR_ALGORITHMS)}"
        )
    der = serialization.Encoding.DER
    return (
        private.private_bytes(der, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        private.public_key().public_bytes(der, serialization.PublicFormat.SubjectPublicKeyInfo),
    )


# ---------------------------------------------------------------- tokens


def create_token(
    subject: str,
    *,
    secret_key: bytes | None = None,
    private_key: bytes | None = None,
    algorithm: str | None = None,
    expiry_s: float | None = None,
    claim: str = "sub",
    now_s: float | None = None,
) -> str:
    """A signed token whose ``claim`` is ``subject`` (and ``exp`` ``expiry_s`` from now)."""
    if not subject:
        raise TokenError("the subject (role) is empty")
    if (secret_key is None) == (private_key is None):
        raise TokenError("give exactly one of a secret key and a private key")
    claims: dict[str, Any] = {claim: subject}
    if expiry_s is not None:
        claims["exp"] = int((time.time() if now_s is None else now_s) + expiry_s)
    if secret_key is not None:
        algorithm = algorithm or "HS256"
        if algorithm not in HMAC_ALGORITHMS:
            raise TokenError(f"a secret key signs with {', '.join(HMAC_ALGORITHMS)}")
        return jwt.encode(claims, secret_key, algorithm=algorithm)
    assert private_key is not None
    key = _load_private(private_key)
    allowed = _algorithms_of(key)
    algorithm = algorithm or allowed[0]
    if algorithm not in allowed:
        raise TokenError(f"this private key signs with {', '.join(allowed)}, not {algorithm}")
    return jwt.encode(claims, key, algorithm=algorithm)


def show_token(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, claims) read without checking anything (`pulsar tokens show`)."""
    try:
        return jwt.get_unverified_header(token), jwt.decode(
            token, options={"verify_signature": False}
        )
    except jwt.PyJWTError as exc:
        raise TokenError(f"not a token: {exc}") from None


class TokenVerifier:
    """Checks tokens against one secret key or one public key."""

    def __init__(
        self,
        *,
        secret_key: bytes | None = None,
        public_key: bytes | None = None,
        claim: str = "sub",
        max_cached: int = 1000,
    ) -> None:
        if (secret_key is None) == (public_key is None):
            raise TokenError("token authentication needs exactly one of a secret or a public key")
        if secret_key is not None:
            if not secret_key:
                raise TokenError("the secret key is empty")
            self._key: Any = secret_key
            self._algorithms: tuple[str, ...] = HMAC_ALGORITHMS
        else:
            assert public_key is not None
            self._key = _load_public(public_key)
            self._algorithms = _algorithms_of(self._key)
        self.claim = claim
        self.max_cached = max(0, max_cached)
        self._cache: dict[str, Verified] = {}

    @classmethod
    def from_settings(
        cls, secret_key_url: str, public_key_url: str, claim: str, max_cached: int
    ) -> TokenVerifier:
        if secret_key_url and public_key_url:
            raise TokenError("set only one of token_secret_key and token_public_key")
        if not secret_key_url and not public_key_url:
            raise TokenError(
                "authentication_enabled needs token_secret_key or token_public_key "
                "(file:///path or data:;base64,...)"
            )
        return cls(
            secret_key=read_key_url(secret_key_url) if secret_key_url else None,
            public_key=read_key_url(public_key_url) if public_key_url else None,
            claim=claim,
            max_cached=max_cached,
        )

    def verify(self, token: str, now_s: float | None = None) -> Verified:
        """The role of a valid token; TokenError naming what is wrong."""
        now_s = time.time() if now_s is None else now_s
        found = self._cache.get(token)
        if found is None:
            found = self._check(token, now_s)
            if self.max_cached:
                if len(self._cache) >= self.max_cached:
                    del self._cache[next(iter(self._cache))]
                self._cache[token] = found
        if found.expires_s is not None and now_s >= found.expires_s:
            raise TokenError(f"the token of role {found.role!r} has expired", expired=True)
        return found

    def _check(self, token: str, now_s: float) -> Verified:
        try:
            claims: Mapping[str, Any] = jwt.decode(
                token,
                self._key,
                algorithms=list(self._algorithms),
                options={"verify_exp": False, "verify_aud": False},
            )
        except jwt.InvalidSignatureError:
            raise TokenError("the token's signature does not match this cluster's key") from None
        except jwt.InvalidAlgorithmError:
            raise TokenError(
                f"the token is not signed with {'/'.join(self._algorithms)}, "
                "as this cluster's key requires"
            ) from None
        except jwt.PyJWTError as exc:
            raise TokenError(f"not a valid token: {exc}") from None
        role = claims.get(self.claim)
        if not isinstance(role, str) or not role:
            raise TokenError(f"the token has no {self.claim!r} claim (the role)")
        exp = claims.get("exp")
        if exp is not None and not isinstance(exp, int | float):
            raise TokenError("the token's exp claim is not a number")
        return Verified(role, None if exp is None else float(exp))
