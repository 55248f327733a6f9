"""The console's Starlette app: sign-in, the inbox of pending approvals, runs, the audit log.

`create_app(stores, secret=...)` is all a host needs (`maitre console` serves it with uvicorn);
`oidc=OIDCSettings(...)` adds sign-in with an OpenID Provider (`oidc`), and `local_accounts=False`
leaves only that.
Pages are rendered on the server from the package's Jinja2 templates with autoescaping, so every
string a model or tool wrote (arguments, reasons, names) is text on the page, never markup. Each
page family is its own module (`signin`, `oidc`, `approvals`, `runs_pages`, `audit_page`) over the shared
`web.Console`; the only assets are a stylesheet and a small script that pages work without.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import approvals, audit_page, runs_pages, signin
from . import oidc as oidc_pages
from .accounts import account_store
from .security import SECURITY_HEADERS, SessionSigner, SignInThrottle, StoreSignInThrottle
from .web import HERE, SESSION_COOKIE, SIGNIN_COOKIE, Console, environment

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ..policy import Policy
    from ..stores import Stores
    from ..tools import Toolbox
    from .accounts import AccountStore
    from .oidc import OIDCSettings

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
    oidc: OIDCSettings | None = None,
    local_accounts: bool = True,
) -> Starlette:
    """The console over `stores`.

    `secret` signs session cookies (16+ characters; keep it stable across restarts to keep people
    signed in). `accounts` defaults to the table beside `stores` (see `account_store`). `policy` is
    the gate's policy (who may approve: self-approval, the approver role); `toolbox` holds the
    tools whose requests are shown, so edited arguments are validated by the gate's own validation.
    `throttle` limits sign-in attempts; by default a `StoreSignInThrottle` over `stores.rate_limits`,
    shared by every console over the same stores. `oidc` turns on sign-in with that OpenID Provider;
    `local_accounts=False` turns the password form off (then `oidc` is needed).
    """
    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.staticfiles import StaticFiles

    from ..exceptions import UserError
    from ..gate import Gate
    from ..tools import Toolbox

    if not local_accounts and oidc is None:
        raise UserError("the console needs local accounts or an OIDC issuer: nobody could sign in")
    console = Console(
        gate=Gate(toolbox or Toolbox(), stores=stores, audit=False, policy=policy),
        people=accounts if accounts is not None else account_store(stores),
        signer=SessionSigner(
            secret,
            max_age_s=session_max_age_s,
            local=local_accounts,
            issuers=[oidc.issuer] if oidc is not None else [],
        ),
        throttle=throttle if throttle is not None else StoreSignInThrottle(stores.rate_limits),
        env=environment(),
    )
    options = signin.SignInOptions(local=local_accounts, oidc_label=oidc.label if oidc is not None else None)
    routes = [
        *signin.routes(console, options),
        *(oidc_pages.routes(console, oidc, options) if oidc is not None else []),
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
