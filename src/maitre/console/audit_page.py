"""The audit page: the tenant's entries, filtered and paged, and the chain verified on every view.

The audit chain is one chain for the whole store, every tenant's entries in one sequence, so it is
verified whole (with `maitre.audit.ChainVerifier`, the verifier `maitre audit verify` runs) while the
page *shows* only the signed-in person's tenant. When the first bad entry belongs to another tenant,
the page gives its number and nothing of its content.

Each view stays bounded: it verifies at most the newest `VERIFY_LIMIT` entries (about 0.15 to 0.3 s
per 10,000 on SQLite) and says so when the chain is longer, and the list looks through at most
`SCAN_LIMIT` entries per page, newest first, with a link to continue further back. An anchor (`SEQ:HASH`)
a person kept from an earlier view can be given to check the log against it.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlencode

from ..audit import GENESIS_HASH, AuditEntry, ChainVerifier, VerifyReport

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from ..stores import AuditStore
    from .accounts import Account
    from .security import Session
    from .web import Console

__all__ = [
    "AuditFilter",
    "AuditPage",
    "ChainStatus",
    "DECISIONS",
    "PAGE_SIZE",
    "RUN_ENTRIES_LIMIT",
    "RUN_SCAN_LIMIT",
    "RunAudit",
    "SCAN_LIMIT",
    "VERIFY_LIMIT",
    "parse_anchor",
    "parse_filter",
    "routes",
    "run_audit",
    "run_entries",
    "survey",
]

PAGE_SIZE = 50
"""Entries shown per page."""
VERIFY_LIMIT = 20_000
"""At most this many of the newest entries are verified per view."""
SCAN_LIMIT = 20_000
"""At most this many entries are looked through to fill one page of the list."""
RUN_ENTRIES_LIMIT = 5_000
"""A run page shows at most this many of the gate's entries of the run."""
RUN_SCAN_LIMIT = 1_000_000
"""At most this many entries, from a run's start on, are looked through for the run's own."""
_BATCH = 2_000
_RUN_SLACK_S = 300.0
"""Entries are looked for from this long before a run was created (clocks of several hosts)."""

DECISIONS = (
    "allow",
    "deny",
    "approval_required",
    "approved",
    "approval_invalid",
    "approval_mismatch",
    "approval_denied",
    "approval_expired",
    "approval_used",
    "approval_refused",
    "approval_decided",
    "replayed",
    "conflict",
    "uncertain",
    "rate_limited",
    "budget_exceeded",
    "error",
    "refused",
)
"""What an entry's `decision` can say: the gate's decisions and a person's `approval_decided`."""


@dataclass(frozen=True, kw_only=True)
class AuditFilter:
    """What the person asked to see; every field set must match (exact text, time as [since, until))."""

    run: str | None = None
    tool: str | None = None
    decision: str | None = None
    user: str | None = None
    since: float | None = None
    """Unix time, inclusive."""
    until: float | None = None
    """Unix time, exclusive."""

    def matches(self, entry: AuditEntry) -> bool:
        return (
            (self.run is None or entry.run_id == self.run)
            and (self.tool is None or entry.tool == self.tool)
            and (self.decision is None or entry.decision == self.decision)
            and (self.user is None or entry.user == self.user)
            and (self.since is None or entry.at >= self.since)
            and (self.until is None or entry.at < self.until)
        )


_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_SEQ = re.compile(r"[0-9]{1,19}")
"""An entry number as the page writes it: ASCII digits (`str.isdigit` also takes '²' and '١')."""
_ANCHOR = re.compile(r"([0-9]{1,19}):([0-9a-fA-F]{64})")
_MAX_SEQ = 2**63 - 1
"""The largest seq a store holds (Postgres `bigint`)."""


def _moment(text: str, *, end: bool) -> float:
    """An ISO date or date-time (UTC unless it says otherwise); a bare date as `to` means its end.

    Raises ValueError for text that is not one, OverflowError for one outside what a date can be."""
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    moment = parsed.timestamp()
    if end and _DATE.fullmatch(text):  # YYYY-MM-DD: the whole day is included (9999-12-31 too)
        moment += timedelta(days=1).total_seconds()
    return moment


def _seq(text: str) -> int | None:
    """An entry number (1 to the largest a store holds) written in ASCII digits, else None."""
    if not _SEQ.fullmatch(text):
        return None
    value = int(text)
    return value if 1 <= value <= _MAX_SEQ else None


def parse_filter(params: Mapping[str, str]) -> tuple[AuditFilter, list[str]]:
    """The filter from the page's query (`run`, `tool`, `decision`, `user`, `from`, `to`) and what is wrong."""

    def text(name: str) -> str | None:
        value = params.get(name, "").strip()
        return value[:200] or None

    errors: list[str] = []
    moments: dict[str, float | None] = {"from": None, "to": None}
    for name in moments:
        value = text(name)
        if value is None:
            continue
        try:
            moments[name] = _moment(value, end=name == "to")
        except OverflowError:
            errors.append(f"{name!r} is outside the dates the log can hold (years 1 to 9999).")
        except ValueError:
            errors.append(f"{name!r} is not a date or time (write it as 2026-12-01 or 2026-12-01T09:30).")
    decision = text("decision")
    if decision is not None and decision not in DECISIONS:
        errors.append(f"{decision!r} is not a decision the audit log records.")
    found = AuditFilter(
        run=text("run"),
        tool=text("tool"),
        decision=decision,
        user=text("user"),
        since=moments["from"],
        until=moments["to"],
    )
    return found, errors


def parse_anchor(text: str) -> tuple[int, str] | None:
    """`SEQ:HASH` (what the page and `maitre audit verify` print), or None if it is not one."""
    found = _ANCHOR.fullmatch(text.strip())
    seq = _seq(found.group(1)) if found else None
    if found is None or seq is None:
        return None
    return seq, found.group(2).lower()


async def _walk(store: AuditStore, lo: int, hi: int, visit: Callable[[AuditEntry], bool]) -> None:
    """Feed the entries with seq in [lo, hi] to `visit` in seq order, until it returns False."""
    since = lo - 1
    while since < hi:
        page = await store.entries(since_seq=since, limit=min(_BATCH, hi - since))
        for entry in page:
            if entry.seq > hi or not visit(entry):
                return
        if not page:
            return
        since = page[-1].seq


async def _entry_at(store: AuditStore, seq: int) -> AuditEntry | None:
    found = await store.entries(since_seq=seq - 1, limit=1)
    return found[0] if found and found[0].seq == seq else None


@dataclass(frozen=True, kw_only=True)
class ChainStatus:
    """The chain's verdict as the page states it."""

    total: int
    """The seq of the newest entry (how many entries the chain has, when none is missing)."""
    first_checked: int
    """The seq verification started at (1: the whole chain)."""
    report: VerifyReport
    own_bad: bool = False
    """The first bad entry belongs to the person's tenant (or is missing), so what is wrong is shown."""
    anchor: tuple[int, str] | None = None
    """The anchor the person gave."""
    anchor_checked: bool = False
    """The anchor was inside the verified entries and compared."""

    @property
    def whole(self) -> bool:
        """Every entry from the first was verified."""
        return self.first_checked <= 1

    @property
    def head(self) -> str:
        """The anchor to keep, as `SEQ:HASH`."""
        return f"{self.report.last_seq}:{self.report.last_hash}"

    @property
    def shown_reason(self) -> str | None:
        """What is wrong at the first bad entry, or None when that entry is another tenant's."""
        return self.report.reason if self.own_bad else None


class _Verifying:
    """Feeds entries from `start` on to a `ChainVerifier` (set up once the first entry is seen)."""

    def __init__(self, start: int, anchor: tuple[int, str] | None) -> None:
        self.start = start
        self.anchor = anchor
        self.verifier: ChainVerifier | None = None

    def feed(self, entry: AuditEntry) -> None:
        if entry.seq < self.start:
            return
        if self.verifier is None:
            # The window's first entry is trusted to link where it says; from there each link is checked.
            after = GENESIS_HASH if self.start <= 1 else entry.prev_hash
            self.verifier = ChainVerifier(after_seq=self.start - 1, after_hash=after, anchor=self.anchor)
        self.verifier.feed(entry)

    def report(self) -> VerifyReport:
        verifier = self.verifier or ChainVerifier(after_seq=self.start - 1, anchor=self.anchor)
        return verifier.report()


def _window(total: int, anchor: tuple[int, str] | None, limit: int) -> tuple[int, tuple[int, str] | None]:
    """Where verification starts (the newest `limit` entries), and the anchor it can check (None
    when the anchor is older than that: comparing it would mean verifying more than a view may)."""
    start = max(1, total - limit + 1)
    return start, anchor if anchor is None or anchor[0] >= start else None


async def _tenant_of(store: AuditStore, seq: int | None, tenant: str) -> bool:
    """True when entry `seq` is the tenant's, or does not exist (a gap names no one's content)."""
    if seq is None:
        return True
    entry = await _entry_at(store, seq)
    return entry is None or entry.tenant == tenant


@dataclass(frozen=True, kw_only=True)
class AuditPage:
    """One page of the tenant's entries, newest first."""

    entries: list[AuditEntry]
    older: int | None
    """The `before` cursor of the next (older) page, or None when nothing older is left."""
    scanned_from: int
    """The lowest seq looked at for this page."""
    scanned_to: int


class _Collecting:
    """Keeps the newest `size` entries of `tenant` matching `wanted` with seq in [lo, hi]."""

    def __init__(self, tenant: str, wanted: AuditFilter, lo: int, hi: int, size: int) -> None:
        self.tenant, self.wanted, self.lo, self.hi = tenant, wanted, lo, hi
        self.kept: deque[AuditEntry] = deque(maxlen=size)
        self.matched = 0

    def feed(self, entry: AuditEntry) -> bool:
        """Keep `entry` if it is wanted; True: the walk goes on."""
        if self.lo <= entry.seq <= self.hi and entry.tenant == self.tenant and self.wanted.matches(entry):
            self.kept.append(entry)
            self.matched += 1
        return True

    def page(self) -> AuditPage:
        entries = list(reversed(self.kept))
        older: int | None = None
        if self.matched > len(entries):
            older = entries[-1].seq
        elif self.lo > 1:
            older = self.lo
        return AuditPage(entries=entries, older=older, scanned_from=self.lo, scanned_to=self.hi)


async def survey(
    store: AuditStore,
    tenant: str,
    wanted: AuditFilter,
    *,
    anchor: tuple[int, str] | None = None,
    before: int | None = None,
    limit: int | None = None,
) -> tuple[ChainStatus, AuditPage]:
    """The chain's verdict (the newest `limit` entries, `VERIFY_LIMIT` by default, verified) and the
    newest `PAGE_SIZE` entries of `tenant` matching `wanted` with seq below `before`.

    The two ranges are read in one pass when they touch (always, for the newest page)."""
    last = await store.last()
    total = 0 if last is None else last.seq
    start, checkable = _window(total, anchor, VERIFY_LIMIT if limit is None else limit)
    verifying = _Verifying(start, checkable)
    hi = total if before is None else min(total, before - 1)
    collect = _Collecting(tenant, wanted, max(1, hi - SCAN_LIMIT + 1), hi, PAGE_SIZE)

    def both(entry: AuditEntry) -> bool:
        verifying.feed(entry)
        collect.feed(entry)
        return True

    if collect.hi >= start - 1:  # the ranges touch: one pass over their union
        await _walk(store, min(start, collect.lo), total, both)
    else:
        await _walk(store, start, total, both)
        await _walk(store, collect.lo, collect.hi, collect.feed)
    report = verifying.report()
    status = ChainStatus(
        total=total,
        first_checked=start,
        report=report,
        own_bad=await _tenant_of(store, report.first_bad_seq, tenant),
        anchor=anchor,
        anchor_checked=checkable is not None,
    )
    return status, collect.page()


@runtime_checkable
class _ByRun(Protocol):
    """An audit store that reads one run's entries itself (`SQLAuditStore.entries_for_run`)."""

    async def entries_for_run(
        self,
        run_id: str,
        *,
        tenant: str | None = None,
        since_seq: int = 0,
        until_seq: int | None = None,
        limit: int | None = None,
    ) -> list[AuditEntry]: ...


@dataclass(frozen=True, kw_only=True)
class RunAudit:
    """The gate's entries of one run, and how far the log was looked through for them."""

    entries: list[AuditEntry]
    looked_to: int
    """The newest seq looked at."""
    newest: int
    """The log's newest seq (`looked_to` below it: later entries of the run, if any, are not here)."""
    limit: int

    @property
    def complete(self) -> bool:
        """Every entry of the run since its start is here."""
        return self.looked_to >= self.newest and len(self.entries) < self.limit


async def _first_at(store: AuditStore, last_seq: int, moment: float) -> int:
    """The seq of the first entry at or after `moment` (entries are appended in time order)."""
    lo, hi = 1, last_seq
    while lo < hi:
        mid = (lo + hi) // 2
        found = await store.entries(since_seq=mid - 1, limit=1)
        if not found or found[0].at >= moment:
            hi = mid
        else:
            lo = mid + 1
    return lo


async def run_audit(
    store: AuditStore,
    tenant: str,
    run_id: str,
    *,
    since: float,
    limit: int = RUN_ENTRIES_LIMIT,
    scan_limit: int | None = None,
) -> RunAudit:
    """The tenant's entries of run `run_id` (at most `limit`), looked for among the `scan_limit`
    entries appended from the run's start (`since`, less a slack for clocks) on.

    `scan_limit` defaults to `RUN_SCAN_LIMIT`. The start is found by bisecting on seq. The run's entries are then read by the store's own query
    by run when it has one (the SQL stores), else page by page; either way only the run's entries
    count towards `limit`, however much other runs and tenants wrote in between."""
    last = await store.last()
    if last is None:
        return RunAudit(entries=[], looked_to=0, newest=0, limit=limit)
    lo = await _first_at(store, last.seq, since - _RUN_SLACK_S)
    hi = min(last.seq, lo + (RUN_SCAN_LIMIT if scan_limit is None else scan_limit) - 1)
    if isinstance(store, _ByRun):
        found = await store.entries_for_run(
            run_id, tenant=tenant, since_seq=lo - 1, until_seq=hi, limit=limit
        )
        return RunAudit(entries=found, looked_to=hi, newest=last.seq, limit=limit)
    kept: list[AuditEntry] = []
    looked = lo - 1

    def keep(entry: AuditEntry) -> bool:
        nonlocal looked
        looked = entry.seq
        if entry.run_id == run_id and entry.tenant == tenant:
            kept.append(entry)
        return len(kept) < limit

    await _walk(store, lo, hi, keep)
    return RunAudit(entries=kept, looked_to=hi if len(kept) < limit else looked, newest=last.seq, limit=limit)


async def run_entries(
    store: AuditStore, tenant: str, run_id: str, *, since: float, limit: int = RUN_ENTRIES_LIMIT
) -> list[AuditEntry]:
    """The tenant's entries of run `run_id` since the run's start: `run_audit(...).entries`."""
    return (await run_audit(store, tenant, run_id, since=since, limit=limit)).entries


def _short(text: str | None) -> str:
    """A digest cut to its first 12 characters (enough to compare by eye, too little to look up)."""
    if text is None:
        return ""
    if len(text) >= 64 and all(c in "0123456789abcdef:h" for c in text):
        return text[:12] + "\u2026"
    return text


def _query(params: Mapping[str, str], **changes: Any) -> str:
    merged = {**params, **{key: str(value) for key, value in changes.items() if value is not None}}
    return urlencode({key: value for key, value in merged.items() if value})


def routes(console: Console) -> list[Any]:
    from starlette.routing import Route

    async def audit(
        request: Request, session: Session, account: Account, fields: Mapping[str, str]
    ) -> Response:
        params = {
            key: request.query_params.get(key, "")
            for key in ("run", "tool", "decision", "user", "from", "to")
        }
        wanted, errors = parse_filter(params)
        anchor_text = request.query_params.get("anchor", "").strip()
        anchor = parse_anchor(anchor_text) if anchor_text else None
        if anchor_text and anchor is None:
            errors.append("The anchor must be SEQ:HASH: a number, a colon, 64 hex characters.")
        before_text = request.query_params.get("before", "").strip()
        before = _seq(before_text) if before_text else None
        if before_text and before is None:
            errors.append("'before' must be an entry number: digits, from 1.")
        started = time.perf_counter()
        status, page = await survey(
            console.stores.audit, account.tenant, wanted, anchor=anchor, before=before
        )
        took_ms = (time.perf_counter() - started) * 1000
        if anchor is not None:
            params["anchor"] = anchor_text
        return console.render(
            request,
            "audit.html",
            400 if errors else 200,
            account=account,
            csrf=session.csrf,
            chain=status,
            page=page if not errors else None,
            params=params,
            errors=errors,
            decisions=DECISIONS,
            older_query=_query(params, before=page.older) if page.older else None,
            newest_query=_query(params),
            took_ms=took_ms,
            short=_short,
            verify_limit=VERIFY_LIMIT,
        )

    return [Route("/audit", console.guarded(audit, post=False), methods=["GET"], name="audit")]
