"""What token checks share without loading pyjwt and ``cryptography``
(``protos/tokens.py`` does the work): its error, its result and the
algorithm names. A server imports only these until authentication is on,
which keeps a process's start light."""

from __future__ import annotations

from dataclasses import dataclass

HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")
RSA_ALGORITHMS = ("RS256", "RS384", "RS512")
EC_ALGORITHMS = ("ES256", "ES384", "ES512")
KEY_PAIR_ALGORITHMS = RSA_ALGORITHMS + EC_ALGORITHMS


class TokenError(ValueError):
    """A token or key that cannot be used; the message says why."""

    def __init__(self, message: str, expired: bool = False) -> None:
        super().__init__(message)
        self.expired = expired


@dataclass(frozen=True)
class Verified:
    role: str
    expires_s: float | None  # the token's exp (Unix seconds), None when it has none
