"""Who is calling: bearer tokens become a `Principal`, never the model's say-so.

The MCP server takes the principal for the gate from the authenticated request. Verification is
pluggable (`BearerVerifier`: token in, `Principal` or None out); the built-in `JWTVerifier` uses
pyjwt with the checks the MCP authorization spec and seed 003 require: signature, issuer,
audience (a token minted for another service is refused - the confused-deputy defence) and
expiry. The verifier plugs into the official SDK's bearer middleware through `SdkTokenVerifier`,
so the SDK's 401/403 + `WWW-Authenticate` answers and its request-state principal binding apply
unchanged; the principal rides in `AccessToken.claims` and is read back per request with
`principal_from_request()`.

Over stdio there is no token: the process inherits its caller's identity (seed 003 §11), so the
principal comes from configuration (`--user/--tenant/--scope` on `maitre serve`).

A shared HMAC key (HS256/384/512) shorter than its hash output - 32, 48, 64 bytes (RFC 7518 §3.2) -
is refused when the verifier is built: anyone holding one token could brute-force a short key
offline and then mint tokens for any user and tenant. So is an algorithm pyjwt does not know
(`RS999`) or `none`: a verifier that would start and then refuse every token is refused at start.

`JWKSKeys` takes the keys from the issuer's JWKS URL instead of a file: fetched with httpx, kept
for `ttl_s`, fetched again when a token names a `kid` the cached set lacks (key rotation) - but
not more often than every `min_refresh_s`, so tokens with made-up `kid`s cannot make the server
hammer the issuer. The response size and the number of keys are bounded; a failed fetch keeps
the keys already known (and is logged). Plain `http://` is accepted only for a loopback issuer.

Claims become a principal in one place, `principal_from_claims`, which the approval console's
OIDC sign-in uses too: a person signed in to the console is named, given a tenant and roles by
the same rule as the bearer of a token at the MCP door, so self-approval compares one identity.
The MCP SDK is imported only where it is used (`SdkTokenVerifier`, `principal_from_request`), so
the console can verify ID tokens with `JWTVerifier` without the `mcp` extra.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import httpx
import jwt

from ..config import check_jwt_algorithms
from ..exceptions import UserError
from ..types import Principal

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken

__all__ = [
    "BearerVerifier",
    "JWKSKeys",
    "JWTVerifier",
    "MissingClaim",
    "PRINCIPAL_CLAIM",
    "SdkTokenVerifier",
    "StaticTokens",
    "claim_list",
    "principal_from_claims",
    "principal_from_request",
]

logger = logging.getLogger(__name__)

_HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")

PRINCIPAL_CLAIM = "maitre/principal"
"""Key under `AccessToken.claims` where the verified principal travels through the SDK."""


class BearerVerifier(Protocol):
    """**Protocol:** turn a bearer token into a principal, or None when it is not acceptable."""

    async def verify(self, token: str) -> Principal | None: ...


class MissingClaim(ValueError):
    """A verified token lacks a claim the principal needs (the user's name or the tenant)."""

    def __init__(self, claims: Sequence[str]) -> None:
        names = " or ".join(repr(c) for c in claims)
        super().__init__(f"the token has no {names} claim")
        self.claims = tuple(claims)
        """The claims looked for, in order."""


def claim_list(value: Any) -> list[str]:
    """A claim holding several names: a JSON list, or one space-separated string (as `scope` is)."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list | tuple):
        return [str(item) for item in value if isinstance(item, str | int) and not isinstance(item, bool)]
    return []


def principal_from_claims(
    claims: Mapping[str, Any],
    *,
    user_claims: Sequence[str] = ("sub",),
    tenant_claim: str = "tenant",
    roles_claim: str = "roles",
    default_tenant: str | None = None,
) -> Principal:
    """The principal a verified token names; raises `MissingClaim` without a user or a tenant.

    The user is the first of `user_claims` that holds a non-empty string (the MCP door: `sub`);
    the tenant is `tenant_claim` (else `default_tenant`); roles are `roles_claim` and scopes are
    `scope` (space separated) and `scp` (a list or a string), see `claim_list`.
    """
    user = next((v for c in user_claims if isinstance(v := claims.get(c), str) and v.strip()), None)
    if user is None:
        raise MissingClaim(user_claims)
    tenant = claims.get(tenant_claim, default_tenant)
    if not isinstance(tenant, str) or not tenant.strip():
        raise MissingClaim((tenant_claim,))
    return Principal(
        user=user,
        tenant=tenant,
        scopes=frozenset(_scopes(claims)),
        roles=frozenset(claim_list(claims.get(roles_claim))),
    )


@dataclass(kw_only=True)
class JWTVerifier:
    """Verify JWT access tokens with pyjwt: signature, `iss`, `aud`, `exp` (required), `nbf`.

    Claims map to the principal with `principal_from_claims`: `sub` → user, `tenant_claim` →
    tenant (default `tenant`), `scope` (space separated) or `scp` (list) → scopes, `roles_claim`
    (a list or a space-separated string) → roles.
    """

    key: Any
    """The HMAC secret, the issuer's public key (PEM text or a key object), `JWKSKeys` (the
    issuer's JWKS URL), or a `jwt.PyJWKClient`."""
    issuer: str
    """Expected `iss`."""
    audience: str | Sequence[str]
    """This server's identifier; tokens for any other audience are refused."""
    algorithms: Sequence[str] = ("RS256", "ES256", "EdDSA")
    """Accepted algorithms. Never includes `none`; list HS256 explicitly for shared-secret setups."""
    leeway_s: float = 30.0
    """Clock skew tolerated on `exp`/`nbf`/`iat`."""
    tenant_claim: str = "tenant"
    default_tenant: str | None = None
    """Tenant when the token has no tenant claim; None refuses such tokens."""
    roles_claim: str = "roles"
    """The claim that holds the caller's roles."""

    def __post_init__(self) -> None:
        try:
            check_jwt_algorithms(list(self.algorithms))
        except ValueError as exc:
            raise UserError(str(exc)) from None
        hmac_bits = [int(a[2:]) for a in self.algorithms if a in _HMAC_ALGORITHMS]
        if not hmac_bits or not isinstance(self.key, str | bytes | bytearray):
            return
        needed = max(hmac_bits) // 8
        size = len(self.key.encode() if isinstance(self.key, str) else self.key)
        if size < needed:
            raise UserError(
                f"the JWT HMAC key must be at least {needed} bytes for HS{max(hmac_bits)}, got {size};"
                " use a longer random secret or an asymmetric algorithm (RS256, ES256, EdDSA)"
            )

    async def decode(self, token: str) -> dict[str, Any]:
        """The token's claims once its signature, `iss`, `aud`, `exp` and `nbf` are checked.

        Raises pyjwt's own error for a refused token (`jwt.InvalidAudienceError`,
        `jwt.ExpiredSignatureError`, `jwt.InvalidSignatureError`, ...; an algorithm this verifier
        does not accept is `jwt.InvalidAlgorithmError`, a `kid` the issuer's JWKS lacks is
        `jwt.InvalidKeyError`), so a caller can say why.
        """
        key = self.key
        if isinstance(key, JWKSKeys):
            header = jwt.get_unverified_header(token)
            alg = header.get("alg")
            if not isinstance(alg, str) or alg not in self.algorithms:
                raise jwt.InvalidAlgorithmError(f"algorithm {alg!r} not accepted")
            kid = header.get("kid")
            key = await key.key(kid if isinstance(kid, str) else None, alg)
            if key is None:
                raise jwt.InvalidKeyError(f"no key {kid!r} in the issuer's JWKS")
        elif isinstance(key, jwt.PyJWKClient):
            key = (await anyio.to_thread.run_sync(key.get_signing_key_from_jwt, token)).key
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=list(self.algorithms),
            audience=self.audience,
            issuer=self.issuer,
            leeway=self.leeway_s,
            options={"require": ["exp", "iss", "aud", "sub"]},
        )
        return claims

    async def verify(self, token: str) -> Principal | None:
        try:
            claims = await self.decode(token)
            return principal_from_claims(
                claims,
                tenant_claim=self.tenant_claim,
                roles_claim=self.roles_claim,
                default_tenant=self.default_tenant,
            )
        except jwt.PyJWTError as exc:
            logger.info("bearer token refused: %s (%s)", type(exc).__name__, exc)
            return None
        except MissingClaim as exc:
            logger.info("bearer token refused: %s", exc)
            return None


_LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(kw_only=True)
class JWKSKeys:
    """The issuer's signing keys, read from its JWKS URL and cached (see the module docstring)."""

    url: str
    """The JSON Web Key Set, e.g. `https://id.example.com/.well-known/jwks.json`."""
    ttl_s: float = 300.0
    """How long a fetched set is used before it is fetched again."""
    min_refresh_s: float = 30.0
    """The shortest time between two fetches, whatever the tokens say (an unknown `kid` waits)."""
    timeout_s: float = 5.0
    """Timeout of one fetch."""
    max_bytes: int = 512 * 1024
    """The largest key set accepted."""
    max_keys: int = 64
    """The most keys kept from one set."""
    client: httpx.AsyncClient | None = None
    """The HTTP client to fetch with (default: one of its own)."""
    fetches: int = field(default=0, init=False)
    """How many times the set was fetched (for operators and tests)."""
    _keys: dict[str, tuple[Any, str | None]] = field(default_factory=dict, init=False, repr=False)
    """kid → (key, the algorithm the set declares for it)."""
    _unnamed: list[tuple[Any, str | None]] = field(default_factory=list, init=False, repr=False)
    _fetched_at: float | None = field(default=None, init=False, repr=False)
    _attempted_at: float | None = field(default=None, init=False, repr=False)
    _lock: anyio.Lock = field(default_factory=anyio.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme == "https" and parts.hostname:
            return
        if parts.scheme == "http" and parts.hostname in _LOOPBACK:
            return
        raise UserError(
            f"JWKS URL {self.url!r}: use https:// (plain http:// only for a loopback issuer in development)"
        )

    async def key(self, kid: str | None, alg: str) -> Any | None:
        """The key for a token's `kid` and `alg`, fetching the set when stale or when `kid` is new."""
        if self._fetched_at is None or time.monotonic() - self._fetched_at > self.ttl_s:
            await self._refresh()
        found = self._find(kid, alg)
        if found is None:
            await self._refresh()  # a rotated key: look again, unless the set was read a moment ago
            found = self._find(kid, alg)
        return found

    def _find(self, kid: str | None, alg: str) -> Any | None:
        if kid is not None:
            entry = self._keys.get(kid)
        else:
            candidates = [*self._keys.values(), *self._unnamed]
            entry = candidates[0] if len(candidates) == 1 else None
        if entry is None:
            return None
        key, declared = entry
        return key if declared is None or declared == alg else None

    async def _refresh(self) -> None:
        async with self._lock:
            now = time.monotonic()
            if self._attempted_at is not None and now - self._attempted_at < self.min_refresh_s:
                return  # read (or tried) a moment ago, perhaps by a concurrent caller
            self._attempted_at = now
            try:
                document = await self._fetch()
            except (httpx.HTTPError, ValueError) as exc:
                logger.warning(
                    "JWKS %s could not be read (%s); keeping the keys already known", self.url, exc
                )
                return
            if self._load(document):
                self._fetched_at = time.monotonic()

    async def _fetch(self) -> Any:
        client = self.client or httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False)
        self.fetches += 1
        try:
            async with client.stream("GET", self.url, headers={"Accept": "application/json"}) as response:
                if response.status_code != 200:
                    raise ValueError(f"HTTP {response.status_code}")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > self.max_bytes:
                        raise ValueError(f"larger than {self.max_bytes} bytes")
        finally:
            if self.client is None:
                await client.aclose()
        return json.loads(bytes(body))

    def _load(self, document: Any) -> bool:
        entries = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(entries, list):
            logger.warning("JWKS %s has no 'keys' list; keeping the keys already known", self.url)
            return False
        keys: dict[str, tuple[Any, str | None]] = {}
        unnamed: list[tuple[Any, str | None]] = []
        for entry in entries[: self.max_keys]:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(entry).key
            except (jwt.PyJWTError, ValueError, TypeError, KeyError):
                continue  # a key type or curve this server cannot use
            declared = entry.get("alg") if isinstance(entry.get("alg"), str) else None
            kid = entry.get("kid")
            if isinstance(kid, str):
                keys[kid] = (key, declared)
            else:
                unnamed.append((key, declared))
        self._keys, self._unnamed = keys, unnamed
        return True


def _scopes(claims: Mapping[str, Any]) -> Iterable[str]:
    scope = claims.get("scope")
    if isinstance(scope, str):
        yield from scope.split()
    scp = claims.get("scp")
    if isinstance(scp, list):
        yield from (str(s) for s in scp)
    elif isinstance(scp, str):
        yield from scp.split()


@dataclass(kw_only=True)
class StaticTokens:
    """A fixed token → principal table, for tests, demos and service accounts."""

    tokens: Mapping[str, Principal] = field(default_factory=dict)

    async def verify(self, token: str) -> Principal | None:
        return self.tokens.get(token)


class SdkTokenVerifier:
    """Adapts a `BearerVerifier` to the SDK's `TokenVerifier` (a protocol), carrying the principal in
    the claims."""

    def __init__(
        self, verifier: BearerVerifier, *, client_id: Callable[[Principal], str] | None = None
    ) -> None:
        self.verifier = verifier
        self._client_id = client_id or (lambda p: f"{p.tenant}/{p.user}")

    async def verify_token(self, token: str) -> AccessToken | None:
        from mcp.server.auth.provider import AccessToken

        principal = await self.verifier.verify(token)
        if principal is None:
            return None
        return AccessToken(
            token=token,
            client_id=self._client_id(principal),
            scopes=sorted(principal.scopes),
            subject=principal.user,
            claims={PRINCIPAL_CLAIM: principal.to_dict(), "iss": f"maitre:{principal.tenant}"},
        )


def principal_from_request() -> Principal | None:
    """The principal of the HTTP request being served (None when it was not authenticated)."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    if token is None or not token.claims or PRINCIPAL_CLAIM not in token.claims:
        return None
    return Principal.from_dict(token.claims[PRINCIPAL_CLAIM])
