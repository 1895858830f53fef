"""Token keys, signing and checking (protos/tokens.py): each way a token
can be wrong is refused with a reason, and the key decides the algorithm."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import jwt
import pytest

from protos.tokens import (
    TokenError,
    TokenVerifier,
    create_key_pair,
    create_secret_key,
    create_token,
    read_key_url,
    show_token,
)

NOW = 1_800_000_000.0


def test_a_secret_key_signs_and_checks_hs256():
    key = create_secret_key()
    token = create_token("alice", secret_key=key)
    assert show_token(token)[0]["alg"] == "HS256"
    assert TokenVerifier(secret_key=key).verify(token).role == "alice"


@pytest.mark.parametrize("algorithm", ["RS256", "ES256"])
def test_a_key_pair_signs_with_its_private_half_and_checks_with_its_public_half(algorithm):
    private, public = create_key_pair(algorithm)
    token = create_token("bob", private_key=private)
    assert show_token(token)[0]["alg"] == algorithm
    assert TokenVerifier(public_key=public).verify(token).role == "bob"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _forged(alg: str, claims: dict, secret: bytes = b"") -> str:
    """A token built by hand (pyjwt refuses to make these)."""
    signed = f"{_b64(json.dumps({'alg': alg, 'typ': 'JWT'}).encode())}.{_b64(json.dumps(claims).encode())}"
    if alg == "none":
        return signed + "."
    digest = hmac.new(secret, signed.encode(), hashlib.sha256).digest()
    return f"{signed}.{_b64(digest)}"


def _forged_none(claims: dict) -> str:
    return _forged("none", claims)


REFUSED = [
    # (why, make the token from (secret key, other secret key, public key pem/der, private key))
    ("signed with another key", lambda k: create_token("alice", secret_key=create_secret_key())),
    ("expired", lambda k: create_token("alice", secret_key=k, expiry_s=-1, now_s=NOW)),
    ("no sub claim", lambda k: jwt.encode({"role": "alice"}, k, algorithm="HS256")),
    ("empty sub claim", lambda k: jwt.encode({"sub": ""}, k, algorithm="HS256")),
    ("garbage", lambda k: "not-a-token"),
    ("three garbage segments", lambda k: "aaa.bbb.ccc"),
    ("alg none", lambda k: _forged_none({"sub": "alice"})),
    ("exp not a number", lambda k: jwt.encode({"sub": "a", "exp": "soon"}, k, algorithm="HS256")),
]


@pytest.mark.parametrize("why, make", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_wrong_token_is_refused_with_a_reason(why, make):
    key = create_secret_key()
    with pytest.raises(TokenError) as err:
        TokenVerifier(secret_key=key).verify(make(key), now_s=NOW)
    assert str(err.value)


def test_a_public_key_never_checks_an_hmac_token_made_with_it():
    # The classic confusion: HS256 with the public key's bytes as the secret.
    _, public = create_key_pair("RS256")
    forged = _forged("HS256", {"sub": "mallory"}, public)
    with pytest.raises(TokenError, match="RS256"):
        TokenVerifier(public_key=public).verify(forged)


def test_expiry_is_checked_on_every_call_even_when_remembered():
    key = create_secret_key()
    token = create_token("alice", secret_key=key, expiry_s=10, now_s=NOW)
    verifier = TokenVerifier(secret_key=key, max_cached=10)
    assert verifier.verify(token, now_s=NOW).role == "alice"
    with pytest.raises(TokenError, match="expired"):
        verifier.verify(token, now_s=NOW + 11)


def test_the_remembered_tokens_are_bounded():
    key = create_secret_key()
    verifier = TokenVerifier(secret_key=key, max_cached=3)
    for i in range(10):
        verifier.verify(create_token(f"r{i}", secret_key=key))
    assert len(verifier._cache) == 3


def test_the_role_claim_is_a_setting():
    key = create_secret_key()
    token = create_token("carol", secret_key=key, claim="role")
    assert TokenVerifier(secret_key=key, claim="role").verify(token).role == "carol"
    with pytest.raises(TokenError, match="'sub'"):
        TokenVerifier(secret_key=key).verify(token)


def test_keys_are_named_as_pulsar_names_them(tmp_path):
    key = create_secret_key()
    (tmp_path / "k").write_bytes(key)
    assert read_key_url(f"file://{tmp_path / 'k'}") == key
    assert read_key_url("data:;base64," + base64.b64encode(key).decode()) == key
    for bad in ("/plain/path", "data:text,abc", "data:;base64,@@@", f"file://{tmp_path}/none"):
        with pytest.raises(TokenError):
            read_key_url(bad)


def test_settings_need_exactly_one_key():
    with pytest.raises(TokenError, match="token_secret_key or token_public_key"):
        TokenVerifier.from_settings("", "", "sub", 10)
    with pytest.raises(TokenError, match="only one"):
        TokenVerifier.from_settings("data:;base64,AAAA", "data:;base64,AAAA", "sub", 10)
