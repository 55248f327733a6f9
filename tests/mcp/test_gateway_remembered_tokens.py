"""Remembered bearer tokens (`maitre.mcp.remembered_tokens`): a verified JWT is not verified again,
and nothing that would have been refused is let in because of it."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import anyio
import jwt
import pytest

from maitre.mcp.auth import JWTVerifier, StaticTokens
from maitre.mcp.remembered_tokens import RememberedTokens, remembered
from maitre.types import Principal

pytestmark = pytest.mark.anyio

SECRET = "remembered-" + "s" * 40
ISSUER = "https://idp.test"
AUDIENCE = "https://gateway.test"


def _token(*, exp_in: float = 3600, sub: str = "ana", secret: str = SECRET, **extra: Any) -> str:
    claims = {
        "sub": sub,
        "tenant": "t1",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "exp": int(time.time() + exp_in),
        **extra,
    }
    return jwt.encode(claims, secret, algorithm="HS256")


def _verifier() -> JWTVerifier:
    return JWTVerifier(key=SECRET, issuer=ISSUER, audience=AUDIENCE, algorithms=("HS256",), leeway_s=0)


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def test_the_same_token_is_verified_once_and_gives_the_same_principal():
    tokens = RememberedTokens(_verifier())
    token = _token()
    first = await tokens.verify(token)
    again = [await tokens.verify(token) for _ in range(5)]
    assert isinstance(first, Principal) and first.user == "ana" and first.tenant == "t1"
    assert again == [first] * 5
    assert tokens.verified == 1


async def test_refused_tokens_are_never_remembered():
    """Forged signatures, another audience, an expired token: refused every time, nothing kept."""
    tokens = RememberedTokens(_verifier())
    forged = _token(secret="another-" + "k" * 40)
    other_audience = jwt.encode(
        {
            "sub": "ana",
            "tenant": "t1",
            "iss": ISSUER,
            "aud": "https://elsewhere",
            "exp": int(time.time()) + 60,
        },
        SECRET,
        algorithm="HS256",
    )
    expired = _token(exp_in=-5)
    for token in (forged, other_audience, expired) * 2:
        assert await tokens.verify(token) is None
    assert tokens.verified == 6 and len(tokens) == 0


async def test_a_payload_changed_after_its_token_was_remembered_is_checked_and_refused():
    """The attack: take a remembered token, swap in another user's payload, keep the signature."""
    tokens = RememberedTokens(_verifier())
    token = _token(sub="ana")
    assert (await tokens.verify(token)).user == "ana"
    head, _, signature = token.split(".")
    claims = {"sub": "root", "tenant": "t1", "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 3600}
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert await tokens.verify(f"{head}.{payload}.{signature}") is None
    assert tokens.verified == 2


async def test_a_remembered_token_is_verified_again_at_its_exp_and_after_the_ttl():
    clock = Clock()
    tokens = RememberedTokens(_verifier(), ttl_s=60, clock=clock)
    short = _token(exp_in=10)
    long = _token(exp_in=3600, sub="bo")
    await tokens.verify(short)
    await tokens.verify(long)
    clock.now += 11  # past the short token's exp, inside the ttl: the short one is asked again
    await tokens.verify(short)
    await tokens.verify(long)
    assert tokens.verified == 3
    clock.now += 60  # past the ttl: the long one too
    await tokens.verify(long)
    assert tokens.verified == 4


async def test_an_expired_token_is_refused_even_if_the_cache_clock_lags():
    """The entry ends at the token's exp: once the verifier refuses it, the cache has no say."""
    clock = Clock()
    tokens = RememberedTokens(_verifier(), clock=clock)
    token = _token(exp_in=1)
    assert await tokens.verify(token) is not None
    await anyio.sleep(2.1)
    clock.now += 2.1
    assert await tokens.verify(token) is None


async def test_at_most_max_entries_are_kept():
    tokens = RememberedTokens(_verifier(), max_entries=3)
    for i in range(10):
        assert await tokens.verify(_token(sub=f"user{i}")) is not None
    assert len(tokens) == 3


def test_only_jwt_verifiers_are_wrapped():
    static = StaticTokens(tokens={})
    assert remembered(static) is static
    assert isinstance(remembered(_verifier()), RememberedTokens)
