"""Sign-in with OpenID Connect: the authorization code flow with PKCE (S256), `state` and `nonce`.

1. `GET /sign-in/oidc` makes a fresh `state`, `nonce` and PKCE `code_verifier` (authlib's
   `generate_token`), keeps them in a signed cookie for ten minutes, and answers 303 to the
   issuer's `authorization_endpoint` with the S256 `code_challenge` (authlib's
   `AsyncOAuth2Client.create_authorization_url`).
2. The issuer sends the browser back to `GET /sign-in/oidc/callback?code=...&state=...`. The
   `state` must be the cookie's (else the answer belongs to a sign-in this browser did not start),
   the code is exchanged at the `token_endpoint` with the verifier (`fetch_token`; the issuer
   checks it against the challenge, so a stolen code is useless without it), and the ID token is
   verified with the MCP door's own `JWTVerifier` against the issuer's JWKS: signature, `iss`,
   `aud` (= the client id), `exp`, and here `nonce` (= the cookie's) and `azp`.
3. Its claims become the person by `principal_from_claims`, the same rule `maitre serve` applies
   to bearer tokens: the name claim (default `sub`, as the MCP door names a bearer, so
   self-approval compares one identity across doors), the tenant claim (a token without one cannot
   sign in) and the roles claim. The console session then holds that name, tenant and roles.

The endpoints come from `{issuer}/.well-known/openid-configuration` (`discover`); `maitre
console` reads it at start, so a wrong issuer is found then, not at the first sign-in. There is
no way to sign in by handing the console a token: the only ID token it accepts is the one it
fetched itself from the token endpoint, with its own code and verifier.

Every refusal (a wrong `state`, an error from the issuer, a refused code, a token that does not
verify, a missing tenant) is the sign-in page saying why, with 400 (the request is wrong), 401
(the issuer did not vouch for this person) or 503 (the issuer could not be reached); never a 500.
"""

from __future__ import annotations

import hmac
import importlib
import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import httpx

from ..exceptions import UserError
from .security import FLOW_MAX_AGE_S
from .signin import SignInOptions, set_session, sign_in_page
from .web import storable

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from ..config.schema import ConsoleConfig
    from ..mcp.auth import JWTVerifier
    from .web import Console

__all__ = [
    "FLOW_COOKIE",
    "FLOW_PATH",
    "OIDCError",
    "OIDCSettings",
    "ProviderMetadata",
    "discover",
    "routes",
]

logger = logging.getLogger(__name__)

FLOW_COOKIE = "maitre_console_oidc"
"""The cookie that keeps one sign-in's state, nonce and PKCE verifier between the two routes."""
FLOW_PATH = "/sign-in/oidc"
"""The flow cookie's path: sent to the start and callback routes only."""
_MAX_DOCUMENT_BYTES = 256 * 1024
_LOOPBACK = ("127.0.0.1", "::1", "localhost")


class OIDCError(UserError):
    """The identity provider is misconfigured or unreachable (its discovery document cannot be used)."""


@dataclass(frozen=True, kw_only=True)
class ProviderMetadata:
    """What the console uses of the issuer's discovery document."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str


@dataclass(frozen=True, kw_only=True)
class OIDCSettings:
    """How the console signs people in with an OpenID Provider."""

    issuer: str
    """The issuer URL, exactly as its tokens' `iss` says it."""
    client_id: str
    """The console's client at the issuer; the ID token's audience."""
    client_secret: str | None = field(default=None, repr=False)
    """For a confidential client (sent with HTTP Basic); None: a public client, PKCE alone."""
    redirect_uri: str | None = None
    """The callback URL registered at the issuer. None: derived from each request's own URL
    (`{scheme}://{host}/sign-in/oidc/callback`), right only when no proxy in front rewrites them."""
    name_claim: str = "sub"
    """The claim that names the person on decisions; `sub` when the token lacks it."""
    tenant_claim: str = "tenant"
    roles_claim: str = "roles"
    scope: str = "openid profile"
    algorithms: tuple[str, ...] = ("RS256", "ES256", "EdDSA")
    """ID token signature algorithms accepted (never `none`, never a shared secret)."""
    timeout_s: float = 10.0
    """Timeout of one request to the issuer (discovery, token, JWKS)."""
    provider: ProviderMetadata | None = None
    """The discovery document's endpoints when already read (`discovered()`); None: read at the
    first sign-in."""

    @property
    def label(self) -> str:
        """The issuer's host (and port), for the sign-in button."""
        return urlsplit(self.issuer).netloc or self.issuer

    @classmethod
    def from_config(cls, config: ConsoleConfig) -> OIDCSettings | None:
        """The settings the `[console]` section describes; None when it names no issuer."""
        if not config.oidc_issuer or not config.oidc_client_id:
            return None
        return cls(
            issuer=config.oidc_issuer,
            client_id=config.oidc_client_id,
            client_secret=config.oidc_client_secret,
            redirect_uri=config.oidc_redirect_uri,
            name_claim=config.name_claim,
            tenant_claim=config.tenant_claim,
            roles_claim=config.roles_claim,
        )

    async def discovered(self) -> OIDCSettings:
        """These settings with the issuer's endpoints read now (`discover`); raises `OIDCError`."""
        return replace(self, provider=await discover(self))


def _usable(url: Any) -> bool:
    if not isinstance(url, str):
        return False
    parts = urlsplit(url)
    return bool(parts.hostname) and (
        parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in _LOOPBACK)
    )


async def discover(settings: OIDCSettings, *, client: httpx.AsyncClient | None = None) -> ProviderMetadata:
    """The issuer's endpoints from `{issuer}/.well-known/openid-configuration`.

    Raises `OIDCError` (one line) when it cannot be read, is not JSON, names another issuer (OIDC
    Discovery 4.3), lacks an endpoint, or points at plain http:// off this machine.
    """
    url = settings.issuer.rstrip("/") + "/.well-known/openid-configuration"
    if not _usable(url):
        raise OIDCError(f"OIDC issuer {settings.issuer!r}: use https:// (plain http:// only on loopback)")
    http = client or httpx.AsyncClient(timeout=settings.timeout_s, follow_redirects=False)
    try:
        response = await http.get(url, headers={"Accept": "application/json"})
        if response.status_code != 200:
            raise OIDCError(f"OIDC discovery {url}: HTTP {response.status_code}")
        if len(response.content) > _MAX_DOCUMENT_BYTES:
            raise OIDCError(f"OIDC discovery {url}: larger than {_MAX_DOCUMENT_BYTES} bytes")
        document = response.json()
    except httpx.HTTPError as exc:
        raise OIDCError(f"OIDC discovery {url}: cannot reach the issuer ({type(exc).__name__})") from None
    except ValueError:
        raise OIDCError(f"OIDC discovery {url}: not a JSON document") from None
    finally:
        if client is None:
            await http.aclose()
    if not isinstance(document, dict):
        raise OIDCError(f"OIDC discovery {url}: not a JSON object")
    if document.get("issuer") != settings.issuer:
        raise OIDCError(
            f"OIDC discovery {url}: the document names issuer {document.get('issuer')!r}, "
            f"not {settings.issuer!r}"
        )
    names = ("authorization_endpoint", "token_endpoint", "jwks_uri")
    for name in names:
        if not _usable(document.get(name)):
            raise OIDCError(f"OIDC discovery {url}: {name} is missing or not an https:// URL")
    methods = document.get("code_challenge_methods_supported")
    if isinstance(methods, list) and "S256" not in methods:
        raise OIDCError(f"OIDC discovery {url}: the issuer does not support PKCE with S256")
    return ProviderMetadata(issuer=settings.issuer, **{name: str(document[name]) for name in names})


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The errors of the HTTP client authlib's httpx integration runs on (httpx2, else httpx)."""
    errors: list[type[BaseException]] = [httpx.HTTPError, OSError]
    try:
        errors.append(importlib.import_module("httpx2").HTTPError)
    except ImportError:
        pass
    return tuple(errors)


_TOKEN_REFUSALS = {
    "ExpiredSignatureError": "it has expired",
    "InvalidAudienceError": "it was issued for another client (audience)",
    "InvalidIssuerError": "another issuer issued it",
    "InvalidSignatureError": "its signature does not verify with the issuer's keys",
    "InvalidKeyError": "it names a key the issuer does not publish",
    "InvalidAlgorithmError": "its signature algorithm is not accepted",
    "ImmatureSignatureError": "it is not valid yet",
    "MissingRequiredClaimError": "it lacks a required claim",
    "DecodeError": "it is not a readable JWT",
}


class _Refusal(Exception):
    """A sign-in that ends on the sign-in page with `message` and `status`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _SignIn:
    """The two routes' shared state: the settings, the issuer's endpoints and its ID token verifier."""

    def __init__(self, console: Console, settings: OIDCSettings, options: SignInOptions) -> None:
        self.console = console
        self.settings = settings
        self.options = options
        self._provider = settings.provider
        self._verifier: JWTVerifier | None = None
        self._lock = anyio.Lock()

    async def provider(self) -> tuple[ProviderMetadata, JWTVerifier]:
        async with self._lock:
            if self._provider is None:
                try:
                    self._provider = await discover(self.settings)
                except OIDCError as exc:
                    logger.warning("OIDC sign-in unavailable: %s", exc)
                    raise _Refusal(503, "The identity provider cannot be reached; try again later.") from None
            if self._verifier is None:
                from ..mcp.auth import JWKSKeys, JWTVerifier

                self._verifier = JWTVerifier(
                    key=JWKSKeys(url=self._provider.jwks_uri, timeout_s=self.settings.timeout_s),
                    issuer=self.settings.issuer,
                    audience=self.settings.client_id,
                    algorithms=self.settings.algorithms,
                    tenant_claim=self.settings.tenant_claim,
                    roles_claim=self.settings.roles_claim,
                )
            return self._provider, self._verifier

    def redirect_uri(self, request: Request) -> str:
        return self.settings.redirect_uri or str(request.url_for("oidc_callback"))

    def client(self, request: Request) -> Any:
        from authlib.integrations.httpx_client import (
            AsyncOAuth2Client,
        )

        return AsyncOAuth2Client(
            client_id=self.settings.client_id,
            client_secret=self.settings.client_secret,
            scope=self.settings.scope,
            redirect_uri=self.redirect_uri(request),
            code_challenge_method="S256",
            timeout=self.settings.timeout_s,
            follow_redirects=False,
        )

    def refuse(self, request: Request, refusal: _Refusal) -> Response:
        response = sign_in_page(
            self.console, request, self.options, error=refusal.message, status=refusal.status
        )
        response.delete_cookie(FLOW_COOKIE, path=FLOW_PATH)
        return response

    async def start(self, request: Request) -> Response:
        """Redirect to the issuer with a fresh state, nonce and S256 challenge; remember them.

        The flow cookie is `SameSite=Lax`, unlike the session's `Strict`: the issuer sends the
        browser back with a cross-site top-level GET, on which a browser withholds a `Strict`
        cookie but sends a `Lax` one, and without it the `state` could not be checked. It is
        signed (so the verifier and nonce cannot be planted), `HttpOnly`, limited to the
        `/sign-in/oidc` paths, and lives `FLOW_MAX_AGE_S` seconds.
        """
        from authlib.common.security import generate_token
        from starlette.responses import RedirectResponse

        try:
            provider, _ = await self.provider()
        except _Refusal as refusal:
            return self.refuse(request, refusal)
        state, nonce, verifier = generate_token(32), generate_token(32), generate_token(64)
        async with self.client(request) as client:
            url, _ = client.create_authorization_url(
                provider.authorization_endpoint, state=state, code_verifier=verifier, nonce=nonce
            )
        response = RedirectResponse(str(url), status_code=303)
        response.set_cookie(
            FLOW_COOKIE,
            self.console.signer.new_flow({"state": state, "nonce": nonce, "verifier": verifier}),
            max_age=FLOW_MAX_AGE_S,
            path=FLOW_PATH,
            httponly=True,
            samesite="lax",
            secure=self.console.secure(request),
        )
        return response

    async def callback(self, request: Request) -> Response:
        """Check the answer, exchange the code, verify the ID token, start the session.

        Success answers with a page that moves on to the inbox (a `meta` refresh and a link)
        rather than a redirect: the request that follows a redirect is still part of the issuer's
        cross-site navigation, so the browser would not send the new `SameSite=Strict` session
        cookie with it and the person would land on the sign-in page again.
        """
        try:
            person = await self._person(request)
        except _Refusal as refusal:
            logger.info("OIDC sign-in refused (%d): %s", refusal.status, refusal.message)
            return self.refuse(request, refusal)
        user, tenant, roles = person
        _, cookie = self.console.signer.new_session(
            user, source="oidc", tenant=tenant, roles=roles, issuer=self.settings.issuer
        )
        response = self.console.render(
            request,
            "signin.html",
            200,
            account=None,
            continue_to="/",
            signed_in_as=user,
            signed_in_tenant=tenant,
        )
        response.delete_cookie(FLOW_COOKIE, path=FLOW_PATH)
        return set_session(self.console, request, response, cookie)

    async def _person(self, request: Request) -> tuple[str, str, frozenset[str]]:
        from ..mcp.auth import MissingClaim, principal_from_claims

        params = request.query_params
        flow = self.console.signer.read_flow(request.cookies.get(FLOW_COOKIE))
        if "error" in params:
            error = params.get("error", "")[:100]
            described = params.get("error_description", "")[:200]
            said = f"{error}: {described}" if described else error
            raise _Refusal(401, f"The identity provider did not sign you in ({said}).")
        if flow is None:
            raise _Refusal(
                400,
                "This sign-in was not started in this browser, or took longer than "
                f"{FLOW_MAX_AGE_S // 60} minutes; please start again.",
            )
        if not hmac.compare_digest(flow.get("state", "").encode(), params.get("state", "").encode()):
            raise _Refusal(
                400,
                "The identity provider's answer belongs to another sign-in (the state does not match); "
                "please start again.",
            )
        if "iss" in params and params["iss"] != self.settings.issuer:  # RFC 9207: a mix-up
            raise _Refusal(400, "The answer came from another identity provider; please start again.")
        code = params.get("code")
        if not code:
            raise _Refusal(
                400, "The identity provider's answer has no authorization code; please start again."
            )
        provider, verifier = await self.provider()
        id_token = await self._exchange(request, provider, code, flow.get("verifier", ""))
        import jwt

        try:
            claims = await verifier.decode(id_token)
        except jwt.PyJWTError as exc:
            why = _TOKEN_REFUSALS.get(type(exc).__name__, "it is not valid")
            raise _Refusal(401, f"The identity provider's ID token was refused: {why}.") from None
        nonce = claims.get("nonce")
        if not isinstance(nonce, str) or not hmac.compare_digest(
            nonce.encode(), flow.get("nonce", "").encode()
        ):
            raise _Refusal(
                401, "The identity provider's ID token was refused: it answers another sign-in (nonce)."
            )
        audiences = claims.get("aud")
        azp = claims.get("azp")
        if (
            (isinstance(audiences, list) and len(audiences) > 1) or azp is not None
        ) and azp != self.settings.client_id:
            raise _Refusal(
                401, "The identity provider's ID token was refused: it was issued to another client."
            )
        try:
            principal = principal_from_claims(
                claims,
                user_claims=(self.settings.name_claim, "sub"),
                tenant_claim=self.settings.tenant_claim,
                roles_claim=self.settings.roles_claim,
            )
        except MissingClaim as exc:
            raise _Refusal(
                401,
                f"The identity provider's ID token has no {' or '.join(repr(c) for c in exc.claims)} claim, "
                "so the console cannot tell whose requests are yours; ask its administrator to add it.",
            ) from None
        if not all(storable(text) for text in (principal.user, principal.tenant, *principal.roles)):
            raise _Refusal(  # the name would be written with each decision, and no store holds it
                401,
                "The identity provider's ID token names you with a NUL byte (or a lone surrogate), "
                "which the console cannot record; ask its administrator to fix the claim.",
            )
        return principal.user, principal.tenant, principal.roles

    async def _exchange(self, request: Request, provider: ProviderMetadata, code: str, verifier: str) -> str:
        from authlib.common.errors import AuthlibBaseError

        try:
            async with self.client(request) as client:
                token = await client.fetch_token(
                    provider.token_endpoint,
                    grant_type="authorization_code",
                    code=code,
                    code_verifier=verifier,
                )
        except AuthlibBaseError as exc:
            error = str(getattr(exc, "error", "") or "refused")[:100]
            raise _Refusal(
                401,
                f"The identity provider refused the authorization code ({error}); it may have been used "
                "already. Please start again.",
            ) from None
        except ValueError:
            raise _Refusal(
                401, "The identity provider's token answer is not readable; please start again."
            ) from None
        except _transport_errors() as exc:
            logger.warning("OIDC token endpoint %s: %s", provider.token_endpoint, type(exc).__name__)
            raise _Refusal(503, "The identity provider cannot be reached; try again later.") from None
        id_token = token.get("id_token") if isinstance(token, dict) else None
        if not isinstance(id_token, str) or not id_token:
            raise _Refusal(
                401, "The identity provider answered without an ID token (is the 'openid' scope allowed?)."
            )
        return id_token


def routes(console: Console, settings: OIDCSettings, options: SignInOptions) -> list[Any]:
    """`/sign-in/oidc` (start) and `/sign-in/oidc/callback`, rendering refusals on the sign-in page."""
    from starlette.routing import Route

    sign_in = _SignIn(console, settings, options)
    return [
        Route(FLOW_PATH, sign_in.start, methods=["GET"], name="oidc_start"),
        Route(f"{FLOW_PATH}/callback", sign_in.callback, methods=["GET"], name="oidc_callback"),
    ]
