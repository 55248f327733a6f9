"""A small OpenID Provider of our own on 127.0.0.1, for the console's OIDC sign-in tests.

`running_idp(client_id=..., redirect_uris=[...])` serves it with uvicorn in a thread on an
ephemeral port and yields a `LocalIdP`: its `issuer` URL, `sign_in_as(...)` to choose who the next
`/authorize` signs in (it approves at once, there is no login page), `tamper(...)` to spoil the
next ID token (another audience, expired, a foreign signing key, a wrong nonce, a claim left
out), what it saw (`token_requests`), and `reset()` so one running provider serves many tests.

What it checks, as a real provider does: the client id and the exact redirect URI at
`/authorize`; a PKCE S256 challenge is required there and, at `/token`, the `code_verifier` must
hash to it; codes are single use and short-lived, and bound to the client and redirect URI; a
confidential client's secret (HTTP Basic or form). ID tokens are RS256, signed with a key made at
start with `cryptography`, published at `/jwks`.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

__all__ = ["Grant", "LocalIdP", "Person", "running_idp"]


@dataclass(frozen=True)
class Person:
    """Who the provider signs in: the claims it puts in the ID token."""

    sub: str
    tenant: str | None = "acme"
    roles: list[str] | str = field(default_factory=lambda: ["approver"])
    preferred_username: str | None = None


@dataclass
class Grant:
    """An authorization code waiting for its `/token` request."""

    client_id: str
    redirect_uri: str
    challenge: str
    nonce: str | None
    person: Person
    expires_at: float


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _rsa() -> Any:
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@dataclass
class LocalIdP:
    """The provider's state; the Starlette app reads and changes it (see the module docstring)."""

    client_id: str
    redirect_uris: list[str]
    client_secret: str | None = None
    issuer: str = ""
    person: Person = field(default_factory=lambda: Person(sub="bob"))
    codes: dict[str, Grant] = field(default_factory=dict)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    kid: str = "idp-key-1"
    _key: Any = field(default_factory=_rsa, repr=False)
    _spoil: dict[str, Any] = field(default_factory=dict, repr=False)

    def reset(self) -> None:
        """Forget every code, request and spoiling; sign in `bob` (acme, approver) next."""
        self.person = Person(sub="bob")
        self.codes.clear()
        self.token_requests.clear()
        self._spoil = {}

    def sign_in_as(self, sub: str, **claims: Any) -> None:
        """The person the next `/authorize` signs in (tenant, roles, preferred_username)."""
        self.person = Person(sub=sub, **claims)

    def tamper(
        self,
        *,
        foreign_key: bool = False,
        drop: tuple[str, ...] = (),
        **claims: Any,
    ) -> None:
        """Spoil the next ID token: claims replaced (`aud=`, `exp=`, `nonce=`...), claims dropped,
        or signed with a key the JWKS does not publish (under the published `kid`)."""
        self._spoil = {"foreign_key": foreign_key, "drop": drop, "claims": claims}

    def jwks(self) -> dict[str, Any]:
        numbers = self._key.public_key().public_numbers()
        n = numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")
        e = numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big")
        return {
            "keys": [
                {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid, "n": _b64(n), "e": _b64(e)}
            ]
        }

    def id_token(self, grant: Grant) -> str:
        import jwt

        now = int(time.time())
        person = grant.person
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": person.sub,
            "aud": grant.client_id,
            "iat": now,
            "exp": now + 300,
            "roles": person.roles,
        }
        if grant.nonce is not None:
            claims["nonce"] = grant.nonce
        if person.tenant is not None:
            claims["tenant"] = person.tenant
        if person.preferred_username is not None:
            claims["preferred_username"] = person.preferred_username
        spoil, self._spoil = self._spoil, {}
        claims.update(spoil.get("claims", {}))
        for name in spoil.get("drop", ()):
            claims.pop(name, None)
        key = _rsa() if spoil.get("foreign_key") else self._key
        return jwt.encode(claims, key, algorithm="RS256", headers={"kid": self.kid})

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
        from starlette.routing import Route

        async def discovery(request: Request) -> Response:
            return JSONResponse(
                {
                    "issuer": self.issuer,
                    "authorization_endpoint": f"{self.issuer}/authorize",
                    "token_endpoint": f"{self.issuer}/token",
                    "jwks_uri": f"{self.issuer}/jwks",
                    "response_types_supported": ["code"],
                    "subject_types_supported": ["public"],
                    "id_token_signing_alg_values_supported": ["RS256"],
                    "code_challenge_methods_supported": ["S256"],
                }
            )

        async def authorize(request: Request) -> Response:
            q = request.query_params
            if q.get("client_id") != self.client_id:
                return PlainTextResponse("unknown client", status_code=400)
            redirect_uri = q.get("redirect_uri", "")
            if redirect_uri not in self.redirect_uris:  # never redirect anywhere unregistered
                return PlainTextResponse("redirect_uri is not registered", status_code=400)
            back: dict[str, str] = {"state": q.get("state", ""), "iss": self.issuer}
            if q.get("response_type") != "code" or "openid" not in q.get("scope", "").split():
                back["error"] = "invalid_request"
            elif q.get("code_challenge_method") != "S256" or len(q.get("code_challenge", "")) < 43:
                back["error"], back["error_description"] = "invalid_request", "PKCE S256 is required"
            else:
                code = secrets.token_urlsafe(24)
                self.codes[code] = Grant(
                    client_id=self.client_id,
                    redirect_uri=redirect_uri,
                    challenge=q["code_challenge"],
                    nonce=q.get("nonce"),
                    person=self.person,
                    expires_at=time.time() + 60,
                )
                back["code"] = code
            return RedirectResponse(f"{redirect_uri}?{urlencode(back)}", status_code=302)

        def client_ok(request: Request, form: dict[str, str]) -> bool:
            header = request.headers.get("authorization", "")
            client_id, secret = form.get("client_id"), form.get("client_secret")
            if header.startswith("Basic "):
                client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
            if client_id != self.client_id:
                return False
            return self.client_secret is None or secrets.compare_digest(secret or "", self.client_secret)

        async def token(request: Request) -> Response:
            form = {k: str(v) for k, v in (await request.form()).items()}
            self.token_requests.append(form)

            def error(code: str, status: int = 400) -> Response:
                return JSONResponse({"error": code}, status_code=status)

            if not client_ok(request, form):
                return error("invalid_client", 401)
            if form.get("grant_type") != "authorization_code":
                return error("unsupported_grant_type")
            grant = self.codes.pop(form.get("code", ""), None)  # single use: gone once presented
            if grant is None or grant.expires_at < time.time():
                return error("invalid_grant")
            if form.get("redirect_uri") != grant.redirect_uri:
                return error("invalid_grant")
            verifier = form.get("code_verifier", "")
            if _b64(hashlib.sha256(verifier.encode()).digest()) != grant.challenge:
                return error("invalid_grant")  # PKCE: the code is useless without its verifier
            return JSONResponse(
                {
                    "access_token": secrets.token_urlsafe(24),
                    "token_type": "Bearer",
                    "expires_in": 300,
                    "id_token": self.id_token(grant),
                },
                headers={"Cache-Control": "no-store"},
            )

        async def jwks(request: Request) -> Response:
            return JSONResponse(self.jwks())

        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", discovery),
                Route("/authorize", authorize),
                Route("/token", token, methods=["POST"]),
                Route("/jwks", jwks),
            ]
        )


@contextmanager
def running_idp(
    *, client_id: str = "maitre-console", redirect_uris: list[str], client_secret: str | None = None
) -> Iterator[LocalIdP]:
    """Serve a `LocalIdP` on 127.0.0.1 (an ephemeral port) in a thread until the block ends."""
    import uvicorn

    idp = LocalIdP(client_id=client_id, redirect_uris=list(redirect_uris), client_secret=client_secret)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    idp.issuer = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(idp.app(), log_level="warning", lifespan="off", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test identity provider did not start")
        time.sleep(0.01)
    try:
        yield idp
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
