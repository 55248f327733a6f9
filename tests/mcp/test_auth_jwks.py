"""JWKS URLs for `JWTVerifier`: keys fetched from a real HTTP server on 127.0.0.1, cached, fetched
again when a token names a new key id (rotation), and never fetched in a storm of made-up ids."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from maitre import Principal, UserError
from maitre.mcp.auth import JWKSKeys, JWTVerifier

ISSUER = "https://id.example.test/"
AUDIENCE = "https://tools.example.test/mcp"


class KeySet:
    """The issuer: a JWKS document served over HTTP, and a count of how often it was fetched."""

    def __init__(self) -> None:
        self.document: bytes = b'{"keys": []}'
        self.fetches = 0
        self.status = 200

    def publish(self, *entries: dict) -> None:
        self.document = json.dumps({"keys": list(entries)}).encode()


def public_jwk(private: rsa.RSAPrivateKey, kid: str | None, **extra: str) -> dict:
    data = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    if kid is not None:
        data["kid"] = kid
    return {**data, "use": "sig", **extra}


def token(private: rsa.RSAPrivateKey, kid: str | None, *, alg: str = "RS256", sub: str = "alice") -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "tenant": "acme", "exp": now + 300, "iat": now}
    headers = {"kid": kid} if kid is not None else {}
    return jwt.encode(claims, private, algorithm=alg, headers=headers)


@pytest.fixture
def issuer() -> Iterator[tuple[KeySet, str]]:
    keys = KeySet()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            keys.fetches += 1
            self.send_response(keys.status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(keys.document)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield keys, f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json"
    finally:
        server.shutdown()
        server.server_close()


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def verifier(url: str, **options: float) -> JWTVerifier:
    return JWTVerifier(
        key=JWKSKeys(url=url, **options), issuer=ISSUER, audience=AUDIENCE, algorithms=["RS256", "RS384"]
    )


@pytest.mark.anyio
async def test_keys_are_cached_and_a_rotated_key_is_fetched_once(issuer):
    keys, url = issuer
    first, second = new_key(), new_key()
    keys.publish(public_jwk(first, "k1"))
    check = verifier(url, min_refresh_s=0.0)

    assert await check.verify(token(first, "k1")) == Principal(user="alice", tenant="acme")
    assert await check.verify(token(first, "k1", sub="bob")) == Principal(user="bob", tenant="acme")
    assert keys.fetches == 1  # the second token used the cached set

    keys.publish(public_jwk(first, "k1"), public_jwk(second, "k2"))  # the issuer rotates
    assert (await check.verify(token(second, "k2"))).user == "alice"
    assert keys.fetches == 2  # an unknown kid made exactly one more fetch


@pytest.mark.anyio
async def test_made_up_key_ids_do_not_make_the_server_hammer_the_issuer(issuer):
    keys, url = issuer
    real, forger = new_key(), new_key()
    keys.publish(public_jwk(real, "k1"))
    check = verifier(url, min_refresh_s=60.0)
    assert await check.verify(token(real, "k1")) is not None
    for i in range(20):
        assert await check.verify(token(forger, f"made-up-{i}")) is None
    assert keys.fetches == 1  # within min_refresh_s nothing was fetched again


@pytest.mark.anyio
async def test_a_forged_signature_a_wrong_algorithm_and_a_keyless_set_are_refused(issuer):
    keys, url = issuer
    real, forger = new_key(), new_key()
    keys.publish(public_jwk(real, "k1", alg="RS256"))
    check = verifier(url, min_refresh_s=0.0)
    assert await check.verify(token(forger, "k1")) is None  # right kid, wrong key
    assert await check.verify(token(real, "k1", alg="RS384")) is None  # the set pins k1 to RS256
    assert await check.verify(token(real, "k1")) is not None
    keys.publish()  # the set is emptied: the key is gone, so is the token's acceptance
    check_again = verifier(url, min_refresh_s=0.0)
    assert await check_again.verify(token(real, "k1")) is None


@pytest.mark.anyio
async def test_a_token_without_kid_uses_the_only_key_and_a_failed_fetch_keeps_the_known_keys(issuer):
    keys, url = issuer
    real = new_key()
    keys.publish(public_jwk(real, None))
    check = verifier(url, min_refresh_s=0.0, ttl_s=0.01)
    assert await check.verify(token(real, None)) is not None
    keys.status = 500  # the issuer is down when the cache expires
    await anyio.sleep(0.02)
    assert await check.verify(token(real, None)) is not None
    assert keys.fetches == 2


@pytest.mark.anyio
async def test_an_oversized_key_set_is_not_read(issuer):
    keys, url = issuer
    real = new_key()
    keys.document = json.dumps({"keys": [public_jwk(real, "k1")], "pad": "x" * 5000}).encode()
    check = verifier(url, max_bytes=1024)
    assert await check.verify(token(real, "k1")) is None


def test_plain_http_is_refused_for_a_remote_issuer_and_unknown_algorithms_at_start():
    with pytest.raises(UserError, match="https"):
        JWKSKeys(url="http://id.example.com/jwks.json")
    JWKSKeys(url="https://id.example.com/jwks.json")
    with pytest.raises(UserError, match="RS999"):
        JWTVerifier(key="x" * 64, issuer=ISSUER, audience=AUDIENCE, algorithms=["RS999"])
    with pytest.raises(UserError, match="none"):
        JWTVerifier(key="x" * 64, issuer=ISSUER, audience=AUDIENCE, algorithms=["none"])
