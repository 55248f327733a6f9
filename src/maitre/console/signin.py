"""The sign-in page, sign-in with a local account (name + password, argon2-verified, throttled), sign-out.

The page offers what is configured (`SignInOptions`): "Sign in with <issuer host>" when OIDC is
set up (`oidc`), the name and password form when local accounts are on, or both. `oidc` renders
its errors on this same page, with `sign_in_page`, and starts its sessions with `set_session`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .accounts import burn_verification, verify_password
from .web import SESSION_COOKIE, SIGNIN_COOKIE, storable

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from .accounts import Account
    from .security import Session
    from .web import Console

__all__ = ["SignInOptions", "routes", "set_session", "sign_in_page"]


@dataclass(frozen=True, kw_only=True)
class SignInOptions:
    """What the sign-in page offers."""

    local: bool = True
    """The name and password form for local accounts (`maitre console add-user`)."""
    oidc_label: str | None = None
    """The identity provider's host when OIDC sign-in is configured (the button's "Sign in with ...")."""


def sign_in_page(
    console: Console,
    request: Request,
    options: SignInOptions,
    *,
    error: str | None = None,
    name: str = "",
    status: int = 200,
) -> Response:
    """The sign-in page (with `error` said on it and answered with `status`), and its form cookie."""
    token, cookie = console.signer.new_form_token()
    response = console.render(
        request,
        "signin.html",
        status,
        csrf=token,
        error=error,
        name=name,
        account=None,
        local=options.local,
        oidc_label=options.oidc_label,
        continue_to=None,
    )
    if options.local:
        response.set_cookie(
            SIGNIN_COOKIE,
            cookie,
            max_age=3600,
            httponly=True,
            samesite="strict",
            secure=console.secure(request),
        )
    return response


def set_session(console: Console, request: Request, response: Response, cookie: str) -> Response:
    """`response` with the session cookie: `HttpOnly`, `SameSite=Strict`, `Secure` over https."""
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=console.signer.max_age_s,
        httponly=True,
        samesite="strict",
        secure=console.secure(request),
    )
    response.delete_cookie(SIGNIN_COOKIE)
    return response


def routes(console: Console, options: SignInOptions | None = None) -> list[Any]:
    from starlette.responses import RedirectResponse
    from starlette.routing import Route

    shown = options or SignInOptions()
    signer, limiter, people = console.signer, console.throttle, console.people

    async def sign_in_get(request: Request) -> Response:
        return sign_in_page(console, request, shown)

    async def sign_in_post(request: Request) -> Response:
        if not shown.local:
            return sign_in_page(
                console, request, shown, error="Local accounts are turned off here.", status=403
            )
        fields = await console.form(request)
        if not signer.form_token_ok(request.cookies.get(SIGNIN_COOKIE), fields.get("csrf")):
            return sign_in_page(
                console, request, shown, error="The form expired; please sign in again.", status=403
            )
        name = fields.get("name", "").strip()
        password = fields.get("password", "")
        if not storable(name):  # no account has it, and the throttle's store could not hold it
            return sign_in_page(
                console, request, shown, error="An account name cannot hold a NUL byte.", status=400
            )
        client = request.client.host if request.client else "unknown"
        if not await limiter.admit(name, client):
            return sign_in_page(
                console,
                request,
                shown,
                error=f"Too many failed attempts for this account from here; try again in {limiter.wait_text()}.",
                name=name,
                status=429,
            )
        account = await people.get(name) if name else None
        if account is None:
            burn_verification(password)
        if account is None or not verify_password(account.password_hash, password):
            await limiter.record(name, client, ok=False)
            return sign_in_page(
                console, request, shown, error="Wrong account or password.", name=name, status=401
            )
        await limiter.record(name, client, ok=True)
        _, cookie = signer.new_session(account.name)
        return set_session(console, request, RedirectResponse("/", status_code=303), cookie)

    async def sign_out(
        request: Request, session: Session, account: Account, fields: Mapping[str, str]
    ) -> Response:
        response = console.to_sign_in()
        response.delete_cookie(SESSION_COOKIE)
        return response

    return [
        Route("/sign-in", sign_in_get, methods=["GET"], name="sign_in_form"),
        Route("/sign-in", sign_in_post, methods=["POST"], name="sign_in"),
        Route("/sign-out", console.guarded(sign_out, post=True), methods=["POST"], name="sign_out"),
    ]
