"""What keeps the console's own page safe: signed sessions, CSRF tokens, sign-in throttling, headers.

- The session is a cookie signed with the console's secret (itsdangerous, with an age limit):
  `HttpOnly`, `SameSite=Strict`, `Secure` when the request came over https. It holds the account
  name and a random CSRF token bound to that session; no password, hash or approval digest.
- Before sign-in there is no session, so the sign-in form uses a signed double-submit cookie.
- Failed sign-ins are counted per (account, client address) in memory; past the limit the form
  answers 429 until the window passes, whatever the password.
- Every response carries a strict Content-Security-Policy (no inline script, no framing), and no
  referrer is sent, so an approval id in a URL does not leave the page.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

__all__ = ["SECURITY_HEADERS", "Session", "SessionSigner", "SignInThrottle", "tokens_match"]

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
    """A signed-in person: the account name and the CSRF token bound to this session."""

    account: str
    csrf: str


class SessionSigner:
    """Signs and reads the session and pre-session (sign-in form) cookies with the console secret."""

    def __init__(self, secret: str, *, max_age_s: int = 8 * 3600) -> None:
        from itsdangerous import URLSafeTimedSerializer

        if len(secret) < 16:
            raise ValueError("the console secret must be at least 16 characters")
        self._session = URLSafeTimedSerializer(secret, salt="maitre.console.session")
        self._form = URLSafeTimedSerializer(secret, salt="maitre.console.signin")
        self.max_age_s = max_age_s

    def new_session(self, account: str) -> tuple[Session, str]:
        session = Session(account=account, csrf=secrets.token_urlsafe(24))
        return session, str(self._session.dumps({"a": session.account, "c": session.csrf}))

    def read_session(self, cookie: str | None) -> Session | None:
        data = self._loads(self._session, cookie, self.max_age_s)
        if not isinstance(data, dict):
            return None
        account, csrf = data.get("a"), data.get("c")
        if not isinstance(account, str) or not isinstance(csrf, str):
            return None
        return Session(account=account, csrf=csrf)

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
