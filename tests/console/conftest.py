"""Console tests: a real SQLite store, a shop with a high-risk refund, accounts in that store."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Annotated, Any

import httpx
import pytest
from pydantic import Field

from maitre import Gate, Principal, Toolbox
from maitre.console.accounts import Account, SQLAccountStore, account_store, hash_password
from maitre.console.app import create_app
from maitre.console.security import SignInThrottle
from maitre.stores import Stores, open_stores

SECRET = "test-secret-0123456789abcdef"
PASSWORD = "correct horse battery staple"


@dataclass
class Shop:
    refunds: list[dict[str, Any]] = field(default_factory=list)
    box: Toolbox = field(default_factory=Toolbox)


@pytest.fixture
def shop() -> Shop:
    shop = Shop()

    @shop.box.tool(effect="write", risk="high")
    def issue_refund(
        order_id: str,
        amount: Annotated[Decimal, Field(gt=0, le=5000, decimal_places=2)],
        note: str = "",
    ) -> str:
        """Refund an order."""
        shop.refunds.append({"order_id": order_id, "amount": str(amount), "note": note})
        return f"refunded {amount} on {order_id}"

    return shop


@pytest.fixture
async def stores(tmp_path: Any) -> AsyncIterator[Stores]:
    opened = await open_stores(str(tmp_path / "console.db"))
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def accounts(stores: Stores) -> SQLAccountStore:
    store = account_store(stores)  # the table beside the gate's, in the same SQLite file
    assert isinstance(store, SQLAccountStore)
    hashed = hash_password(PASSWORD)  # one hash for every account keeps the tests fast
    for name, tenant, roles in [
        ("bob", "acme", {"approver"}),
        ("alice", "acme", {"approver"}),
        ("carol", "acme", set()),
        ("eve", "evil", {"approver"}),
    ]:
        await store.put(Account(name=name, tenant=tenant, roles=frozenset(roles), password_hash=hashed))
    return store


@pytest.fixture
def gate(shop: Shop, stores: Stores) -> Gate:
    return Gate(shop.box, stores=stores)


@pytest.fixture
def throttle() -> SignInThrottle:
    return SignInThrottle(limit=3, window_s=60)


@pytest.fixture
async def app(stores: Stores, accounts: SQLAccountStore, shop: Shop, throttle: SignInThrottle) -> Any:
    return create_app(stores, secret=SECRET, accounts=accounts, toolbox=shop.box, throttle=throttle)


@pytest.fixture
def client_for(app: Any) -> Any:
    def make(base_url: str = "http://testserver") -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)

    return make


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "the page has no CSRF field"
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, name: str, password: str = PASSWORD) -> httpx.Response:
    form = await client.get("/sign-in")
    return await client.post(
        "/sign-in", data={"csrf": csrf_of(form.text), "name": name, "password": password}
    )


@dataclass
class Pending:
    """A call the gate sent to a person: retry it with `approval_id` to run it."""

    approval_id: str
    call: Any
    principal: Principal
    run: Any

    async def retry(self, gate: Gate) -> Any:
        return await gate.call(self.call, self.principal, self.run, approval_id=self.approval_id)


async def pending_refund(gate: Gate, arguments: dict[str, Any] | None = None, user: str = "alice") -> Pending:
    """An agent run of `user` (tenant acme) asks for a refund; the gate answers APPROVAL_REQUIRED."""
    from maitre import ToolCall

    principal = Principal(user=user, tenant="acme")
    run = gate.new_run(principal)
    call = ToolCall(
        id="c1", name="issue_refund", arguments=arguments or {"order_id": "ORD-1", "amount": "12.50"}
    )
    result = await gate.call(call, principal, run)
    assert result.error is not None and result.error.code == "APPROVAL_REQUIRED"
    return Pending(result.error.details["approval_id"], call, principal, run)
