"""Real OAuth peers on 127.0.0.1 for the gateway's OAuth tests (no mocks).

- `IdP`: an authorization server (RFC 8414 metadata, JWKS, a token endpoint) that signs RS256
  JWTs. It mints the callers' tokens (audience: the gateway), answers RFC 8693 token exchange
  for its one confidential client (the gateway) after checking the client's secret and the subject
  token's signature, issuer, audience and expiry, and answers client credentials. `mode` makes it
  misbehave: `invalid_grant`, `error_500`, `slow`, `echo` (hands the subject token back), `leaky`
  (an error description quoting the subject token and the client secret).
- `Upstream`: an SDK `MCPServer` behind an ASGI layer that records every request's headers and
  body, and (with `require_jwt`) accepts only the IdP's tokens for its own URL, answering 401 with
  its RFC 9728 metadata otherwise. Its `whoami` tool says whose token the call carried.
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus

import anyio
import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp.server.mcpserver import Context, MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

GATEWAY_RESOURCE = "https://gateway.test/mcp"
"""The gateway's resource identifier: the audience of the callers' tokens."""
GATEWAY_CLIENT, GATEWAY_SECRET = "maitre-gateway", "gw-secret-" + "9c41e07d" * 3
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS = "urn:ietf:params:oauth:token-type:access_token"


@contextlib.contextmanager
def serve_thread(app: Any) -> Iterator[str]:
    """Serve an ASGI app on 127.0.0.1 (ephemeral port) in a thread; yields `http://127.0.0.1:PORT`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    if hasattr(app, "bind"):
        app.bind(base)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "a test peer did not start"
        time.sleep(0.01)
    try:
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@dataclass
class IdP:
    """The identity provider (see the module docstring)."""

    ttl: int = 3600
    """Lifetime of the exchanged tokens (seconds)."""
    mode: str = "ok"
    delay: float = 0.0
    """Seconds every token-exchange answer waits (to make concurrent callers overlap)."""
    client_key: Any = None
    """The gateway client's public key, when it authenticates with `private_key_jwt`."""
    client_auth: list[str] = field(default_factory=list)
    """How the client authenticated at each token request: basic, post or private_key_jwt."""
    base: str = ""
    exchanges: list[dict[str, str]] = field(default_factory=list)
    """Every token-exchange request the IdP accepted: subject, audience/resource, scope."""
    requests: int = 0
    _key: Any = field(default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048))

    def bind(self, base: str) -> None:
        self.base = base

    def reset(self) -> None:
        """Well-behaved again, with nothing recorded (each test starts from here)."""
        self.mode, self.ttl, self.delay, self.client_key = "ok", 3600, 0.0, None
        self.exchanges.clear()
        self.client_auth.clear()

    @property
    def jwks_url(self) -> str:
        return f"{self.base}/jwks"

    def sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode(claims, self._key, algorithm="RS256", headers={"kid": "k1"})

    def mint(
        self,
        user: str,
        *,
        tenant: str = "acme",
        aud: str = GATEWAY_RESOURCE,
        scope: str = "",
        ttl: int = 600,
    ) -> str:
        """A caller's access token for the gateway."""
        now = int(time.time())
        claims = {"iss": self.base, "sub": user, "tenant": tenant, "aud": aud, "iat": now, "exp": now + ttl}
        if scope:
            claims["scope"] = scope
        claims["jti"] = secrets.token_urlsafe(8)
        return self.sign(claims)

    def verify(self, token: str, audience: str) -> dict[str, Any]:
        claims: dict[str, Any] = jwt.decode(
            token, self._key.public_key(), algorithms=["RS256"], audience=audience, issuer=self.base
        )
        return claims

    # endpoints

    async def _metadata(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.base,
                "authorization_endpoint": f"{self.base}/authorize",
                "token_endpoint": f"{self.base}/token",
                "jwks_uri": self.jwks_url,
                "grant_types_supported": [EXCHANGE, "client_credentials"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                "response_types_supported": ["token"],
            }
        )

    async def _jwks(self, request: Request) -> Response:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self._key.public_key()))
        return JSONResponse({"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]})

    def _client(self, request: Request, form: dict[str, str]) -> str | None:
        basic = request.headers.get("authorization", "")
        if form.get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
            self.client_auth.append("private_key_jwt")
            try:
                claims = jwt.decode(
                    form.get("client_assertion", ""),
                    self.client_key,
                    algorithms=["ES256", "RS256"],
                    audience=self.base,
                )
            except (jwt.PyJWTError, TypeError, ValueError):
                return None
            ok = claims.get("iss") == claims.get("sub") == form.get("client_id") == GATEWAY_CLIENT
            return GATEWAY_CLIENT if ok else None
        if basic.startswith("Basic "):
            self.client_auth.append("basic")
            client_id, _, secret = (
                unquote_plus(p) for p in base64.b64decode(basic[6:]).decode().partition(":")
            )
        else:
            self.client_auth.append("post")
            client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        ok = client_id == GATEWAY_CLIENT and secrets.compare_digest(secret.encode(), GATEWAY_SECRET.encode())
        return client_id if ok else None

    def _issue(self, claims: dict[str, Any]) -> Response:
        now = int(time.time())
        token = self.sign(
            {**claims, "iss": self.base, "iat": now, "exp": now + self.ttl, "jti": secrets.token_urlsafe(8)}
        )
        return JSONResponse(
            {
                "access_token": token,
                "token_type": "Bearer",
                "expires_in": self.ttl,
                "issued_token_type": ACCESS,
            }
        )

    async def _token(self, request: Request) -> Response:
        mode = self.mode  # read once, first: a test's late request must not see the next test's mode
        self.requests += 1
        form = {k: str(v) for k, v in (await request.form()).items()}
        client = self._client(request, form)
        if client is None:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        target = form.get("resource") or form.get("audience") or ""
        if form.get("grant_type") == "client_credentials":
            return self._issue({"sub": client, "aud": target, "scope": form.get("scope", "")})
        if form.get("grant_type") != EXCHANGE or form.get("subject_token_type") != ACCESS:
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        subject_token = form.get("subject_token", "")
        await anyio.sleep(self.delay)
        if mode == "slow":  # later than any client waits; then nothing (no exchange recorded)
            await anyio.sleep(3)
            return Response("too late", status_code=503)
        if mode == "error_500":
            return Response("down", status_code=503)
        if mode == "leaky":
            said = f"token {subject_token} refused for client {GATEWAY_SECRET}"
            return JSONResponse({"error": "invalid_grant", "error_description": said}, status_code=400)
        try:
            subject = self.verify(subject_token, GATEWAY_RESOURCE)
        except jwt.PyJWTError:
            return JSONResponse(
                {"error": "invalid_grant", "error_description": "bad subject"}, status_code=400
            )
        if mode == "invalid_grant":
            return JSONResponse({"error": "invalid_grant", "error_description": "revoked"}, status_code=400)
        if mode == "echo":
            return JSONResponse({"access_token": subject_token, "token_type": "Bearer", "expires_in": 600})
        self.exchanges.append({"sub": subject["sub"], "target": target, "scope": form.get("scope", "")})
        return self._issue(
            {
                "sub": subject["sub"],
                "tenant": subject.get("tenant"),
                "aud": target,
                "act": {"sub": client},
                "scope": form.get("scope", ""),
            }
        )

    def app(self) -> Starlette:
        app = Starlette(
            routes=[
                Route("/.well-known/oauth-authorization-server", self._metadata),
                Route(
                    "/.well-known/oauth-authorization-server/{rest:path}", self._metadata
                ),  # always this issuer
                Route("/jwks", self._jwks),
                Route("/token", self._token, methods=["POST"]),
            ]
        )
        app.bind = self.bind  # type: ignore[attr-defined]
        return app


def _upstream_server() -> MCPServer:
    server = MCPServer("upstream")

    @server.tool()
    def whoami(ctx: Context) -> str:
        """Whose token this call carried (its subject, actor and audience)."""
        header = (ctx.headers or {}).get("authorization", "")
        if not header.startswith("Bearer "):
            return json.dumps({"sub": None, "authorization": header or None})
        try:
            claims = jwt.decode(header[7:], options={"verify_signature": False})
        except jwt.PyJWTError:
            return json.dumps({"sub": None, "authorization": "opaque"})
        return json.dumps(
            {
                "sub": claims.get("sub"),
                "act": claims.get("act"),
                "aud": claims.get("aud"),
                "jti": claims.get("jti"),
            }
        )

    @server.tool()
    async def slow(delay: float) -> str:
        """Answer after `delay` seconds."""
        await anyio.sleep(delay)
        return f"slept {delay}"

    @server.tool()
    def echo(text: str) -> str:
        """The text, back."""
        return text

    return server


@dataclass
class Upstream:
    """The upstream MCP server and what it received (see the module docstring)."""

    idp: IdP
    require_jwt: bool = False
    base: str = ""
    received: list[dict[str, Any]] = field(default_factory=list)
    """Every request to /mcp: {"headers": [(name, value), ...], "body": bytes}."""

    def bind(self, base: str) -> None:
        self.base = base

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def saw(self, secret: str) -> bool:
        """Whether `secret` appeared anywhere in what the upstream received (a header or a body)."""
        needle = secret.encode()
        for request in self.received:
            if needle in request["body"] or any(needle in v for _, v in request["headers"]):
                return True
        return False

    def authorizations(self) -> list[str]:
        return [v.decode() for r in self.received for k, v in r["headers"] if k == b"authorization"]

    def app(self) -> Any:
        mcp_app = _upstream_server().streamable_http_app(host="127.0.0.1")
        this = self

        async def prm(request: Request) -> Response:
            return JSONResponse({"resource": this.url, "authorization_servers": [this.idp.base]})

        wellknown = Starlette(routes=[Route("/.well-known/oauth-protected-resource/mcp", prm)])

        async def asgi(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return await mcp_app(scope, receive, send)
            if not scope["path"].startswith("/mcp"):
                return await wellknown(scope, receive, send)
            chunks: list[bytes] = []
            messages: list[Any] = []
            while True:
                message = await receive()
                messages.append(message)
                chunks.append(message.get("body", b""))
                if message["type"] != "http.request" or not message.get("more_body"):
                    break
            this.received.append({"headers": list(scope["headers"]), "body": b"".join(chunks)})

            async def replay() -> Any:
                return messages.pop(0) if messages else await receive()

            if this.require_jwt:
                header = dict(scope["headers"]).get(b"authorization", b"").decode()
                try:
                    this.idp.verify(header[7:] if header.startswith("Bearer ") else "", this.url)
                except jwt.PyJWTError:
                    challenge = (
                        f'Bearer resource_metadata="{this.base}/.well-known/oauth-protected-resource/mcp"'
                    )
                    response = JSONResponse({"error": "invalid_token"}, 401, {"WWW-Authenticate": challenge})
                    return await response(scope, replay, send)
            return await mcp_app(scope, replay, send)

        asgi.bind = self.bind  # type: ignore[attr-defined]
        return asgi
