"""RFC 8693 token exchange: each caller's own token becomes a token for one upstream, never passed on.

A gateway in front of an upstream that must know *who* calls cannot forward the caller's bearer
token (the upstream could replay it anywhere the token is good for: the confused deputy the MCP
authorization spec forbids) and cannot use one service credential for everyone (the upstream would
see the gateway, not the person). So for every call of an imported tool, in the caller's context
(`McpUpstream(credential_for=exchange.credential_for)`), `TokenExchange`:

1. reads the caller's validated token and principal from the HTTP request being served
   (`caller_from_request`: the SDK's `get_access_token()`, set by the bearer middleware that
   verified it). Without one (stdio, unauthenticated HTTP, an in-process call) the call fails with
   AUTH_REQUIRED, saying why: there is nobody to exchange for, and falling back to a shared
   credential would act for the wrong person;
2. asks the IdP (`grant_type=urn:ietf:params:oauth:grant-type:token-exchange`, the caller's token
   as `subject_token` of type access_token, the upstream's `audience` and/or `resource`, `scope`),
   authenticating as the gateway's own client (`client_secret_basic`, `client_secret_post`, or a
   `private_key_jwt` assertion). The token endpoint is configured or read from the issuer's RFC 8414
   (else OpenID) metadata, whose `issuer` must be the configured one;
3. caches the answer per (tenant, user, upstream) until `refresh_margin_s` before it expires, and
   never past the caller's own token's expiry; a different token of the same caller is exchanged
   again (its scopes may differ). One exchange is in flight per key and token (concurrent calls
   wait for it); the cache keeps at most `max_entries` callers (least recently used go first);
4. hands the pool an `UpstreamCredential` whose key names the user (a hash of tenant, user and
   upstream: never the token) and whose `httpx2.Auth` puts that user's current exchanged token on
   each request: every user has their own upstream session, and a session outliving a token sends
   the renewed one.

Refused on purpose: an IdP answer that is not a bearer access token, or that hands back the
caller's own token (an echoing IdP would turn the exchange into passthrough). An upstream that
answers 401 to an exchanged token drops it from the cache (the next call exchanges again).

Errors are `ToolError`s the model can read: AUTH_REQUIRED (no caller token, `invalid_grant`: the
caller must sign in again), INVALID_STATE (the gateway's client or the upstream's settings were
refused: the operator must fix `[mcp.upstreams.NAME]`), TEMPORARY_UNAVAILABLE (the IdP timed out,
could not be reached or answered 5xx; retryable). No message, log line or audit detail carries a
token or a secret: what the IdP says is quoted only after every credential in the exchange is cut
out of it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote_plus, urlsplit

import anyio
import httpx2
import jwt

from ..exceptions import MaitreError, UserError
from ..types import ErrorCode, ToolError
from .upstream_session import UpstreamCredential

__all__ = [
    "ACCESS_TOKEN_TYPE",
    "Caller",
    "TOKEN_EXCHANGE_GRANT",
    "TokenExchange",
    "UpstreamTokenRefused",
    "caller_from_request",
]

logger = logging.getLogger("maitre.mcp.token_exchange")

TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
_JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
_LOOPBACK = ("127.0.0.1", "::1", "localhost")
_DEFAULT_LIFETIME_S = 60.0
"""How long an exchanged token is used when neither `expires_in` nor its own `exp` says."""
_MAX_BODY = 64 * 1024
_SHOWN = 200


@dataclass(frozen=True, kw_only=True)
class Caller:
    """Who calls, and the token they authenticated with (already verified at the door)."""

    tenant: str
    user: str
    token: str = field(repr=False)

    @property
    def token_expires_at(self) -> float | None:
        """The caller's token's `exp` (wall clock), if it is a JWT that says; bounds the cache."""
        try:
            claims = jwt.decode(self.token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return None
        exp = claims.get("exp")
        return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


def caller_from_request() -> Caller | None:
    """The caller of the HTTP request being served, from the SDK's auth context (None without one).

    The bearer middleware verified the token and put the principal in its claims
    (`maitre.mcp.auth.SdkTokenVerifier`); the request's context reaches the tool's handler through
    the gate, which runs it in the serving task (contextvars are copied into any task it starts).
    """
    from mcp.server.auth.middleware.auth_context import get_access_token

    from .auth import PRINCIPAL_CLAIM

    access = get_access_token()
    if access is None or not access.token or not access.claims:
        return None
    principal = access.claims.get(PRINCIPAL_CLAIM)
    if not isinstance(principal, dict):
        return None
    tenant, user = principal.get("tenant"), principal.get("user")
    if not isinstance(tenant, str) or not isinstance(user, str):
        return None
    return Caller(tenant=tenant, user=user, token=access.token)


class UpstreamTokenRefused(MaitreError):
    """The upstream answered 401 to the token exchanged for this caller (it was dropped)."""


@dataclass(kw_only=True)
class _Cached:
    token: str = field(repr=False)
    expires_at: float
    """Wall clock: when the cached token stops being used (its expiry minus the margin)."""
    subject: str
    """A digest of the caller's token it was exchanged for (a new token is exchanged again)."""


@dataclass(kw_only=True)
class _Flight:
    done: anyio.Event = field(default_factory=anyio.Event)
    token: str | None = field(default=None, repr=False)
    error: ToolError | None = None


class _ExchangedBearer(httpx2.Auth):
    """Puts the user's current exchanged token on each request of that user's upstream session.

    One per (tenant, user, upstream) key while a session holds it; `credential_for` renews
    `token` before each call, so a long-lived session sends the token in force, never the caller's.
    """

    def __init__(self, exchange: TokenExchange, key: str) -> None:
        self._exchange = exchange
        self._key = key
        self.token = ""

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        response = yield request
        if response.status_code == 401:
            self._exchange.forget(self._key)
            raise UpstreamTokenRefused(
                f"the MCP server {self._exchange.upstream!r} refused the token exchanged for this caller "
                "(HTTP 401); check audience/resource/scopes in "
                f"[mcp.upstreams.{self._exchange.upstream}] and the IdP's token-exchange policy"
            )


class _ServiceBearer(httpx2.Auth):
    """The gateway's own client-credentials token on the upstream's own session (`service_auth`)."""

    def __init__(self, exchange: TokenExchange) -> None:
        self._exchange = exchange

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        request.headers["Authorization"] = f"Bearer {await self._token()}"
        response = yield request
        if response.status_code == 401:  # revoked before its time: one fresh token, once
            request.headers["Authorization"] = f"Bearer {await self._token(renew=True)}"
            response = yield request
            if response.status_code == 401:
                raise UpstreamTokenRefused(
                    f"the MCP server {self._exchange.upstream!r} refused the gateway's own token (client "
                    f"credentials, HTTP 401); check audience/resource/scopes in [mcp.upstreams."
                    f"{self._exchange.upstream}] and that the IdP lets the gateway's client reach it"
                )

    async def _token(self, *, renew: bool = False) -> str:
        try:
            return await self._exchange.service_token(renew=renew)
        except ToolError as exc:
            raise UpstreamTokenRefused(exc.message) from None


class TokenExchange:
    """RFC 8693 token exchange for one upstream, with a per-caller cache (see the module docstring).

    Args:
        upstream: the upstream's name (namespace), for messages and the cache key.
        issuer: the IdP's issuer identifier; only its token endpoint is ever sent the secret.
        client_id: the gateway's client at the IdP.
        client_secret: its secret, sent as `auth_method` says ...
        private_key: ... or a PEM private key signing a `private_key_jwt` assertion (aud: issuer).
        token_endpoint: the IdP's token endpoint (default: read from its metadata).
        audience, resource: what the token is for (RFC 8693 `audience`, RFC 8707 `resource`).
        scopes: the scopes asked for (`scope`).
        refresh_margin_s: a cached token is exchanged again this long before it expires (at most
            half of its lifetime, so short tokens are used too).
        max_entries: how many callers' tokens are kept.
        timeout_s: one request to the IdP.
        http: an `httpx2.AsyncClient` to use (default: one per request, closed after).
        caller: where the caller comes from (default: the HTTP request being served).
    """

    def __init__(
        self,
        *,
        upstream: str,
        issuer: str,
        client_id: str,
        client_secret: str | None = None,
        private_key: str | None = None,
        auth_method: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic",
        token_endpoint: str | None = None,
        audience: str | None = None,
        resource: str | None = None,
        scopes: Iterable[str] = (),
        refresh_margin_s: float = 30.0,
        max_entries: int = 1024,
        timeout_s: float = 10.0,
        http: httpx2.AsyncClient | None = None,
        caller: Callable[[], Caller | None] = caller_from_request,
    ) -> None:
        if (client_secret is None) == (private_key is None):
            raise UserError("token exchange needs the gateway's client_secret or a private key (exactly one)")
        if audience is None and resource is None:
            raise UserError("token exchange needs the upstream's audience or resource")
        _check_url(issuer, "issuer")
        if token_endpoint is not None:
            _check_url(token_endpoint, "token_endpoint")
        self.upstream = upstream
        self.issuer = issuer
        self.client_id = client_id
        self._secret = client_secret
        self._key = private_key
        self._algorithm = _signing_algorithm(private_key) if private_key is not None else None
        self.auth_method = auth_method
        self.token_endpoint = token_endpoint
        self.audience = audience
        self.resource = resource
        self.scopes = tuple(scopes)
        self.refresh_margin_s = refresh_margin_s
        self.max_entries = max(1, max_entries)
        self.timeout_s = timeout_s
        self.http = http
        self.caller = caller
        self.exchanges = 0
        """How many tokens were asked of the IdP, exchanges and service tokens (for operators and tests)."""
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._flights: dict[tuple[str, str], _Flight] = {}
        self._auths: weakref.WeakValueDictionary[str, _ExchangedBearer] = weakref.WeakValueDictionary()
        self._discovery_lock = anyio.Lock()
        self._service_lock = anyio.Lock()
        self._service: _Cached | None = None

    # -- what McpUpstream calls ------------------------------------------------------------------

    async def credential_for(self) -> UpstreamCredential:
        """The calling user's credential for this upstream (`McpUpstream(credential_for=...)`)."""
        caller = self.caller()
        if caller is None:
            raise ToolError(
                ErrorCode.AUTH_REQUIRED,
                f"The MCP server {self.upstream!r} acts for the calling user (token exchange), and this "
                "call has no caller token to exchange: it did not come over HTTP with a verified bearer "
                "token (stdio, unauthenticated HTTP or an in-process call). Call through the gateway's "
                "HTTP endpoint with a token from the issuer.",
                details={"upstream": self.upstream, "reason": "no_caller_token"},
            )
        key = self.session_key(caller)
        token = await self.token_for(caller)
        auth = self._auths.get(key)
        if auth is None:
            auth = self._auths[key] = _ExchangedBearer(self, key)
        auth.token = token
        return UpstreamCredential(key=key, auth=auth)

    def session_key(self, caller: Caller) -> str:
        """The pool key of `caller`'s upstream session: names the user (hashed), never the token."""
        digest = hashlib.sha256(f"{caller.tenant}\0{caller.user}\0{self.upstream}".encode()).hexdigest()
        return f"user:{digest[:32]}"

    def forget(self, key: str) -> None:
        """Drop the cached token of session key `key` (the upstream refused it)."""
        self._cache.pop(key, None)

    def service_auth(self) -> httpx2.Auth:
        """The gateway's own credential for this upstream (client credentials grant, same client,
        same audience/resource/scopes): for what no caller asks, the import's listing, drift
        re-checks and health checks on the upstream's own session. Never a caller's token, and
        never used for a tool call (those carry the caller's exchanged token)."""
        return _ServiceBearer(self)

    async def service_token(self, *, renew: bool = False) -> str:
        """A client-credentials token for this upstream, cached until shortly before it expires."""
        async with self._service_lock:
            cached = self._service
            if cached is not None and not renew and time.time() < cached.expires_at:
                return cached.token
            token, expires_at = await self._request({"grant_type": "client_credentials"}, None)
            self._service = _Cached(token=token, expires_at=expires_at, subject="")
            return token

    # -- the cache ---------------------------------------------------------------------------------

    async def token_for(self, caller: Caller) -> str:
        """A token for this upstream acting for `caller`: cached, else exchanged (one at a time)."""
        key = self.session_key(caller)
        subject = hashlib.sha256(caller.token.encode()).hexdigest()
        cached = self._cache.get(key)
        if cached is not None and cached.subject == subject and time.time() < cached.expires_at:
            self._cache.move_to_end(key)
            return cached.token
        flight = self._flights.get((key, subject))
        if flight is not None:
            await flight.done.wait()
            if flight.error is not None:
                raise flight.error
            assert flight.token is not None
            return flight.token
        flight = self._flights[(key, subject)] = _Flight()
        try:
            token, expires_at = await self._exchange(caller)
            bound = caller.token_expires_at
            if bound is not None:
                expires_at = min(expires_at, bound)
            self._cache[key] = _Cached(token=token, expires_at=expires_at, subject=subject)
            self._cache.move_to_end(key)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
            flight.token = token
            return token
        except ToolError as exc:
            flight.error = exc
            raise
        finally:
            if flight.token is None and flight.error is None:  # cancelled or broken: waiters may retry
                flight.error = ToolError(
                    ErrorCode.TEMPORARY_UNAVAILABLE,
                    f"The token exchange for {self.upstream!r} was interrupted; try again.",
                    retryable=True,
                    details={"upstream": self.upstream},
                )
            del self._flights[(key, subject)]
            flight.done.set()

    # -- the exchange ------------------------------------------------------------------------------

    async def _exchange(self, caller: Caller) -> tuple[str, float]:
        """Ask the IdP; (the exchanged token, when to stop using it). Errors are `ToolError`s."""
        form = {
            "grant_type": TOKEN_EXCHANGE_GRANT,
            "subject_token": caller.token,
            "subject_token_type": ACCESS_TOKEN_TYPE,
            "requested_token_type": ACCESS_TOKEN_TYPE,
        }
        return await self._request(form, caller)

    async def _request(self, form: dict[str, str], caller: Caller | None) -> tuple[str, float]:
        """POST `form` (plus what the token is for, and the client's authentication) to the token
        endpoint; (the token issued, when to stop using it)."""
        endpoint = await self._endpoint()
        form = dict(form)
        if self.audience is not None:
            form["audience"] = self.audience
        if self.resource is not None:
            form["resource"] = self.resource
        if self.scopes:
            form["scope"] = " ".join(self.scopes)
        headers = {"Accept": "application/json"}
        if self._key is not None:
            form["client_id"] = self.client_id
            form["client_assertion_type"] = _ASSERTION_TYPE
            form["client_assertion"] = self._assertion()
        elif self.auth_method == "client_secret_post":
            assert self._secret is not None
            form["client_id"], form["client_secret"] = self.client_id, self._secret
        else:
            assert self._secret is not None
            pair = f"{quote_plus(self.client_id)}:{quote_plus(self._secret)}"  # RFC 6749 §2.3.1
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        self.exchanges += 1
        started = time.time()
        try:
            status, body = await self._post(endpoint, form, headers)
        except httpx2.TimeoutException:
            raise self._unavailable(f"gave no answer within {self.timeout_s:g} s") from None
        except (httpx2.HTTPError, OSError) as exc:
            raise self._unavailable(f"could not be reached ({type(exc).__name__})") from None
        if status >= 500:
            raise self._unavailable(f"answered HTTP {status}")
        if status != 200:
            raise self._refused(status, body, caller)
        return self._issued(body, caller, started)

    async def _post(self, url: str, form: dict[str, str], headers: dict[str, str]) -> tuple[int, Any]:
        return await self._send("POST", url, data=form, headers=headers)

    async def _send(self, method: str, url: str, **options: Any) -> tuple[int, Any]:
        """One request to the IdP: its status and its JSON body (None when it is not JSON or larger
        than `_MAX_BODY`). The client is `self.http`, or one opened and closed for this request."""
        client = self.http or httpx2.AsyncClient(timeout=self.timeout_s, follow_redirects=False)
        try:
            response = await client.request(method, url, timeout=self.timeout_s, **options)
            raw = response.content[: _MAX_BODY + 1]
        finally:
            if self.http is None:
                await client.aclose()
        if len(raw) > _MAX_BODY:
            return response.status_code, None
        try:
            return response.status_code, json.loads(raw)
        except ValueError:
            return response.status_code, None

    def _issued(self, body: Any, caller: Caller | None, started: float) -> tuple[str, float]:
        token = body.get("access_token") if isinstance(body, dict) else None
        kind = str(body.get("token_type", "")) if isinstance(body, dict) else ""
        issued = body.get("issued_token_type", ACCESS_TOKEN_TYPE) if isinstance(body, dict) else None
        if not isinstance(token, str) or not token or kind.lower() != "bearer":
            raise self._misconfigured("did not answer with a bearer access token")
        if issued not in (ACCESS_TOKEN_TYPE, _JWT_TOKEN_TYPE):
            raise self._misconfigured(f"issued a {_quote(str(issued), 80)}, not an access token")
        if caller is not None and secrets.compare_digest(token.encode(), caller.token.encode()):
            # An IdP that hands the caller's own token back would make this passthrough.
            logger.warning("the IdP %s answered a token exchange with the caller's own token", self.issuer)
            raise self._misconfigured("answered with the caller's own token instead of a new one")
        lifetime = _DEFAULT_LIFETIME_S
        expires_in = body.get("expires_in")
        if isinstance(expires_in, int | float) and not isinstance(expires_in, bool) and expires_in > 0:
            lifetime = float(expires_in)
        else:
            own = Caller(tenant="", user="", token=token).token_expires_at
            if own is not None:
                lifetime = max(0.0, own - started)
        margin = min(self.refresh_margin_s, lifetime / 2)
        return token, started + lifetime - margin

    # -- errors ------------------------------------------------------------------------------------

    def _unavailable(self, what: str) -> ToolError:
        logger.warning("token exchange for %s: the IdP %s %s", self.upstream, self.issuer, what)
        return ToolError(
            ErrorCode.TEMPORARY_UNAVAILABLE,
            f"The identity provider that issues tokens for {self.upstream!r} {what}; try again later.",
            retryable=True,
            details={"upstream": self.upstream, "reason": "idp_unavailable"},
        )

    def _misconfigured(self, what: str) -> ToolError:
        logger.warning("token exchange for %s: the IdP %s %s", self.upstream, self.issuer, what)
        return ToolError(
            ErrorCode.INVALID_STATE,
            f"The identity provider that issues tokens for {self.upstream!r} {what}; the operator must "
            f"check [mcp.upstreams.{self.upstream}] and the IdP's token-exchange settings.",
            details={"upstream": self.upstream, "reason": "idp_misconfigured"},
        )

    def _refused(self, status: int, body: Any, caller: Caller | None) -> ToolError:
        error = body.get("error") if isinstance(body, dict) else None
        error = error if isinstance(error, str) and error.isascii() and len(error) <= 64 else None
        said = body.get("error_description") if isinstance(body, dict) else None
        said = self._redact(said, caller) if isinstance(said, str) else ""
        because = f" ({said})" if said else ""
        logger.info(
            "token exchange for %s refused by %s: HTTP %d %s%s",
            self.upstream,
            self.issuer,
            status,
            error,
            because,
        )
        details = {"upstream": self.upstream, "idp_error": error or f"HTTP {status}"}
        if error == "invalid_grant" and caller is not None:
            return ToolError(
                ErrorCode.AUTH_REQUIRED,
                f"The identity provider would not exchange the caller's token for one for {self.upstream!r} "
                f"(invalid_grant{because}): the caller's token is expired, revoked or not allowed to reach "
                "this server. Sign in again (get a new token), or ask the operator for access.",
                details={**details, "reason": "subject_token_refused"},
            )
        return ToolError(
            ErrorCode.INVALID_STATE,
            f"The identity provider refused the gateway's token exchange for {self.upstream!r} "
            f"({error or f'HTTP {status}'}{because}); the operator must check the client credentials, "
            f"audience/resource and scopes in [mcp.upstreams.{self.upstream}].",
            details={**details, "reason": "exchange_refused"},
        )

    def _redact(self, text: str, caller: Caller | None) -> str:
        """What the IdP said, short, on one line, with every credential of this exchange cut out."""
        for secret in (caller.token if caller else None, self._secret, self._key):
            if secret:
                text = text.replace(secret, "[redacted]")
        return _quote(text, _SHOWN)

    # -- the token endpoint and the client's assertion ---------------------------------------------

    async def _endpoint(self) -> str:
        if self.token_endpoint is not None:
            return self.token_endpoint
        async with self._discovery_lock:
            if self.token_endpoint is None:
                self.token_endpoint = await self._discover()
        return self.token_endpoint

    async def _discover(self) -> str:
        """The token endpoint from the issuer's metadata (RFC 8414, else OpenID Connect Discovery)."""
        for url in _metadata_urls(self.issuer):
            try:
                status, document = await self._get(url)
            except httpx2.TimeoutException:
                raise self._unavailable(f"gave no metadata within {self.timeout_s:g} s") from None
            except (httpx2.HTTPError, OSError) as exc:
                raise self._unavailable(
                    f"could not be reached for its metadata ({type(exc).__name__})"
                ) from None
            if status >= 500:
                raise self._unavailable(f"answered HTTP {status} for its metadata")
            if status != 200 or not isinstance(document, dict):
                continue
            if str(document.get("issuer", "")).rstrip("/") != self.issuer.rstrip("/"):
                raise self._misconfigured(f"publishes metadata for another issuer at {url}")
            endpoint = document.get("token_endpoint")
            if not isinstance(endpoint, str):
                raise self._misconfigured("names no token_endpoint in its metadata")
            grants = document.get("grant_types_supported")
            if isinstance(grants, list) and TOKEN_EXCHANGE_GRANT not in grants:
                raise self._misconfigured("does not list token exchange among its grant types")
            try:
                _check_url(endpoint, "token_endpoint")
            except UserError:
                raise self._misconfigured("names a token_endpoint that is not https") from None
            return endpoint
        raise self._misconfigured("publishes no authorization server metadata")

    async def _get(self, url: str) -> tuple[int, Any]:
        return await self._send("GET", url, headers={"Accept": "application/json"})

    def _assertion(self) -> str:
        """A `private_key_jwt` client assertion (RFC 7523): the gateway's client, for this issuer."""
        now = int(time.time())
        claims = {
            "iss": self.client_id,
            "sub": self.client_id,
            "aud": self.issuer,
            "iat": now,
            "exp": now + 60,
            "jti": secrets.token_urlsafe(16),
        }
        assert self._key is not None and self._algorithm is not None
        return jwt.encode(claims, self._key, algorithm=self._algorithm)


def _metadata_urls(issuer: str) -> list[str]:
    """RFC 8414 §3.1 (path after the well-known part), then OpenID Connect's two spellings."""
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


def _check_url(url: str, what: str) -> None:
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and parts.hostname in _LOOPBACK:
        return
    raise UserError(f"{what} {url!r}: use https:// (plain http:// only on a loopback address)")


def _signing_algorithm(pem: str) -> str:
    from .upstream_auth import _signing_algorithm as algorithm

    return algorithm(pem)


def _quote(text: str, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
