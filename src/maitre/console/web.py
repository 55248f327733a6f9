"""What every console page shares: the gate and stores, templates, sessions, forms, guards.

`Console` is built once by `create_app` and handed to each page module (`signin`, `approvals`,
`runs_pages`, `audit_page`, `oidc`), whose `routes(console)` returns its Starlette routes. A page
is written as `async def page(request, session, account, fields) -> Response` and wrapped by
`console.guarded(page, post=...)`: signed in, or redirected to sign-in; for a POST, the session's
CSRF token checked first.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlencode

from .security import Session, SessionSigner, SignInThrottle, tokens_match

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from ..gate import Gate
    from ..stores import Stores
    from .accounts import Account, AccountStore

__all__ = [
    "Console",
    "HERE",
    "MAX_FORM_BYTES",
    "Page",
    "SESSION_COOKIE",
    "SIGNIN_COOKIE",
    "environment",
    "storable",
]

SESSION_COOKIE = "maitre_console"
SIGNIN_COOKIE = "maitre_console_signin"
HERE = Path(__file__).parent
MAX_FORM_BYTES = 64 * 1024

Page = Callable[["Request", Session, "Account", Mapping[str, str]], Awaitable["Response"]]
"""A signed-in page: (request, session, account, form fields) -> response."""

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_DOT_SEGMENTS = ("", ".", "..")


_UNSTORABLE_TEXT = (
    "The request holds a NUL byte (or a lone surrogate), which no name, id or text here can hold."
)


def storable(text: str) -> bool:
    """Whether every store can hold `text`: no NUL (Postgres text refuses it), no lone surrogate
    (not UTF-8). An id or a name that fails this names nothing, so it never reaches a store."""
    return _UNSTORABLE.search(text) is None


def environment() -> Any:
    """The Jinja2 environment: the package's templates, autoescaped everywhere."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(
        loader=FileSystemLoader(str(HERE / "templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
        auto_reload=False,
    )
    env.filters["when"] = lambda ts: time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ts))
    env.filters["iso"] = lambda ts: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
    env.filters["pretty"] = lambda value: json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    return env


@dataclass
class Console:
    """The console's shared state and helpers, one per app."""

    gate: Gate
    """A gate over the console's stores (audit off: the console appends its own decision lines)."""
    people: AccountStore
    signer: SessionSigner
    throttle: SignInThrottle
    env: Any

    @property
    def stores(self) -> Stores:
        return self.gate.stores

    def render(self, request: Request, template: str, status: int = 200, /, **context: Any) -> Response:
        from starlette.responses import HTMLResponse

        def url_for(route: str, /, **params: Any) -> str:
            # Ids come from models, hosts and MCP clients: each is one path segment, percent-encoded
            # whole ('/', '?', '#', '%' included), which Starlette decodes back before routing.
            if route != "static":
                params = {key: quote(str(value), safe="") for key, value in params.items()}
            return str(request.url_for(route, **params).path)

        def run_url(run_id: str) -> str:
            """The run page of `run_id`; in the query for an id a browser would resolve as `.`/`..`."""
            if run_id in _DOT_SEGMENTS:
                return f"{url_for('run_by_query')}?{urlencode({'id': run_id})}"
            return url_for("run_page", run_id=run_id)

        def approval_url(approval_id: str) -> str | None:
            """The request page of `approval_id`, or None for an id no request can have: an audit
            entry keeps the id a client sent, and one with '/' would be decoded into another route."""
            return (
                None
                if "/" in approval_id or not approval_id
                else url_for("request_page", approval_id=approval_id)
            )

        html = self.env.get_template(template).render(
            url_for=url_for, run_url=run_url, approval_url=approval_url, **context
        )
        return HTMLResponse(html, status_code=status)

    @staticmethod
    def secure(request: Request) -> bool:
        """Whether the request came over https (then cookies are `Secure`)."""
        return request.url.scheme == "https"

    @staticmethod
    async def form(request: Request) -> dict[str, str]:
        """A urlencoded form's fields (first value of each); {} for anything else or too large."""
        return {key: values[0] for key, values in (await Console.form_lists(request)).items()}

    @staticmethod
    async def form_lists(request: Request) -> dict[str, list[str]]:
        """A urlencoded form's fields with every value (repeated names, e.g. array items)."""
        if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            return {}
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            return {}
        return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)

    async def signed_in(self, request: Request) -> tuple[Session, Account] | None:
        """The session and the person it is for, or None (signed out, expired, forged, or gone).

        A local account's session is checked against the account table on every request, so
        deleting the account (or replacing its roles) takes effect at once. An OIDC session is the
        person the verified ID token named: an `Account` with no password hash, whose tenant and
        roles are the token's, trusted until the session's age limit.
        """
        session = self.signer.read_session(request.cookies.get(SESSION_COOKIE))
        if session is None:
            return None
        if session.source == "oidc":
            from .accounts import Account

            if session.tenant is None:
                return None
            return session, Account(name=session.account, tenant=session.tenant, roles=session.roles)
        account = await self.people.get(session.account)
        return None if account is None else (session, account)

    @staticmethod
    def to_sign_in() -> Response:
        from starlette.responses import RedirectResponse

        return RedirectResponse("/sign-in", status_code=303)

    def guarded(self, page: Page, *, post: bool) -> Callable[[Request], Awaitable[Response]]:
        """Signed in (else the sign-in page); for a POST, the session's CSRF token (else 403)."""

        async def endpoint(request: Request) -> Response:
            who = await self.signed_in(request)
            if who is None:
                return self.to_sign_in()
            session, account = who
            if not all(storable(str(value)) for value in request.path_params.values()):
                return self.message(request, session, account, 404, "Not found", "Nothing has that name.")
            if not all(storable(k) and storable(v) for k, v in request.query_params.multi_items()):
                return self.message(request, session, account, 400, "Refused", _UNSTORABLE_TEXT)
            fields: dict[str, str] = {}
            if post:
                submitted = await self.form_lists(request)
                fields = {key: values[0] for key, values in submitted.items()}
                if not tokens_match(session.csrf, fields.get("csrf")):
                    return self.message(
                        request,
                        session,
                        account,
                        403,
                        "Refused",
                        "The form's security token is missing or wrong; reload the page and try again.",
                    )
                if not all(storable(k) and all(storable(v) for v in vs) for k, vs in submitted.items()):
                    return self.message(request, session, account, 400, "Refused", _UNSTORABLE_TEXT)
            return await page(request, session, account, fields)

        return endpoint

    def message(
        self,
        request: Request,
        session: Session,
        account: Account,
        status: int,
        title: str,
        text: str,
        approval_id: str | None = None,
    ) -> Response:
        """A page that says one thing (a refusal, a decision taken) with the right status."""
        return self.render(
            request,
            "message.html",
            status,
            title=title,
            message=text,
            account=account,
            csrf=session.csrf,
            approval_id=approval_id,
        )
