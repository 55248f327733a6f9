"""The runs pages: the tenant's runs, and one page per run with its timeline and final answer.

A run's timeline is built here from what the run saved (`Run.events` in order, the model's words from
`Run.messages`), joined with the gate's audit entries of the run (its decision on each call, when,
and how long it took) and the approval requests the run raised. `timeline(run, ...)` turns a run into
rows; the templates only render them. A run of another tenant is, for the person, a run that does
not exist (the same 404 as an unknown id).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..messages import AssistantMessage
from .audit_page import run_audit
from .decide import visible_request
from .runs_view import goal, load_run

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from ..agent.run import Run
    from ..audit import AuditEntry
    from ..stores import ApprovalRequest, Stores
    from .accounts import Account
    from .security import Session
    from .web import Console

__all__ = ["RUNS_LIMIT", "RowKind", "RunLine", "TimelineRow", "routes", "run_lines", "timeline"]

RUNS_LIMIT = 100
"""The runs list shows at most this many runs, most recently updated first."""
_MAX_APPROVALS = 50
"""At most this many approval requests are looked up for one run page."""
_STATUSES = ("running", "paused", "finished", "stopped")

RowKind = Literal[
    "model", "call", "result", "approval", "decided", "paused", "resumed", "finished", "context", "other"
]


@dataclass(frozen=True, kw_only=True)
class RunLine:
    """One run in the list."""

    id: str
    status: str
    updated_at: float
    readable: bool = True
    """False when the saved state could not be read (then only id, status and time are known)."""
    stop_reason: str | None = None
    steps: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    started_by: str = ""
    """The user of the principal the run belongs to."""
    created_at: float | None = None
    pending: int = 0
    """Calls waiting for a decision."""


async def run_lines(
    stores: Stores, tenant: str, *, status: str | None = None, limit: int = RUNS_LIMIT
) -> list[RunLine]:
    """The tenant's runs (most recently updated first), each read once for its numbers."""
    lines: list[RunLine] = []
    for summary in await stores.runs.list(status=status, tenant=tenant, limit=limit):
        run = await load_run(stores, tenant, summary.run_id)
        if run is None:
            lines.append(
                RunLine(
                    id=summary.run_id, status=summary.status, updated_at=summary.updated_at, readable=False
                )
            )
            continue
        lines.append(
            RunLine(
                id=run.id,
                status=str(run.status),
                updated_at=summary.updated_at,
                stop_reason=str(run.stop_reason) if run.stop_reason else None,
                steps=run.steps,
                tool_calls=run.tool_calls,
                input_tokens=run.usage.input_tokens,
                output_tokens=run.usage.output_tokens,
                cost_usd=run.cost_usd,
                started_by=run.principal.user,
                created_at=run.created_at,
                pending=len(run.pending),
            )
        )
    return lines


@dataclass(frozen=True, kw_only=True)
class TimelineRow:
    """One thing that happened in a run, as the run page shows it."""

    kind: RowKind
    title: str
    """A short line: what happened."""
    step: int | None = None
    """The model step (1, 2, ...) of a model turn."""
    tool: str | None = None
    call_id: str | None = None
    arguments: Any = None
    """A call's arguments (JSON-ready), shown as JSON."""
    text: str | None = None
    """The model's words, a tool's result, a denial message or the run's closing text."""
    tools_called: tuple[str, ...] = ()
    """The tools a model turn asked for."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    stop_reason: str | None = None
    error_code: str | None = None
    trust: str | None = None
    """`trusted` or `untrusted`: whether the result may be read as instructions."""
    replayed: bool = False
    """The result was replayed from the idempotency store, not executed again."""
    approval_id: str | None = None
    status: str | None = None
    """An approval's status (as decided; the request's current status is in `request`)."""
    approver: str | None = None
    edited: bool = False
    rule: str | None = None
    """The policy rule that asked for approval."""
    request: ApprovalRequest | None = None
    """The approval request as stored now (its status, decision time, message)."""
    gate: tuple[AuditEntry, ...] = ()
    """The gate's audit entries for this call: its decision, when, how long."""
    data: Mapping[str, Any] = field(default_factory=dict)
    """The event's fields, for an event this page does not know."""


def _text_of(value: Any) -> str | None:
    return None if value is None else str(value)


def timeline(
    run: Run,
    audit: Sequence[AuditEntry] = (),
    approvals: Mapping[str, ApprovalRequest] | None = None,
) -> list[TimelineRow]:
    """The run's events in order, as rows: model turns, tool calls and results, approvals, pauses.

    `audit` holds the gate's entries of the run (matched to calls by call id: the last one goes with
    the call's result, the ones before it with the call) and `approvals` the requests by id.
    """
    approvals = approvals or {}
    by_call: dict[str, list[AuditEntry]] = {}
    for entry in audit:
        if entry.call_id is not None and entry.run_id == run.id:
            by_call.setdefault(entry.call_id, []).append(entry)
    answered = {str(e.get("call_id")) for e in run.events if e.get("type") == "tool_result"}
    model_calls = [e for e in run.events if e.get("type") == "model_call"]
    turns = [m for m in run.messages if isinstance(m, AssistantMessage)]
    # Each model call appended one assistant message, so the newest messages are the newest calls'
    # (trimming and summaries only drop the oldest messages).
    paired = min(len(model_calls), len(turns))
    words: dict[int, AssistantMessage] = {
        id(model_calls[len(model_calls) - paired + i]): turns[len(turns) - paired + i] for i in range(paired)
    }
    rows: list[TimelineRow] = []
    for event in run.events:
        kind = event.get("type")
        call_id = _text_of(event.get("call_id"))
        if kind == "model_call":
            said = words.get(id(event))
            rows.append(
                TimelineRow(
                    kind="model",
                    title=f"Model turn {event.get('step', '?')}",
                    step=event.get("step"),
                    text=said.text if said is not None else None,
                    tools_called=tuple(c.name for c in said.tool_calls) if said is not None else (),
                    input_tokens=event.get("input_tokens"),
                    output_tokens=event.get("output_tokens"),
                    stop_reason=_text_of(event.get("stop_reason")),
                )
            )
        elif kind == "tool_call":
            entries = by_call.get(call_id or "", [])
            before = entries[:-1] if call_id in answered else entries
            rows.append(
                TimelineRow(
                    kind="call",
                    title=f"Calls {event.get('name')}",
                    tool=_text_of(event.get("name")),
                    call_id=call_id,
                    arguments=event.get("arguments"),
                    gate=tuple(before),
                )
            )
        elif kind == "tool_result":
            entries = by_call.get(call_id or "", [])
            failed = bool(event.get("is_error"))
            rows.append(
                TimelineRow(
                    kind="result",
                    title=f"{event.get('name')} {'failed' if failed else 'answered'}",
                    tool=_text_of(event.get("name")),
                    call_id=call_id,
                    text=_text_of(event.get("content")),
                    error_code=_text_of(event.get("error_code")),
                    trust=_text_of(event.get("trust")),
                    replayed=bool(event.get("replayed")),
                    gate=tuple(entries[-1:]),
                )
            )
        elif kind == "approval_requested":
            approval_id = _text_of(event.get("approval_id"))
            rows.append(
                TimelineRow(
                    kind="approval",
                    title=f"{event.get('tool')} needs a person's approval",
                    tool=_text_of(event.get("tool")),
                    call_id=call_id,
                    arguments=event.get("arguments"),
                    approval_id=approval_id,
                    rule=_text_of(event.get("rule")),
                    request=approvals.get(approval_id or ""),
                )
            )
        elif kind == "approval_decided":
            approval_id = _text_of(event.get("approval_id"))
            request = approvals.get(approval_id or "")
            rows.append(
                TimelineRow(
                    kind="decided",
                    title=f"{event.get('tool')} {event.get('status')} by {event.get('approver')}",
                    tool=_text_of(event.get("tool")),
                    approval_id=approval_id,
                    status=_text_of(event.get("status")),
                    approver=_text_of(event.get("approver")),
                    edited=bool(event.get("edited")),
                    text=request.message if request is not None else None,
                    request=request,
                )
            )
        elif kind == "run_paused":
            waiting = [str(a) for a in event.get("pending", [])]
            rows.append(
                TimelineRow(kind="paused", title=f"Paused: {len(waiting)} call(s) wait for a decision")
            )
        elif kind == "run_resumed":
            rows.append(
                TimelineRow(
                    kind="resumed",
                    title=(
                        f"Resumed: {event.get('ready', 0)} decided, "
                        f"{event.get('still_pending', 0)} still waiting"
                    ),
                )
            )
        elif kind == "run_finished":
            rows.append(
                TimelineRow(
                    kind="finished",
                    title=f"Run {event.get('status')} ({event.get('stop_reason')})",
                    status=_text_of(event.get("status")),
                    stop_reason=_text_of(event.get("stop_reason")),
                )
            )
        elif kind == "context_trimmed":
            rows.append(
                TimelineRow(
                    kind="context",
                    title=f"Context trimmed: {event.get('tokens_dropped')} tokens of old messages dropped",
                )
            )
        elif kind == "context_summarised":
            rows.append(
                TimelineRow(
                    kind="context",
                    title=f"Context summarised: {event.get('messages_replaced')} old messages replaced",
                )
            )
        else:
            shown = {k: v for k, v in event.items() if k not in ("type", "run_id")}
            rows.append(TimelineRow(kind="other", title=str(kind), data=shown))
    return rows


def _closing_label(run: Run) -> str:
    return {"finished": "Final answer", "paused": "Waiting", "stopped": "Why it stopped"}.get(
        str(run.status), "So far"
    )


def routes(console: Console) -> list[Any]:
    from starlette.routing import Route

    async def runs(
        request: Request, session: Session, account: Account, fields: Mapping[str, str]
    ) -> Response:
        status = request.query_params.get("status", "").strip()
        if status and status not in _STATUSES:
            return console.render(
                request,
                "runs.html",
                400,
                lines=[],
                status=status,
                statuses=_STATUSES,
                error=f"{status[:40]!r} is not a run status.",
                limit=RUNS_LIMIT,
                account=account,
                csrf=session.csrf,
            )
        lines = await run_lines(console.stores, account.tenant, status=status or None)
        return console.render(
            request,
            "runs.html",
            lines=lines,
            status=status,
            statuses=_STATUSES,
            error=None,
            limit=RUNS_LIMIT,
            account=account,
            csrf=session.csrf,
        )

    async def run_page(
        request: Request, session: Session, account: Account, fields: Mapping[str, str]
    ) -> Response:
        run_id = str(request.path_params.get("run_id", request.query_params.get("id", "")))
        run = await load_run(console.stores, account.tenant, run_id) if run_id else None
        if run is None:
            return console.message(request, session, account, 404, "Not found", "No such run.")
        wanted = [e.get("approval_id") for e in run.events if e.get("type") == "approval_requested"]
        wanted += [p.approval_id for p in run.pending]
        approvals: dict[str, ApprovalRequest] = {}
        for approval_id in list(dict.fromkeys(str(a) for a in wanted if a))[:_MAX_APPROVALS]:
            found = await visible_request(console.gate, account, approval_id)
            if found is not None:
                approvals[approval_id] = found
        audit = await run_audit(console.stores.audit, account.tenant, run.id, since=run.created_at)
        return console.render(
            request,
            "run.html",
            run=run,
            goal=goal(run),
            rows=timeline(run, audit.entries, approvals),
            audit=audit,
            approvals=approvals,
            closing=_closing_label(run),
            account=account,
            csrf=session.csrf,
        )

    return [
        Route("/runs", console.guarded(runs, post=False), methods=["GET"], name="runs"),
        # A run id is any text a host or an MCP client chose, '/' included: the rest of the path is it.
        Route("/runs/{run_id:path}", console.guarded(run_page, post=False), methods=["GET"], name="run_page"),
        # The same page for the ids a browser would resolve as a path's `.` or `..` (`/run?id=..`).
        Route("/run", console.guarded(run_page, post=False), methods=["GET"], name="run_by_query"),
    ]
