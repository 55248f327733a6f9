"""The console's Starlette app: sign-in, the inbox of pending approvals, a page per request, decisions.

`create_app(stores, secret=...)` is all a host needs (`maitre console` serves it with uvicorn).
Pages are rendered on the server from the package's Jinja2 templates with autoescaping, so every
string a model or tool wrote (arguments, reasons, names) is text on the page, never markup. The
only asset is a stylesheet; there is no script at all, so the Content-Security-Policy forbids it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from .accounts import Account, AccountStore, account_store, burn_verification, verify_password
from .decide import Refused, decide, visible_request
from .security import SECURITY_HEADERS, Session, SessionSigner, SignInThrottle, tokens_match

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from ..policy import Policy
    from ..stores import Stores
    from ..tools import Toolbox

__all__ = ["SESSION_COOKIE", "SIGNIN_COOKIE", "create_app"]

SESSION_COOKIE = "maitre_console"
SIGNIN_COOKIE = "maitre_console_signin"
_HERE = Path(__file__).parent
_MAX_FORM_BYTES = 64 * 1024


def _environment() -> Any:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(
        loader=FileSystemLoader(str(_HERE / "templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
        auto_reload=False,
    )
    env.filters["when"] = lambda ts: time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ts))
    env.filters["iso"] = lambda ts: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
    env.filters["pretty"] = lambda value: json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    return env


class _SecurityHeaders:
    """ASGI middleware: the console's security headers on every HTTP response."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._headers = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                present = {name for name, _ in message.get("headers", [])}
                extra = [(n, v) for n, v in self._headers if n not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def create_app(
    stores: Stores,
    *,
    secret: str,
    accounts: AccountStore | None = None,
    policy: Policy | None = None,
    toolbox: Toolbox | None = None,
    throttle: SignInThrottle | None = None,
    session_max_age_s: int = 8 * 3600,
) -> Starlette:
    """The console over `stores`.

    `secret` signs session cookies (16+ characters; keep it stable across restarts to keep people
    signed in). `accounts` defaults to the table beside `stores` (see `account_store`). `policy` is
    the gate's policy (who may approve: self-approval, the approver role); `toolbox` is only needed
    to validate edited arguments (a later page). `throttle` limits failed sign-ins.
    """
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, RedirectResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from ..gate import Gate
    from ..tools import Toolbox

    gate = Gate(toolbox or Toolbox(), stores=stores, audit=False, policy=policy)
    people = accounts if accounts is not None else account_store(stores)
    signer = SessionSigner(secret, max_age_s=session_max_age_s)
    limiter = throttle or SignInThrottle()
    env = _environment()

    def render(request: Request, template: str, status: int = 200, /, **context: Any) -> Response:
        def url_for(route: str, /, **params: Any) -> str:
            return str(request.url_for(route, **params).path)

        html = env.get_template(template).render(url_for=url_for, **context)
        return HTMLResponse(html, status_code=status)

    def secure(request: Request) -> bool:
        return request.url.scheme == "https"

    async def form(request: Request) -> dict[str, str]:
        if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            return {}
        body = await request.body()
        if len(body) > _MAX_FORM_BYTES:
            return {}
        parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        return {key: values[0] for key, values in parsed.items()}

    async def signed_in(request: Request) -> tuple[Session, Account] | None:
        session = signer.read_session(request.cookies.get(SESSION_COOKIE))
        if session is None:
            return None
        account = await people.get(session.account)
        return None if account is None else (session, account)

    def to_sign_in() -> Response:
        return RedirectResponse("/sign-in", status_code=303)

    def sign_in_page(
        request: Request, *, error: str | None = None, name: str = "", status: int = 200
    ) -> Response:
        token, cookie = signer.new_form_token()
        response = render(request, "signin.html", status, csrf=token, error=error, name=name, account=None)
        response.set_cookie(
            SIGNIN_COOKIE, cookie, max_age=3600, httponly=True, samesite="strict", secure=secure(request)
        )
        return response

    async def sign_in_get(request: Request) -> Response:
        return sign_in_page(request)

    async def sign_in_post(request: Request) -> Response:
        fields = await form(request)
        if not signer.form_token_ok(request.cookies.get(SIGNIN_COOKIE), fields.get("csrf")):
            return sign_in_page(request, error="The form expired; please sign in again.", status=403)
        name = fields.get("name", "").strip()
        password = fields.get("password", "")
        client = request.client.host if request.client else "unknown"
        if limiter.blocked(name, client):
            return sign_in_page(
                request, error="Too many failed attempts; wait a few minutes.", name=name, status=429
            )
        account = await people.get(name) if name else None
        if account is None:
            burn_verification(password)
        if account is None or not verify_password(account.password_hash, password):
            limiter.failed(name, client)
            return sign_in_page(request, error="Wrong account or password.", name=name, status=401)
        limiter.succeeded(name, client)
        _, cookie = signer.new_session(account.name)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            cookie,
            max_age=signer.max_age_s,
            httponly=True,
            samesite="strict",
            secure=secure(request),
        )
        response.delete_cookie(SIGNIN_COOKIE)
        return response

    def guarded(
        page: Callable[[Request, Session, Account, dict[str, str]], Awaitable[Response]], *, post: bool
    ) -> Callable[[Request], Awaitable[Response]]:
        """Signed in (else the sign-in page); for a POST, the session's CSRF token (else 403)."""

        async def endpoint(request: Request) -> Response:
            who = await signed_in(request)
            if who is None:
                return to_sign_in()
            session, account = who
            fields: dict[str, str] = {}
            if post:
                fields = await form(request)
                if not tokens_match(session.csrf, fields.get("csrf")):
                    return message(
                        request,
                        session,
                        account,
                        403,
                        "Refused",
                        "The form's security token is missing or wrong; reload the page and try again.",
                    )
            return await page(request, session, account, fields)

        return endpoint

    def message(
        request: Request,
        session: Session,
        account: Account,
        status: int,
        title: str,
        text: str,
        approval_id: str | None = None,
    ) -> Response:
        return render(
            request,
            "message.html",
            status,
            title=title,
            message=text,
            account=account,
            csrf=session.csrf,
            approval_id=approval_id,
        )

    async def sign_out(
        request: Request, session: Session, account: Account, fields: Mapping[str, str]
    ) -> Response:
        response = to_sign_in()
        response.delete_cookie(SESSION_COOKIE)
        return response

    async def inbox(
        request: Request, session: Session, account: Account, fields: Mapping[str, str]
    ) -> Response:
        requests = await gate.approvals.list(status="pending", tenant=account.tenant)
        return render(request, "inbox.html", requests=requests, account=account, csrf=session.csrf)

    async def request_page(
        request: Request, session: Session, account: Account, fields: Mapping[str, str]
    ) -> Response:
        approval_id = str(request.path_params["approval_id"])
        found = await visible_request(gate, account, approval_id)
        if found is None:
            return message(request, session, account, 404, "Not found", "No such approval request.")
        return render(request, "request.html", r=found, account=account, csrf=session.csrf)

    def deciding(
        approve: bool,
    ) -> Callable[[Request, Session, Account, Mapping[str, str]], Awaitable[Response]]:
        async def page(
            request: Request, session: Session, account: Account, fields: Mapping[str, str]
        ) -> Response:
            approval_id = str(request.path_params["approval_id"])
            try:
                decided = await decide(
                    gate, account, approval_id, approve=approve, message=fields.get("message")
                )
            except Refused as refused:
                title = {404: "Not found", 409: "Already decided", 410: "Expired"}.get(
                    refused.status, "Refused"
                )
                shown = None if refused.status == 404 else approval_id
                return message(request, session, account, refused.status, title, refused.message, shown)
            verb = "Approved" if decided.status == "approved" else "Denied"
            text = f"{verb} {decided.tool} as {decided.approver}."
            if approve:
                text += " The call runs when it is made again with this approval (a paused run resumes then)."
            return message(request, session, account, 200, verb, text, decided.id)

        return page

    routes = [
        Route("/", guarded(inbox, post=False), methods=["GET"], name="inbox"),
        Route("/sign-in", sign_in_get, methods=["GET"], name="sign_in_form"),
        Route("/sign-in", sign_in_post, methods=["POST"], name="sign_in"),
        Route("/sign-out", guarded(sign_out, post=True), methods=["POST"], name="sign_out"),
        Route(
            "/approvals/{approval_id}",
            guarded(request_page, post=False),
            methods=["GET"],
            name="request_page",
        ),
        Route(
            "/approvals/{approval_id}/approve",
            guarded(deciding(True), post=True),
            methods=["POST"],
            name="approve",
        ),
        Route(
            "/approvals/{approval_id}/deny",
            guarded(deciding(False), post=True),
            methods=["POST"],
            name="deny",
        ),
        Mount("/static", app=StaticFiles(directory=str(_HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(_SecurityHeaders)
    app.state.gate = gate
    app.state.accounts = people
    return app
