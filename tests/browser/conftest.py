"""Browser tests: Debian's Chromium, driven by Playwright, against the console served by uvicorn.

One browser for the package (not the session: while Playwright's sync API is open it marks the
thread's event loop as running, which the async tests elsewhere cannot share) and a fresh context
(cookies, storage) per person per test. The console runs on a background event loop (an anyio
blocking portal) over a real SQLite file in tmp_path, and the test's own setup (accounts, agent
runs, resume workers) runs on that same loop through `world.call(...)`. The tests skip, saying why,
only when no `chromium` is on PATH (`apt-get install chromium`; `.ci/run` installs it).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field

from maitre import Gate, Principal, Toolbox, ToolCall
from maitre.agent import Agent, Limits, Run, RunStatus
from maitre.messages import UserMessage
from maitre.models import Rule, ScriptedModel, after_tool, call, last_tool_result, last_user_says, tool_error

CHROMIUM = shutil.which("chromium")
ROOT = Path(__file__).resolve().parents[2]
ARTEFACTS = ROOT / ".test-artifacts" / "browser"
"""Failure screenshots and every screenshot taken (gitignored)."""
DOCS = ROOT / "docs" / "console"
"""The screenshots the README shows."""
VIEWPORT = {"width": 1280, "height": 900}
SECRET = "browser-test-secret-0123456789"
PASSWORD = "correct horse battery staple"
PEOPLE = [
    ("bob", "acme", {"approver"}),
    ("alice", "acme", {"approver"}),
    ("carol", "acme", set()),
    ("eve", "evil", {"approver"}),
]
"""bob and alice approve for acme; carol (acme) only asks; eve approves for another tenant."""


@functools.cache
def password_hash() -> str:
    from maitre.console.accounts import hash_password

    return hash_password(PASSWORD)  # one argon2 hash for every account keeps the suite fast


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


# -- the shop an agent works in -------------------------------------------------------------------------


@dataclass
class Shop:
    """A toolbox whose high-risk refund writes to `refunds`, so a test sees what really ran."""

    refunds: list[tuple[str, str]] = field(default_factory=list)
    box: Toolbox = field(default_factory=lambda: Toolbox("shop"))


def make_shop() -> Shop:
    shop = Shop()

    @shop.box.tool
    def get_order(order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")]) -> dict[str, Any]:
        """Look up an order."""
        return {"order_id": order_id, "status": "delivered", "total_inr": "1200.00"}

    @shop.box.tool(effect="write", risk="high")
    def issue_refund(
        order_id: str,
        amount: Annotated[Decimal, Field(gt=0, le=5000, decimal_places=2)],
        note: str = "",
    ) -> str:
        """Refund an order (a person approves it first)."""
        shop.refunds.append((order_id, str(amount)))
        return f"Refunded {amount} INR for {order_id}."

    return shop


def _goal(request: Any) -> str:
    return next(m.content for m in reversed(request.messages) if isinstance(m, UserMessage))


def refund_model() -> ScriptedModel:
    """Looks the order up, then asks for the refund the user named: 'refund 1200.00 on A1042'."""

    def order(request: Any) -> str:
        return re.findall(r"A[0-9]{4}", _goal(request))[0]

    def amount(request: Any) -> str:
        return re.findall(r"[0-9]+\.[0-9]{2}", _goal(request))[0]

    return ScriptedModel(
        [
            Rule(
                "look up",
                when=last_user_says("refund"),
                then=lambda r: call("shop.get_order", order_id=order(r)),
            ),
            Rule(
                "refund",
                when=after_tool("get_order", ok=True),
                then=lambda r: call("shop.issue_refund", order_id=order(r), amount=amount(r)),
            ),
            Rule(
                "denied",
                when=tool_error("APPROVAL_DENIED"),
                then=lambda r: f"Not refunded: {last_tool_result(r).content}",  # type: ignore[union-attr]
            ),
            Rule(
                "done",
                when=after_tool("issue_refund", ok=True),
                then=lambda r: f"Done: {last_tool_result(r).content}",  # type: ignore[union-attr]
            ),
        ]
    )


# -- the console, served ---------------------------------------------------------------------------------


@dataclass
class World:
    """The console at `url` over `stores`, and a way to run the test's async setup on its loop."""

    portal: Any
    stores: Any
    shop: Shop
    url: str
    db: Path
    """The SQLite file the console and the agents share."""

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`await fn(*args)` on the console's loop, from the test."""
        return self.portal.call(fn, *args)

    def agent(self) -> Agent:
        return Agent(refund_model(), self.shop.box, stores=self.stores, limits=Limits(max_steps=6))

    def start_run(self, goal: str, user: str, tenant: str = "acme", run_id: str | None = None) -> Run:
        """An agent run of `user` that pauses on its refund's approval."""
        principal = Principal(user=user, tenant=tenant)
        run = self.call(functools.partial(self.agent().run, goal, principal, run_id=run_id))
        assert run.paused, run.final_text
        return run

    def pending_call(self, arguments: dict[str, Any], user: str = "carol", ttl_s: float = 3600.0) -> str:
        """A direct gate call (no agent) of `user` that needs approval; returns its approval id."""
        gate = Gate(self.shop.box, stores=self.stores, approval_ttl_s=ttl_s)
        principal = Principal(user=user, tenant="acme")

        async def ask() -> str:
            result = await gate.call(
                ToolCall(id="c1", name="shop.issue_refund", arguments=arguments),
                principal,
                gate.new_run(principal),
            )
            assert result.error is not None and result.error.code == "APPROVAL_REQUIRED", result.content
            return str(result.error.details["approval_id"])

        return str(self.call(ask))

    def approval(self, approval_id: str) -> Any:
        return self.call(self.stores.approvals.get, approval_id)

    def saved_run(self, run_id: str) -> Run:
        saved = self.call(self.stores.runs.load, run_id)
        assert saved is not None, run_id
        return Run.from_json(saved.state_json)

    def wait_for_run(self, run_id: str, *, timeout_s: float = 15.0) -> Run:
        """The run once it has ended (a resume worker took it on and finished it), within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while (run := self.saved_run(run_id)).status in (RunStatus.PAUSED, RunStatus.RUNNING):
            assert time.monotonic() < deadline, f"run {run_id} is still paused after {timeout_s} s"
            time.sleep(0.05)
        return run


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        why = "no `chromium` on PATH: the browser tests need it (apt-get install -y chromium)"
        if os.environ.get("MAITRE_BROWSER_TESTS") == "required":  # .ci/run: never a silent skip
            pytest.fail(why)
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@contextmanager
def serving(tmp_path: Path, sock: socket.socket | None = None, **options: Any) -> Iterator[World]:
    """The console on `sock` (default: a free port) over a new SQLite file; `options` go to create_app."""
    import uvicorn
    from anyio.from_thread import start_blocking_portal

    from maitre.console.accounts import Account, account_store
    from maitre.console.app import create_app
    from maitre.stores import open_stores

    shop = make_shop()
    db = tmp_path / "console.db"
    sock = sock or _free_socket()
    port = sock.getsockname()[1]
    with start_blocking_portal() as portal:
        stores = portal.call(open_stores, str(db))
        people = account_store(stores)
        for name, tenant, roles in PEOPLE:
            account = Account(name=name, tenant=tenant, roles=frozenset(roles), password_hash=password_hash())
            portal.call(people.put, account)
        app = create_app(stores, secret=SECRET, accounts=people, toolbox=shop.box, **options)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
        served = portal.start_task_soon(server.serve, [sock])
        deadline = time.monotonic() + 10
        while not server.started:
            assert not served.done(), served.exception()
            assert time.monotonic() < deadline, "the console did not start"
            time.sleep(0.01)
        try:
            yield World(portal=portal, stores=stores, shop=shop, url=f"http://127.0.0.1:{port}", db=db)
        finally:
            server.should_exit = True
            served.result(timeout=10)
            portal.call(stores.close)


@pytest.fixture
def world(browser: Any, tmp_path: Path) -> Iterator[World]:
    with serving(tmp_path) as served:
        yield served


@pytest.fixture
def oidc_world(browser: Any, tmp_path: Path) -> Iterator[tuple[World, Any]]:
    """The console signing people in at our own small OpenID Provider (tests/console/idp.py)."""
    from console.idp import running_idp  # tests/ is on sys.path: its packages import by name
    from maitre.console.oidc import OIDCSettings

    sock = _free_socket()
    callback = f"http://127.0.0.1:{sock.getsockname()[1]}/sign-in/oidc/callback"
    with running_idp(redirect_uris=[callback]) as idp:
        settings = OIDCSettings(issuer=idp.issuer, client_id="maitre-console", redirect_uri=callback)
        with serving(tmp_path, sock, oidc=settings) as served:
            yield served, idp


@pytest.fixture
def workers(world: World) -> Iterator[None]:
    """Two resume workers beside the console, as `maitre runs worker` would run them."""
    import anyio

    from maitre.agent import ResumeWorker

    async def event() -> anyio.Event:
        return anyio.Event()

    stop = world.call(event)
    running = [
        world.portal.start_task_soon(ResumeWorker(world.agent(), poll_s=0.05).run_forever, stop)
        for _ in range(2)
    ]
    yield
    world.portal.call(stop.set)
    for worker in running:
        worker.result(timeout=10)


@dataclass
class People:
    """Opens one browser context per person, so each has their own cookies."""

    browser: Any
    world: World
    opened: list[Any] = field(default_factory=list)

    def page(self, *, javascript: bool = True) -> Any:
        context = self.browser.new_context(
            base_url=self.world.url, viewport=VIEWPORT, java_script_enabled=javascript
        )
        context.set_default_timeout(5_000)
        self.opened.append(context)
        return context.new_page()

    def signed_in(self, name: str, *, javascript: bool = True) -> Any:
        page = self.page(javascript=javascript)
        sign_in(page, name)
        return page


def sign_in(page: Any, name: str, password: str = PASSWORD) -> None:
    from playwright.sync_api import expect

    page.goto("/sign-in")
    page.get_by_label("Account").fill(name)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Pending approvals")).to_be_visible()


def _people(browser: Any, world: World, request: pytest.FixtureRequest) -> Iterator[People]:
    opened = People(browser, world)
    yield opened
    report = getattr(request.node, "report_call", None)
    failed = report is not None and report.failed
    for old in ARTEFACTS.glob(f"FAILED-{request.node.name}-*.png"):
        old.unlink()  # from an earlier run
    for number, context in enumerate(opened.opened):
        if failed:  # what each person's browser showed when the test failed
            ARTEFACTS.mkdir(parents=True, exist_ok=True)
            for page in context.pages:
                shot = ARTEFACTS / f"FAILED-{request.node.name}-{number}.png"
                page.screenshot(path=str(shot), full_page=True)
        context.close()


@pytest.fixture
def people(browser: Any, world: World, request: pytest.FixtureRequest) -> Iterator[People]:
    yield from _people(browser, world, request)


@pytest.fixture
def oidc_people(
    browser: Any, oidc_world: tuple[World, Any], request: pytest.FixtureRequest
) -> Iterator[People]:
    yield from _people(browser, oidc_world[0], request)


def screenshot(page: Any, name: str) -> Path:
    """Keep a screenshot as a test artefact; refresh the README's `docs/console/NAME.png` when asked.

    Times and ids differ on every run, so the committed picture is rewritten only when it is missing
    or when `MAITRE_SCREENSHOTS=docs` (`make screenshots`), not by every `make test`.
    """
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shot = page.screenshot(path=str(ARTEFACTS / f"{name}.png"))
    kept = DOCS / f"{name}.png"
    if os.environ.get("MAITRE_SCREENSHOTS") == "docs" or not kept.exists():
        DOCS.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(shot)
    return kept


# -- a page on another site, for CSRF -----------------------------------------------------------------------


@dataclass
class Attacker:
    """A tiny server on another port that serves one page (`html`), as a hostile site would."""

    url: str
    html: str = ""


@pytest.fixture
def attacker() -> Iterator[Attacker]:
    site = Attacker(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = site.html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    site.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
