"""Handles are signed and tenant-bound; bearer tokens are checked for issuer, audience and expiry."""

from __future__ import annotations

import time

import jwt
import pytest

from maitre.mcp.auth import JWTVerifier
from maitre.mcp.handles import Handles
from maitre.mcp.signing import InvalidToken, Signer
from maitre.types import Principal, ToolError

SECRET = b"s" * 32
ALICE = Principal(user="alice", tenant="acme")
MALLORY = Principal(user="mallory", tenant="evil")


def test_a_handle_opens_for_its_tenant_only():
    """The same tenant opens it; another tenant, a forgery and an edit all get one NOT_FOUND."""
    handles = Handles(SECRET)
    h = handles.mint("export", "job_1", ALICE)
    assert handles.open(h, Principal(user="bob", tenant="acme"), kind="export") == "job_1"
    errors = []
    for attempt, who in [(h, MALLORY), ("export_v1.e30.AAAA", ALICE), (h[:-2] + "xx", ALICE), (h, ALICE)]:
        kind = "report" if attempt is h and who is ALICE else "export"
        with pytest.raises(ToolError) as info:
            handles.open(attempt, who, kind=kind)
        errors.append((info.value.code, info.value.message.split(".")[0]))
    assert len(set(errors)) <= 2 and all(code == "NOT_FOUND" for code, _ in errors)


def test_a_handle_from_another_secret_or_purpose_is_refused():
    """Keys and purposes are not interchangeable."""
    token = Signer(SECRET, purpose="handle").sign({"a": 1})
    assert Signer([b"n" * 32, SECRET], purpose="handle").verify(token) == {"a": 1}
    with pytest.raises(InvalidToken):
        Signer(SECRET, purpose="approval").verify(token)
    with pytest.raises(InvalidToken):
        Signer(b"n" * 32, purpose="handle").verify(token)
    expired = Signer(SECRET, purpose="x").sign({"a": 1}, ttl_s=-1)
    with pytest.raises(InvalidToken):
        Signer(SECRET, purpose="x").verify(expired)


def _token(**overrides) -> str:
    claims = {
        "sub": "alice",
        "tenant": "acme",
        "iss": "https://idp.test",
        "aud": "https://mcp.test",
        "exp": int(time.time()) + 60,
        "scope": "orders:read orders:write",
        "roles": ["approver"],
    }
    claims.update(overrides)
    return jwt.encode({k: v for k, v in claims.items() if v is not None}, "k" * 32, algorithm="HS256")


@pytest.mark.anyio
async def test_the_jwt_verifier_maps_claims_and_refuses_bad_tokens():
    """Issuer, audience, expiry and the tenant claim are all enforced."""
    verifier = JWTVerifier(
        key="k" * 32, issuer="https://idp.test", audience="https://mcp.test", algorithms=["HS256"]
    )
    principal = await verifier.verify(_token())
    assert principal == Principal(
        user="alice",
        tenant="acme",
        scopes=frozenset({"orders:read", "orders:write"}),
        roles=frozenset({"approver"}),
    )
    for bad in [
        _token(aud="https://other.test"),
        _token(iss="https://evil.test"),
        _token(exp=int(time.time()) - 120),
        _token(exp=None),
        _token(tenant=None),
        jwt.encode({"sub": "a"}, "wrong" * 8, algorithm="HS256"),
        "not-a-jwt",
    ]:
        assert await verifier.verify(bad) is None
