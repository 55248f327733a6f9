"""Sign-in with a local account (name + password, argon2-verified, throttled) and sign-out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .accounts import burn_verification, verify_password
from .web import SESSION_COOKIE, SIGNIN_COOKIE

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from .accounts import Account
    from .security import Session
    from .web import Console

__all__ = ["routes"]


def routes(console: Console) -> list[Any]:
    from starlette.responses import RedirectResponse
    from starlette.routing import Route

    signer, limiter, people = console.signer, console.throttle, console.people

    def sign_in_page(
        request: Request, *, error: str | None = None, name: str = "", status: int = 200
    ) -> Response:
        token, cookie = signer.new_form_token()
        response = console.render(
            request, "signin.html", status, csrf=token, error=error, name=name, account=None
        )
        response.set_cookie(
            SIGNIN_COOKIE,
            cookie,
            max_age=3600,
            httponly=True,
            samesite="strict",
            secure=console.secure(request),
        )
        return response

    async def sign_in_get(request: Request) -> Response:
        return sign_in_page(request)

    async def sign_in_post(request: Request) -> Response:
        fields = await console.form(request)
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
            secure=console.secure(request),
        )
        response.delete_cookie(SIGNIN_COOKIE)
        return response

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
