"""The inbox of pending approvals, a page per request, and the approve / deny decisions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .decide import Refused, decide, visible_request

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from .accounts import Account
    from .security import Session
    from .web import Console, Page

__all__ = ["routes"]


def routes(console: Console) -> list[Any]:
    from starlette.routing import Route

    gate = console.gate

    async def inbox(
        request: Request, session: Session, account: Account, fields: Mapping[str, str]
    ) -> Response:
        requests = await gate.approvals.list(status="pending", tenant=account.tenant)
        return console.render(request, "inbox.html", requests=requests, account=account, csrf=session.csrf)

    async def request_page(
        request: Request, session: Session, account: Account, fields: Mapping[str, str]
    ) -> Response:
        approval_id = str(request.path_params["approval_id"])
        found = await visible_request(gate, account, approval_id)
        if found is None:
            return console.message(request, session, account, 404, "Not found", "No such approval request.")
        return console.render(request, "request.html", r=found, account=account, csrf=session.csrf)

    def deciding(approve: bool) -> Page:
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
                return console.message(
                    request, session, account, refused.status, title, refused.message, shown
                )
            verb = "Approved" if decided.status == "approved" else "Denied"
            text = f"{verb} {decided.tool} as {decided.approver}."
            if approve:
                text += " The call runs when it is made again with this approval (a paused run resumes then)."
            return console.message(request, session, account, 200, verb, text, decided.id)

        return page

    return [
        Route("/", console.guarded(inbox, post=False), methods=["GET"], name="inbox"),
        Route(
            "/approvals/{approval_id}",
            console.guarded(request_page, post=False),
            methods=["GET"],
            name="request_page",
        ),
        Route(
            "/approvals/{approval_id}/approve",
            console.guarded(deciding(True), post=True),
            methods=["POST"],
            name="approve",
        ),
        Route(
            "/approvals/{approval_id}/deny",
            console.guarded(deciding(False), post=True),
            methods=["POST"],
            name="deny",
        ),
    ]
