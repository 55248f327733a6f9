"""OAuth 2.1 for the upstream MCP servers maitre connects to: an `httpx2.Auth` per upstream.

The flows are the official SDK's (`mcp.client.auth`): on the upstream's 401 the SDK reads the
RFC 9728 protected-resource metadata named by `WWW-Authenticate` (else the well-known URLs), then
the RFC 8414 authorization-server metadata, picks the scopes the challenge or the metadata name,
registers the client if it has no id (RFC 7591, or a URL client id, CIMD), and asks for a token
bound to the resource (RFC 8707). A 403 `insufficient_scope` asks again with the union of scopes.

- **Client credentials** (`client_credentials_auth`): a service credential per upstream, either
  `client_id` + `client_secret` (`client_secret_basic` or `client_secret_post`) or `client_id` +
  a private key (`private_key_jwt`, RFC 7523; the algorithm follows the key). With `issuer` the
  credential only ever goes to that authorization server, whatever the upstream's metadata says.
- **Authorization code with PKCE** (`authorization_code_auth`, `maitre mcp login NAME`): a person
  signs in once in a browser; the redirect comes back to a listener on `127.0.0.1` on an ephemeral
  port (`LoopbackRedirect`, RFC 8252 §7.3), which accepts only the response carrying the state of
  the authorization it is waiting for. No token is ever pasted.

Tokens are cached and refreshed. For a person's sign-in they are kept in a file under the user's
configuration directory (`FileTokenStorage`, `~/.config/maitre/mcp-tokens/NAME.json`, mode 0600
in a 0700 folder, written atomically): a refresh token is that person's credential, so it belongs
to them and not to the stores' database that every replica, tenant and database administrator can
read, and the CLI that made it may have no database at all. A file others can read is not used.
The file is bound to the upstream's URL (a token for one URL is never sent to another) and also
keeps the discovered metadata and the absolute expiry, so a later process refreshes at the right
token endpoint before sending an expired token. Service tokens from client credentials stay in
memory (`MemoryTokenStorage`): the credential that makes them is in the configuration anyway, and
one long-lived session per upstream needs a new token only when the old one expires.

Outside `maitre mcp login` there is nobody to sign in: when an upstream needs one (no token, or
the refresh failed), the request fails with `LoginRequired`, which says which command to run.

No passthrough: before each request the flow removes any `Authorization` header it did not put
there itself, so the only credential an upstream ever sees is the one obtained for it.
Tokens, codes and secrets are never logged.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import stat
import tempfile
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.from_thread
import anyio.lowlevel
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
    _preferred_authorization_server,
    _require_metadata_for_configured_issuer,
)
from mcp.client.auth.utils import extract_field_from_www_auth
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from pydantic import AnyUrl, ValidationError

from ..exceptions import MaitreError, UserError

if TYPE_CHECKING:
    from ..config.schema import UpstreamConfig
    from .token_exchange import TokenExchange

__all__ = [
    "FileTokenStorage",
    "LoginRequired",
    "LoopbackRedirect",
    "MemoryTokenStorage",
    "OpenUrl",
    "authorization_code_auth",
    "client_credentials_auth",
    "default_token_dir",
    "sign_in",
    "token_exchange",
    "token_file",
    "upstream_auth",
    "upstream_options",
]

logger = logging.getLogger("maitre.mcp.upstream_auth")

OpenUrl = Callable[[str], Awaitable[None]]
"""What shows a person the authorization URL (the CLI prints it to stderr and opens a browser)."""

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_SIGNING = {
    "RSA": "RS256",
    "Ed25519": "EdDSA",
    "secp256r1": "ES256",
    "secp384r1": "ES384",
    "secp521r1": "ES512",
}


class LoginRequired(MaitreError, OAuthFlowError):
    """The upstream needs a person to sign in (`maitre mcp login NAME`) before it can be called."""


# -- token storage ------------------------------------------------------------------------------


class MemoryTokenStorage:
    """The SDK's `TokenStorage` in memory: what a process obtained lives as long as the process."""

    def __init__(self) -> None:
        self._tokens: OAuthToken | None = None
        self._client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client_info = client_info


def default_token_dir() -> Path:
    """`$XDG_CONFIG_HOME/maitre/mcp-tokens`, else `~/.config/maitre/mcp-tokens`."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "maitre" / "mcp-tokens"


def token_file(name: str, token_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where the tokens of upstream `name` are kept (`name` must be a plain file name)."""
    if not _SAFE_NAME.match(name):
        raise UserError(f"upstream name {name!r} cannot name a token file: use letters, digits, _ . -")
    return (Path(token_dir) if token_dir is not None else default_token_dir()) / f"{name}.json"


class FileTokenStorage:
    """The SDK's `TokenStorage` in one JSON file, mode 0600, bound to the upstream's URL.

    The file also keeps what `maitre` needs to refresh in a later process: the absolute expiry
    and the authorization-server metadata discovered with the token. A file that others may read
    or write, or that was made for another URL, is treated as empty (and replaced on next save).
    """

    def __init__(self, path: str | os.PathLike[str], *, resource: str) -> None:
        self.path = Path(path)
        self.resource = resource
        self._told: set[str] = set()

    def _refuse(self, why: str, level: int = logging.WARNING) -> dict[str, Any]:
        if why not in self._told:  # once per reason, not at every read
            self._told.add(why)
            logger.log(level, "not using %s: %s", self.path, why)
        return {}

    def _load(self) -> dict[str, Any]:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return {}
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            return self._refuse("others may read or write it (delete it and log in again)")
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            return self._refuse("it belongs to another user")
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return self._refuse("it is not a token file")
        if not isinstance(data, dict) or data.get("resource") != self.resource:
            return self._refuse("it was made for another URL", logging.INFO)
        return data

    def _update(self, **values: Any) -> None:
        data = self._load() or {"resource": self.resource}
        data.update(values)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:  # mkstemp made it 0600
                json.dump(data, f, indent=2, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    async def get_tokens(self) -> OAuthToken | None:
        raw = self._load().get("tokens")
        try:
            return OAuthToken.model_validate(raw) if raw else None
        except ValidationError:
            return None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        self._update(tokens=tokens.model_dump(mode="json", exclude_none=True), expires_at=expires_at)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        raw = self._load().get("client_info")
        try:
            return OAuthClientInformationFull.model_validate(raw) if raw else None
        except ValidationError:
            return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._update(client_info=client_info.model_dump(mode="json", exclude_none=True))

    def expires_at(self) -> float | None:
        value = self._load().get("expires_at")
        return float(value) if isinstance(value, int | float) else None

    def metadata(self) -> dict[str, Any]:
        value = self._load().get("metadata")
        return value if isinstance(value, dict) else {}

    def set_metadata(self, metadata: dict[str, Any]) -> None:
        self._update(metadata=metadata)

    def clear(self) -> bool:
        """Forget everything kept for this upstream; whether there was anything."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True


# -- the loopback redirect listener -------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: _CallbackServer

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items() if v}
        accepted = parts.path == "/callback" and self.server.owner._deliver(query)
        if accepted:
            failed = "error" in query
            body = "Sign-in failed; see the terminal." if failed else "Signed in. You can close this tab."
            self._answer(200, body)
        else:
            self._answer(
                400 if parts.path == "/callback" else 404, "Not the sign-in this listener waits for."
            )

    def _answer(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # the query holds the code: never log it
        return


class _CallbackServer(HTTPServer):
    def __init__(self, owner: LoopbackRedirect) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("the sign-in listener dropped a broken request", exc_info=True)


class LoopbackRedirect:
    """Receives the authorization response at `http://127.0.0.1:PORT/callback` (an ephemeral port).

    Use it as a context manager around the sign-in: the port is bound on entry (so the redirect URI
    exists before the client registers) and closed on exit. `redirect_handler` and
    `callback_handler` are the SDK provider's two callbacks: the first hands the authorization URL
    to `open_url` and remembers its `state`; the second waits (at most `timeout_s`) for the one
    response carrying that state. Any other request to the listener is answered 400/404 and
    ignored, so a page that guesses the port cannot end or hijack the sign-in.
    """

    def __init__(self, open_url: OpenUrl, *, timeout_s: float = 300.0) -> None:
        self.open_url = open_url
        self.timeout_s = timeout_s
        self._server: _CallbackServer | None = None
        self._lock = threading.Lock()
        self._state: str | None = None
        self._result: dict[str, str] | None = None
        self._arrived: anyio.Event | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None

    def __enter__(self) -> LoopbackRedirect:
        self._server = _CallbackServer(self)
        threading.Thread(target=self._server.serve_forever, name="maitre-oauth-callback", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def redirect_uri(self) -> str:
        if self._server is None:
            raise UserError(
                "LoopbackRedirect is used as a context manager: `with LoopbackRedirect(...) as r:`"
            )
        return f"http://127.0.0.1:{self._server.server_address[1]}/callback"

    def _deliver(self, query: dict[str, str]) -> bool:
        """From the listener's thread: accept `query` if it answers the pending authorization."""
        with self._lock:
            state, got = self._state, query.get("state")
            if state is None or got is None or self._result is not None:
                return False
            if not secrets.compare_digest(got.encode(), state.encode()):
                return False
            if "code" not in query and "error" not in query:
                return False
            self._result = query
            arrived, token = self._arrived, self._token
        if arrived is not None and token is not None:
            with contextlib.suppress(RuntimeError):  # the sign-in was given up meanwhile
                anyio.from_thread.run_sync(arrived.set, token=token)
        return True

    async def redirect_handler(self, authorization_url: str) -> None:
        state = parse_qs(urlsplit(authorization_url).query).get("state", [None])[0]
        with self._lock:
            self._state, self._result = state, None
            self._arrived, self._token = anyio.Event(), anyio.lowlevel.current_token()
        await self.open_url(authorization_url)

    async def callback_handler(self) -> AuthorizationCodeResult:
        arrived = self._arrived
        if arrived is None:
            raise OAuthFlowError("no authorization is pending")
        try:
            with anyio.fail_after(self.timeout_s):
                await arrived.wait()
        except TimeoutError:
            raise OAuthFlowError(f"no sign-in arrived within {self.timeout_s:g} s") from None
        with self._lock:
            result, self._state, self._arrived = self._result or {}, None, None
        if "error" in result:
            described = result.get("error_description")
            raise OAuthFlowError(
                f"the authorization server refused: {result['error']}"
                + (f" ({described})" if described else "")
            )
        return AuthorizationCodeResult(code=result["code"], state=result.get("state"), iss=result.get("iss"))


# -- the providers: the SDK's flows, holding to the upstream's own credential --------------------


def _needs_sign_in(response: httpx2.Response) -> bool:
    if response.status_code == 401:
        return True
    return (
        response.status_code == 403 and extract_field_from_www_auth(response, "error") == "insufficient_scope"
    )


class _OwnCredential(OAuthClientProvider):
    """What maitre adds to each SDK provider.

    - Any `Authorization` header on the request is dropped before the SDK adds its own token, so
      nothing but the credential obtained for this upstream reaches it.
    - With a `FileTokenStorage`, the expiry and the discovered metadata are restored from the file,
      so an expired token is refreshed at the right token endpoint before it is sent.
    - Without a person (`sign_in` is the command to run), a 401 or a 403 `insufficient_scope` is
      answered by one refresh if a refresh token is held, else `LoginRequired`.
    """

    _sign_in: str | None = None

    async def _initialize(self) -> None:
        await super()._initialize()
        storage = self.context.storage
        if not isinstance(storage, FileTokenStorage) or self.context.current_tokens is None:
            return
        self.context.token_expiry_time = storage.expires_at()
        saved = storage.metadata()
        try:
            if saved.get("oauth") and self.context.oauth_metadata is None:
                self.context.oauth_metadata = OAuthMetadata.model_validate(saved["oauth"])
            if saved.get("resource") and self.context.protected_resource_metadata is None:
                self.context.protected_resource_metadata = ProtectedResourceMetadata.model_validate(
                    saved["resource"]
                )
        except ValidationError:
            logger.info("the metadata kept in %s is not valid; discovering it again", storage.path)
        if isinstance(saved.get("auth_server_url"), str) and self.context.auth_server_url is None:
            self.context.auth_server_url = saved["auth_server_url"]

    def _keep_metadata(self) -> None:
        storage = self.context.storage
        if not isinstance(storage, FileTokenStorage):
            return
        oauth, prm = self.context.oauth_metadata, self.context.protected_resource_metadata
        storage.set_metadata(
            {
                "oauth": oauth.model_dump(mode="json", exclude_none=True) if oauth else None,
                "resource": prm.model_dump(mode="json", exclude_none=True) if prm else None,
                "auth_server_url": self.context.auth_server_url,
            }
        )

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        self._keep_metadata()

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        refreshed = await super()._handle_refresh_response(response)
        if refreshed:
            self._keep_metadata()
        else:
            logger.info("the refresh token for %s was refused", self.context.server_url)
        return refreshed

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        refreshed = reloaded = False
        while True:
            request.headers.pop("Authorization", None)
            flow = super()._auth_flow(request)
            again = False
            try:
                outgoing = await flow.__anext__()
                while True:
                    response = yield outgoing
                    if outgoing is request and self._sign_in is not None and _needs_sign_in(response):
                        if response.status_code == 401 and not refreshed and self.context.can_refresh_token():
                            # Refused before its time: refresh it (expiry 0 would read as "none").
                            self.context.token_expiry_time = 1.0
                            refreshed = again = True
                            break
                        if response.status_code == 401 and not reloaded and not self._initialized:
                            # The refresh failed: another process may have rotated the tokens.
                            reloaded = again = True
                            break
                        scope = extract_field_from_www_auth(response, "scope")
                        wants = f" (it asks for scope {scope!r})" if scope else ""
                        raise LoginRequired(
                            f"{self.context.server_url} needs a sign-in{wants}: {self._sign_in}"
                        )
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            finally:
                await flow.aclose()
            if not again:
                return


class _AuthorizationCode(_OwnCredential):
    def __init__(
        self,
        *args: Any,
        fixed_client: OAuthClientInformationFull | None,
        sign_in: str | None,
        issuer: str | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._fixed_client = fixed_client
        self._sign_in = sign_in
        self._issuer = issuer
        self._fresh = False

    def _select_authorization_server(self, advertised: list[str]) -> str:
        return _preferred_authorization_server(advertised, self._issuer)

    async def _perform_authorization(self) -> httpx2.Request:
        # With an issuer configured, neither the person nor the client's secret goes elsewhere.
        _require_metadata_for_configured_issuer(self.context, self._issuer)
        return await super()._perform_authorization()

    async def _initialize(self) -> None:
        await super()._initialize()
        if self._fresh:
            self._fresh = False
            self.context.current_tokens, self.context.token_expiry_time = None, None
        if self._fixed_client is not None:
            self.context.client_info = self._fixed_client
            return
        registered, uris = self.context.client_info, self.context.client_metadata.redirect_uris
        if registered is None or not uris or self._sign_in is not None:
            return
        # A registration binds its redirect URIs; this sign-in listens on a new port.
        if str(uris[0]) not in {str(u) for u in registered.redirect_uris or ()}:
            self.context.client_info = None


class _ClientCredentials(_OwnCredential, ClientCredentialsOAuthProvider):
    pass


class _PrivateKeyJWT(_OwnCredential, PrivateKeyJWTOAuthProvider):
    pass


def _signing_algorithm(pem: str) -> str:
    """RS256, ES256/384/512 or EdDSA: what a private key in PEM signs with."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise UserError(f"the private key is not an unencrypted PEM private key ({exc})") from None
    if isinstance(key, rsa.RSAPrivateKey):
        return _SIGNING["RSA"]
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return _SIGNING["Ed25519"]
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name in _SIGNING:
        return _SIGNING[key.curve.name]
    raise UserError(f"a {type(key).__name__} cannot sign a client assertion: use an RSA, EC or Ed25519 key")


def client_credentials_auth(
    url: str,
    *,
    client_id: str,
    client_secret: str | None = None,
    private_key: str | None = None,
    issuer: str | None = None,
    scopes: Iterable[str] = (),
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic",
    storage: TokenStorage | None = None,
) -> httpx2.Auth:
    """A service credential for the upstream at `url` (OAuth client credentials grant).

    Give `client_secret` (sent as `token_endpoint_auth_method` says) or `private_key` (PEM; a
    `private_key_jwt` assertion signed with it, RS256/ES256/ES384/ES512/EdDSA by the key's type).
    `issuer` names the authorization server the credential belongs to: the token request then
    goes only there (the SDK warns when it is missing). Tokens are kept in `storage` (default:
    memory).
    """
    if (client_secret is None) == (private_key is None):
        raise UserError("client credentials need a client_secret or a private key (exactly one)")
    scope = " ".join(scopes) or None
    store = storage if storage is not None else MemoryTokenStorage()
    if private_key is not None:
        assertion = SignedJWTParameters(
            issuer=client_id,
            subject=client_id,
            signing_key=private_key,
            signing_algorithm=_signing_algorithm(private_key),
        )
        return _PrivateKeyJWT(
            url, store, client_id, assertion.create_assertion_provider(), scope=scope, issuer=issuer
        )
    assert client_secret is not None
    return _ClientCredentials(
        url,
        store,
        client_id,
        client_secret,
        token_endpoint_auth_method=token_endpoint_auth_method,
        scope=scope,
        issuer=issuer,
    )


def authorization_code_auth(
    url: str,
    *,
    storage: TokenStorage,
    redirect: LoopbackRedirect | None = None,
    sign_in: str = "run `maitre mcp login NAME`",
    client_id: str | None = None,
    client_secret: str | None = None,
    token_endpoint_auth_method: str | None = None,
    client_metadata_url: str | None = None,
    issuer: str | None = None,
    scopes: Iterable[str] = (),
    client_name: str = "maitre",
) -> httpx2.Auth:
    """A person's sign-in to the upstream at `url` (authorization code with PKCE S256).

    With `redirect` (an entered `LoopbackRedirect`) the flow may send the person to the
    authorization server; without it, tokens come only from `storage` (and their refresh), and an
    upstream that needs a new sign-in fails the request with `LoginRequired` saying `sign_in`.
    `client_id` (and `client_secret`) name a pre-registered client; without them the client
    registers itself (RFC 7591), or uses `client_metadata_url` as its id where the server takes one.
    With `issuer`, only that authorization server is used: an upstream whose metadata names
    another fails before the person is sent anywhere or a secret is sent.
    """
    scope = " ".join(scopes) or None
    fixed = None
    if client_id is not None:
        method = token_endpoint_auth_method or ("client_secret_basic" if client_secret else "none")
        fixed = OAuthClientInformationFull(
            client_id=client_id,
            client_secret=client_secret,
            token_endpoint_auth_method=method,
            redirect_uris=[AnyUrl(redirect.redirect_uri)] if redirect is not None else None,
            grant_types=["authorization_code", "refresh_token"],
            scope=scope,
        )
    metadata = OAuthClientMetadata(
        client_name=client_name,
        redirect_uris=[AnyUrl(redirect.redirect_uri)] if redirect is not None else None,
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=scope,
    )
    return _AuthorizationCode(
        url,
        metadata,
        storage,
        redirect.redirect_handler if redirect is not None else None,
        redirect.callback_handler if redirect is not None else None,
        client_metadata_url=client_metadata_url,
        fixed_client=fixed,
        sign_in=None if redirect is not None else sign_in,
        issuer=issuer,
    )


def _secret(name: str, config: UpstreamConfig) -> str | None:
    """`client_secret` with its `$VARS` expanded (a variable that is not set is a `UserError`)."""
    if config.client_secret is None:
        return None
    unset = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", config.client_secret)
    if unset is not None and unset.group(1) not in os.environ:
        raise UserError(f"[mcp.upstreams.{name}] client_secret names ${unset.group(1)}, which is not set")
    return os.path.expandvars(config.client_secret)


def _private_key(name: str, config: UpstreamConfig) -> str | None:
    if config.private_key_file is None:
        return None
    try:
        return Path(config.private_key_file).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"[mcp.upstreams.{name}] private_key_file: {exc.strerror}: {exc.filename}") from None


def token_exchange(name: str, config: UpstreamConfig) -> TokenExchange:
    """The RFC 8693 exchange `[mcp.upstreams.NAME] auth = "token_exchange"` configures.

    The token is for `audience` and/or `resource` (default: the upstream's `url` as `resource`).
    """
    from .token_exchange import TokenExchange

    if config.auth != "token_exchange" or config.url is None:
        raise UserError(f'[mcp.upstreams.{name}] needs url and auth = "token_exchange"')
    assert config.client_id is not None and config.issuer is not None  # the schema requires them
    resource = config.resource
    if resource is None and config.audience is None:
        resource = config.url
    return TokenExchange(
        upstream=name,
        issuer=config.issuer,
        client_id=config.client_id,
        client_secret=_secret(name, config),
        private_key=_private_key(name, config),
        auth_method=config.token_endpoint_auth_method,
        token_endpoint=config.token_endpoint,
        audience=config.audience,
        resource=resource,
        scopes=config.scopes,
    )


def upstream_auth(
    name: str,
    config: UpstreamConfig,
    *,
    token_dir: str | os.PathLike[str] | None = None,
    redirect: LoopbackRedirect | None = None,
) -> httpx2.Auth | None:
    """The `httpx2.Auth` that `[mcp.upstreams.NAME]` configures (None for `auth = "none"`).

    `$VARS` in `client_secret` expand here; `private_key_file` is read here. An
    `authorization_code` upstream uses the tokens `maitre mcp login NAME` cached (in
    `token_dir`, default `default_token_dir()`), unless `redirect` lets a person sign in now.
    A `token_exchange` upstream's own connection (what `maitre mcp pin|check` and the gateway's
    listing use) carries the gateway's client-credentials token; its tool calls carry each
    caller's exchanged token instead (`upstream_options`).
    """
    if config.auth == "none":
        return None
    if config.url is None:
        raise UserError(f"[mcp.upstreams.{name}] auth = {config.auth!r} needs a url (stdio has no OAuth)")
    secret = _secret(name, config)
    if config.auth == "token_exchange":
        return token_exchange(name, config).service_auth()
    if config.auth == "client_credentials":
        assert config.client_id is not None  # the schema requires it
        return client_credentials_auth(
            config.url,
            client_id=config.client_id,
            client_secret=secret,
            private_key=_private_key(name, config),
            issuer=config.issuer,
            scopes=config.scopes,
            token_endpoint_auth_method=config.token_endpoint_auth_method,
        )
    storage = FileTokenStorage(token_file(name, token_dir), resource=config.url)
    return authorization_code_auth(
        config.url,
        storage=storage,
        redirect=redirect,
        sign_in=f"run `maitre mcp login {name}`",
        client_id=config.client_id,
        client_secret=secret,
        token_endpoint_auth_method=config.token_endpoint_auth_method if config.client_secret else None,
        client_metadata_url=config.client_metadata_url,
        issuer=config.issuer,
        scopes=config.scopes,
    )


def upstream_options(
    name: str,
    config: UpstreamConfig,
    *,
    token_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """`McpUpstream`'s keyword arguments for `[mcp.upstreams.NAME]`: how it is reached and whose
    credential each call carries, and the operator's per-tool policy.

    `headers` (`$VARS` expanded), `auth` (`upstream_auth`), `allow_loopback`, `allowed_hosts`,
    `overrides` (`[mcp.upstreams.NAME.tools.TOOL]`, see `ToolOverrideConfig`) and, for
    `auth = "token_exchange"`, `credential_for`: every tool call exchanges the caller's token
    for one of its own (`maitre.mcp.token_exchange`); the upstream's own connection carries the
    gateway's client-credentials token. In no mode does the caller's token reach the upstream:
    `headers` come from the configuration only, and each auth flow sets the one `Authorization`
    header it obtained.
    """
    options: dict[str, Any] = {
        "headers": {key: os.path.expandvars(value) for key, value in config.headers.items()},
        "allow_loopback": config.allow_loopback,
        "allowed_hosts": list(config.allowed_hosts),
        "overrides": {tool: override.metadata() for tool, override in config.tools.items()},
        "auth": None,
    }
    if config.auth == "token_exchange":
        exchange = token_exchange(name, config)
        options["auth"] = exchange.service_auth()
        options["credential_for"] = exchange.credential_for
    elif config.auth != "none":
        options["auth"] = upstream_auth(name, config, token_dir=token_dir)
    return options


async def sign_in(
    name: str,
    config: UpstreamConfig,
    *,
    open_url: OpenUrl,
    token_dir: str | os.PathLike[str] | None = None,
    timeout_s: float = 300.0,
) -> FileTokenStorage:
    """`maitre mcp login NAME`: a person signs in to the upstream now; returns where the tokens are.

    Listens on 127.0.0.1 (an ephemeral port), connects to the upstream (with its headers and
    address allowances), and on its 401 runs the SDK's flow: discovery, registration if needed,
    `open_url(authorization_url)`, the redirect back to the listener, the token exchange. Any
    tokens kept before are replaced. Raises `UserError` when the upstream asked for no sign-in.
    """
    from .client import McpUpstream

    if config.auth != "authorization_code" or config.url is None:
        raise UserError(f'[mcp.upstreams.{name}] needs url and auth = "authorization_code" to sign in')
    with LoopbackRedirect(open_url, timeout_s=timeout_s) as redirect:
        auth = upstream_auth(name, config, token_dir=token_dir, redirect=redirect)
        assert isinstance(auth, _AuthorizationCode)
        auth._fresh = True  # sign in now, whatever is cached; the file changes only when it succeeds
        storage = auth.context.storage
        assert isinstance(storage, FileTokenStorage)
        upstream = McpUpstream(
            config.url,
            namespace=name,
            auth=auth,
            headers={key: os.path.expandvars(value) for key, value in config.headers.items()},
            allow_loopback=config.allow_loopback,
            allowed_hosts=config.allowed_hosts,
        )
        await upstream.definitions()
    if await storage.get_tokens() is None:
        raise UserError(f'{config.url} did not ask for a sign-in: it needs no auth = "authorization_code"')
    return storage
