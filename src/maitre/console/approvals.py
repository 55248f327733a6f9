"""The inbox of pending approvals, a page per request, approve / deny, and the edit-arguments form.

The request page shows what a person needs to judge a call: the tool with its effect and risk, the
policy rule and reason that asked, who asked and in which run, what the user asked (the run's goal
and last turns), why the run is tainted, the arguments (readable and as JSON) and the expiry.

Editing is three steps, all plain forms: `GET /approvals/ID/edit` shows the form generated from
the tool's JSON Schema (`forms`); `POST` to it reads the form back, has the gate validate it
(`decide.check_edit`) and shows the diff and the new hash, or the form again with the gate's
teaching errors next to the fields (422); `POST /approvals/ID/edit/confirm` approves the edited
arguments, bound to that hash.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .decide import (
    HASH_SHOWN,
    EditCheck,
    InvalidEdit,
    Refused,
    check_edit,
    decidable,
    decide,
    visible_request,
)
from .forms import EditForm, build_form, field_messages, place_errors, read_form, read_json
from .runs_view import Turn, goal, last_turns, load_run

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from ..agent.run import Run
    from ..stores import ApprovalRequest
    from ..tools import Tool
    from ..types import TaintSource
    from .accounts import Account
    from .security import Session
    from .web import Console, Page

__all__ = ["InboxRow", "RequestView", "routes", "summary"]

_TITLES = {404: "Not found", 409: "Already decided", 410: "Expired", 422: "Cannot approve this edit"}
_SUMMARY_CHARS = 120


@dataclass(frozen=True)
class InboxRow:
    """One pending request as the inbox lists it."""

    r: ApprovalRequest
    effect: str | None
    risk: str | None
    summary: str
    """The arguments cut short (`order_id="A1", amount="12.50"`); the request page shows them whole."""


@dataclass(kw_only=True)
class RequestView:
    """What the request page shows about one approval request."""

    r: ApprovalRequest
    tool: Tool | None
    effect: str | None
    risk: str | None
    rule: str
    taint: TaintSource | None
    run: Run | None = None
    goal: str = ""
    turns: list[Turn] = field(default_factory=list)

    @property
    def run_missing(self) -> bool:
        """The request names a run this console cannot read (not saved here, or unreadable)."""
        return self.r.run_id is not None and self.run is None


def _effect_risk(tool: Tool | None, r: ApprovalRequest) -> tuple[str | None, str | None]:
    """The request's own effect and risk; for a request stored without them, the tool's."""
    effect = r.effect or (str(tool.effect) if tool is not None else None)
    risk = r.risk or (str(tool.risk) if tool is not None else None)
    return effect, risk


def summary(arguments: Mapping[str, Any]) -> str:
    """`key=value, ...` in JSON, cut at a readable length."""
    text = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items())
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 1] + "…"


def routes(console: Console) -> list[Any]:
    from starlette.routing import Route

    gate = console.gate

    async def view_of(account: Account, r: ApprovalRequest) -> RequestView:
        tool = gate.find_tool(r.tool)
        effect, risk = _effect_risk(tool, r)
        view = RequestView(r=r, tool=tool, effect=effect, risk=risk, rule=r.rule, taint=r.taint)
        if r.run_id is not None:
            run = await load_run(console.stores, account.tenant, r.run_id)
            if run is not None:
                view.run, view.goal, view.turns = run, goal(run), last_turns(run)
                ticket = next((p.ticket for p in run.pending if p.approval_id == r.id), None)
                if ticket is not None:  # a request stored before it kept its rule and taint itself
                    view.rule = view.rule or ticket.rule
                    view.taint = view.taint or ticket.taint
        return view

    def refusal(
        request: Request, session: Session, account: Account, refused: Refused, approval_id: str
    ) -> Response:
        title = _TITLES.get(refused.status, "Refused")
        shown = None if refused.status == 404 else approval_id
        return console.message(request, session, account, refused.status, title, refused.message, shown)

    async def inbox(
        request: Request, session: Session, account: Account, fields: Mapping[str, str]
    ) -> Response:
        pending = await gate.approvals.list(status="pending", tenant=account.tenant)
        rows = [
            InboxRow(r, *_effect_risk(gate.find_tool(r.tool), r), summary=summary(r.arguments))
            for r in pending
        ]
        return console.render(request, "inbox.html", rows=rows, account=account, csrf=session.csrf)

    async def request_page(
        request: Request, session: Session, account: Account, fields: Mapping[str, str]
    ) -> Response:
        approval_id = str(request.path_params["approval_id"])
        found = await visible_request(gate, account, approval_id)
        if found is None:
            return console.message(request, session, account, 404, "Not found", "No such approval request.")
        view = await view_of(account, found)
        return console.render(
            request,
            "request.html",
            v=view,
            r=found,
            account=account,
            csrf=session.csrf,
            hash_shown=HASH_SHOWN,
        )

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
                return refusal(request, session, account, refused, approval_id)
            verb = "Approved" if decided.status == "approved" else "Denied"
            text = f"{verb} {decided.tool} as {decided.approver}."
            if approve:
                text += (
                    " A paused run resumes as soon as a resume worker (maitre console --resume-agent, maitre runs"
                    " worker) sees the decision; a call from an MCP client runs when it is made again."
                )
            return console.message(request, session, account, 200, verb, text, decided.id)

        return page

    def edit_page(
        request: Request,
        session: Session,
        account: Account,
        r: ApprovalRequest,
        form: EditForm,
        *,
        status: int = 200,
        problem: str = "",
        note: str = "",
    ) -> Response:
        return console.render(
            request,
            "edit.html",
            status,
            r=r,
            form=form,
            tool_known=gate.find_tool(r.tool) is not None,
            problem=problem,
            note=note,
            account=account,
            csrf=session.csrf,
        )

    def schema_of(r: ApprovalRequest) -> dict[str, Any] | None:
        tool = gate.find_tool(r.tool)
        return None if tool is None else tool.input_schema

    async def edit_form(
        request: Request, session: Session, account: Account, fields: Mapping[str, str]
    ) -> Response:
        approval_id = str(request.path_params["approval_id"])
        try:
            r = await decidable(gate, account, approval_id)
        except Refused as refused:
            return refusal(request, session, account, refused, approval_id)
        as_json = request.query_params.get("as") == "json"
        form = build_form(schema_of(r), r.arguments, force_json=as_json)
        return edit_page(request, session, account, r, form)

    def invalid_page(
        request: Request,
        session: Session,
        account: Account,
        r: ApprovalRequest,
        form: EditForm,
        invalid: InvalidEdit,
        note: str,
    ) -> Response:
        details = invalid.error.details.get("fields")
        located = field_messages(invalid.error.message, details if isinstance(details, list) else [])
        place_errors(form, located)
        problem = "The gate refused the edited arguments; nothing was approved. " + invalid.error.message
        return edit_page(request, session, account, r, form, status=422, problem=problem, note=note)

    async def edit_submit(
        request: Request, session: Session, account: Account, fields: Mapping[str, str]
    ) -> Response:
        approval_id = str(request.path_params["approval_id"])
        try:
            r = await decidable(gate, account, approval_id)
        except Refused as refused:
            return refusal(request, session, account, refused, approval_id)
        submitted = await console.form_lists(request)
        schema = schema_of(r)
        action = fields.get("!action", "preview")
        note = fields.get("note", "")
        in_json = fields.get("!mode") == "json" or schema is None

        def form_again(value: Any) -> EditForm:
            if in_json:
                return build_form(schema, value, force_json=schema is not None)
            return build_form(schema, value, submitted=submitted, add_row=action.removeprefix("add:"))

        if in_json:
            edited, problems = read_json(fields.get("!json", ""))
            if edited is None:
                form = build_form(schema, r.arguments, force_json=schema is not None)
                form.json_text = fields.get("!json", "")
                form.errors = [p.message for p in problems]
                return edit_page(request, session, account, r, form, status=422, note=note)
            if action == "as-form":
                return edit_page(request, session, account, r, build_form(schema, edited), note=note)
        else:
            assert schema is not None
            edited, problems = read_form(schema, submitted)
            if action == "as-json":
                return edit_page(
                    request, session, account, r, build_form(schema, edited, force_json=True), note=note
                )
            if action.startswith("add:"):
                return edit_page(request, session, account, r, form_again(edited), note=note)
            if problems:
                form = form_again(edited)
                place_errors(form, {p.where: p.message for p in problems})
                return edit_page(request, session, account, r, form, status=422, note=note)
        try:
            check = await check_edit(gate, account, approval_id, edited)
        except InvalidEdit as invalid:
            form = form_again(edited)
            if in_json:
                form.json_text = fields.get("!json", "")
            return invalid_page(request, session, account, r, form, invalid, note)
        except Refused as refused:
            if refused.status == 422:  # the tool is unknown: the edit cannot be validated
                form = form_again(edited)
                form.json_text = fields.get("!json", form.json_text)
                return edit_page(
                    request, session, account, r, form, status=422, problem=refused.message, note=note
                )
            return refusal(request, session, account, refused, approval_id)
        return confirm_page(request, session, account, check, note)

    def confirm_page(
        request: Request, session: Session, account: Account, check: EditCheck, note: str
    ) -> Response:
        return console.render(
            request,
            "edit_confirm.html",
            r=check.request,
            check=check,
            edited=json.dumps(check.arguments, ensure_ascii=False, sort_keys=True),
            note=note,
            account=account,
            csrf=session.csrf,
        )

    async def edit_confirm(
        request: Request, session: Session, account: Account, fields: Mapping[str, str]
    ) -> Response:
        approval_id = str(request.path_params["approval_id"])
        note = fields.get("note", "")
        edited, _ = read_json(fields.get("edited", ""))
        try:
            r = await decidable(gate, account, approval_id)
        except Refused as refused:
            return refusal(request, session, account, refused, approval_id)
        if edited is None:
            missing = Refused(
                400, "The confirmed arguments are missing or not a JSON object; edit them again."
            )
            return refusal(request, session, account, missing, approval_id)
        try:
            decided = await decide(
                gate,
                account,
                approval_id,
                approve=True,
                message=note,
                edited_arguments=edited,
                confirmed_hash=fields.get("hash", ""),
            )
        except InvalidEdit as invalid:
            return invalid_page(request, session, account, r, build_form(schema_of(r), edited), invalid, note)
        except Refused as refused:
            return refusal(request, session, account, refused, approval_id)
        if decided.edited_arguments is None:
            text = f"Approved {decided.tool} as {decided.approver}: the edit changed nothing, so the call runs as proposed."
        else:
            bound = (decided.approved_hash or "")[:HASH_SHOWN]
            text = (
                f"Approved {decided.tool} as {decided.approver} with your edited arguments, bound to {bound}…. "
                "The call runs with them when it is made again with this approval (a paused run resumes then)."
            )
        return console.message(request, session, account, 200, "Approved", text, decided.id)

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
        Route(
            "/approvals/{approval_id}/edit",
            console.guarded(edit_form, post=False),
            methods=["GET"],
            name="edit",
        ),
        Route(
            "/approvals/{approval_id}/edit",
            console.guarded(edit_submit, post=True),
            methods=["POST"],
            name="edit_submit",
        ),
        Route(
            "/approvals/{approval_id}/edit/confirm",
            console.guarded(edit_confirm, post=True),
            methods=["POST"],
            name="edit_confirm",
        ),
    ]
