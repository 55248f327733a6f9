"""What keeps the console's own page safe: signed sessions, CSRF tokens, sign-in throttling, headers.

- The session is a cookie signed with the console's secret (itsdangerous, with an age limit):
  `HttpOnly`, `SameSite=Strict`, `Secure` when the request came over https. It holds who signed
  in and how (`local`: an account name, looked up again on every request, so deleting the account
  ends the session; `oidc`: the name, tenant and roles of the verified ID token and its issuer,
  trusted until the session's age limit) and a random CSRF token bound to that session; no
  password, hash, token or approval digest. A session of a source the console no longer accepts
  (local accounts turned off, another issuer) is no session.
- Before sign-in there is no session, so the sign-in form uses a signed double-submit cookie, and
  the OIDC flow a signed, short-lived cookie of its own (`SessionSigner.new_flow`).
- Sign-in attempts are throttled per (account, client address): `SignInThrottle` counts failures
  in this process; `StoreSignInThrottle` counts attempts in the stores' rate limiter, so console
  replicas over one database share the count. Past the limit the form answers 429 until the
  window passes, whatever the password.
- Every response carries a strict Content-Security-Policy (no inline script, no framing), and no
  referrer is sent, so an approval id in a URL does not leave the page.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..stores import RateLimiter

__all__ = [
    "FLOW_MAX_AGE_S",
    "SECURITY_HEADERS",
    "Session",
    "SessionSigner",
    "SignInThrottle",
    "StoreSignInThrottle",
    "tokens_match",
]

FLOW_MAX_AGE_S = 600
"""How long an OIDC sign-in may take, from the redirect to the identity provider to the callback."""

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
"""Headers set on every console response."""


@dataclass(frozen=True)
class Session:
    """A signed-in person: who, how they signed in, and the CSRF token bound to this session."""

    account: str
    """The name decisions are recorded with: a local account's name, or the ID token's name claim."""
    csrf: str
    source: Literal["local", "oidc"] = "local"
    """How the person signed in: a local account (password) or the configured OIDC issuer."""
    tenant: str | None = None
    """For `oidc`: the tenant claim of the verified ID token (a local account's is in its table)."""
    roles: frozenset[str] = field(default_factory=frozenset)
    """For `oidc`: the roles claim of the verified ID token."""
    issuer: str | None = None
    """For `oidc`: the issuer that signed the ID token."""


class SessionSigner:
    """Signs and reads the session, sign-in form and OIDC flow cookies with the console secret.

    `local` and `issuers` say which sessions are accepted when read back: with local accounts
    turned off a local session is none, and an OIDC session counts only for an issuer still
    configured.
    """

    def __init__(
        self,
        secret: str,
        *,
        max_age_s: int = 8 * 3600,
        local: bool = True,
        issuers: Iterable[str] = (),
    ) -> None:
        from itsdangerous import URLSafeTimedSerializer

        if len(secret) < 16:
            raise ValueError("the console secret must be at least 16 characters")
        self._session = URLSafeTimedSerializer(secret, salt="maitre.console.session")
        self._form = URLSafeTimedSerializer(secret, salt="maitre.console.signin")
        self._flow = URLSafeTimedSerializer(secret, salt="maitre.console.oidc-flow")
        self.max_age_s = max_age_s
        self.local = local
        self.issuers = frozenset(issuers)

    def new_session(
        self,
        account: str,
        *,
        source: Literal["local", "oidc"] = "local",
        tenant: str | None = None,
        roles: Iterable[str] = (),
        issuer: str | None = None,
    ) -> tuple[Session, str]:
        """A fresh session (new CSRF token) and its signed cookie value."""
        if source == "oidc" and (not tenant or not issuer):
            raise ValueError("an OIDC session needs the token's tenant and issuer")
        session = Session(
            account=account,
            csrf=secrets.token_urlsafe(24),
            source=source,
            tenant=tenant if source == "oidc" else None,
            roles=frozenset(roles) if source == "oidc" else frozenset(),
            issuer=issuer if source == "oidc" else None,
        )
        data: dict[str, Any] = {"a": session.account, "c": session.csrf}
        if source == "oidc":
            data |= {"s": "oidc", "t": session.tenant, "r": sorted(session.roles), "i": session.issuer}
        return session, str(self._session.dumps(data))

    def read_session(self, cookie: str | None) -> Session | None:
        data = self._loads(self._session, cookie, self.max_age_s)
        if not isinstance(data, dict):
            return None
        account, csrf, source = data.get("a"), data.get("c"), data.get("s", "local")
        if not isinstance(account, str) or not isinstance(csrf, str):
            return None
        if source == "local":
            return Session(account=account, csrf=csrf) if self.local else None
        tenant, roles, issuer = data.get("t"), data.get("r"), data.get("i")
        if source != "oidc" or not isinstance(tenant, str) or not isinstance(issuer, str):
            return None
        if issuer not in self.issuers or not isinstance(roles, list):
            return None
        return Session(
            account=account,
            csrf=csrf,
            source="oidc",
            tenant=tenant,
            roles=frozenset(str(r) for r in roles),
            issuer=issuer,
        )

    def new_flow(self, flow: Mapping[str, str]) -> str:
        """The signed cookie value that keeps an OIDC sign-in's state, nonce and PKCE verifier."""
        return str(self._flow.dumps(dict(flow)))

    def read_flow(self, cookie: str | None) -> dict[str, str] | None:
        """The flow `new_flow` signed, if it is ours and younger than `FLOW_MAX_AGE_S`."""
        data = self._loads(self._flow, cookie, FLOW_MAX_AGE_S)
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            return None
        return {str(k): v for k, v in data.items()}

    def new_form_token(self) -> tuple[str, str]:
        """(the token for the form field, the signed cookie that must come back with it)."""
        token = secrets.token_urlsafe(24)
        return token, str(self._form.dumps(token))

    def form_token_ok(self, cookie: str | None, submitted: str | None) -> bool:
        expected = self._loads(self._form, cookie, 3600)
        return isinstance(expected, str) and tokens_match(expected, submitted)

    @staticmethod
    def _loads(serializer: Any, cookie: str | None, max_age: int) -> Any:
        from itsdangerous import BadSignature

        if not cookie:
            return None
        try:
            return serializer.loads(cookie, max_age=max_age)
        except BadSignature:  # includes SignatureExpired
            return None


def tokens_match(expected: str, submitted: str | None) -> bool:
    """Constant-time comparison of a CSRF token; a missing one never matches."""
    return bool(submitted) and hmac.compare_digest(expected.encode(), (submitted or "").encode())


class SignInThrottle:
    """At most `limit` failed sign-ins per (account, client) within `window_s`, kept in memory.

    At most `max_keys` pairs are remembered: past that the oldest pair is forgotten, so a spray
    of made-up names cannot grow the process without bound (it only shortens their memory).
    """

    def __init__(self, *, limit: int = 5, window_s: float = 300.0, max_keys: int = 10_000) -> None:
        self.limit = limit
        self.window_s = window_s
        self.max_keys = max_keys
        self._failures: dict[tuple[str, str], deque[float]] = {}

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        failures = self._failures.setdefault(key, deque())
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        return failures

    def blocked(self, account: str, client: str, *, now: float | None = None) -> bool:
        key = (account.casefold(), client)
        failures = self._recent(key, time.monotonic() if now is None else now)
        if not failures:
            self._failures.pop(key, None)
        return len(failures) >= self.limit

    def failed(self, account: str, client: str, *, now: float | None = None) -> None:
        key = (account.casefold(), client)
        at = time.monotonic() if now is None else now
        self._recent(key, at).append(at)
        while len(self._failures) > self.max_keys:
            del self._failures[next(iter(self._failures))]  # dicts keep insertion order: the oldest

    def succeeded(self, account: str, client: str) -> None:
        self._failures.pop((account.casefold(), client), None)

    def wait_text(self) -> str:
        """How long a blocked person waits at most, in words (the window)."""
        minutes = max(1, round(self.window_s / 60))
        return f"{minutes} minute{'' if minutes == 1 else 's'}"

    async def admit(self, account: str, client: str) -> bool:
        """Whether a sign-in attempt may be checked at all (False: answer 429)."""
        return not self.blocked(account, client)

    async def record(self, account: str, client: str, *, ok: bool) -> None:
        """The attempt `admit` let through succeeded (`ok`) or failed."""
        if ok:
            self.succeeded(account, client)
        else:
            self.failed(account, client)


class StoreSignInThrottle(SignInThrottle):
    """At most `limit` sign-in attempts per (account, client) within `window_s`, in the stores' rate
    limiter (`stores.rate_limits`: the SQL table, or Redis), so every console over the same stores
    shares the count.

    A token bucket of `limit` attempts refilled at `limit / window_s` per second: each attempt spends
    one when `admit` lets it through, before the password is checked. A token bucket cannot give a
    token back, so unlike `SignInThrottle` a correct password does not clear earlier failures and
    counts as an attempt too (five sign-ins in five minutes from one address, by default). The
    bucket key is a digest of the case-folded name and the client address, so neither is stored.
    The inherited `blocked`/`failed`/`succeeded` keep counting in this process only; the console
    calls `admit` and `record`.
    """

    def __init__(self, limiter: RateLimiter, *, limit: int = 5, window_s: float = 300.0) -> None:
        super().__init__(limit=limit, window_s=window_s)
        self.limiter = limiter

    @staticmethod
    def key(account: str, client: str) -> str:
        digest = hashlib.sha256(f"{account.casefold()}\0{client}".encode()).hexdigest()
        return f"maitre.console.sign-in/{digest[:32]}"

    async def admit(self, account: str, client: str) -> bool:
        wait = await self.limiter.acquire(
            self.key(account, client), rate_per_s=self.limit / self.window_s, burst=self.limit
        )
        return wait == 0

    async def record(self, account: str, client: str, *, ok: bool) -> None:
        return None  # the attempt was spent when it was admitted
