"""The console's Starlette app: sign-in, the inbox of pending approvals, runs, the audit log.

`create_app(stores, secret=...)` is all a host needs (`maitre console` serves it with uvicorn).
Pages are rendered on the server from the package's Jinja2 templates with autoescaping, so every
string a model or tool wrote (arguments, reasons, names) is text on the page, never markup. Each
page family is its own module (`signin`, `approvals`, `runs_pages`, `audit_page`) over the shared
`web.Console`; the only assets are a stylesheet and a small script that pages work without.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import approvals, audit_page, runs_pages, signin
from .accounts import account_store
from .security import SECURITY_HEADERS, SessionSigner, SignInThrottle
from .web import HERE, SESSION_COOKIE, SIGNIN_COOKIE, Console, environment

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ..policy import Policy
    from ..stores import Stores
    from ..tools import Toolbox
    from .accounts import AccountStore

__all__ = ["SESSION_COOKIE", "SIGNIN_COOKIE", "create_app"]


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
    the gate's policy (who may approve: self-approval, the approver role); `toolbox` holds the
    tools whose requests are shown, so edited arguments are validated by the gate's own validation.
    `throttle` limits failed sign-ins.
    """
    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.staticfiles import StaticFiles

    from ..gate import Gate
    from ..tools import Toolbox

    console = Console(
        gate=Gate(toolbox or Toolbox(), stores=stores, audit=False, policy=policy),
        people=accounts if accounts is not None else account_store(stores),
        signer=SessionSigner(secret, max_age_s=session_max_age_s),
        throttle=throttle or SignInThrottle(),
        env=environment(),
    )
    routes = [
        *signin.routes(console),
        *approvals.routes(console),
        *runs_pages.routes(console),
        *audit_page.routes(console),
        Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(_SecurityHeaders)
    app.state.console = console
    app.state.gate = console.gate
    app.state.accounts = console.people
    return app
