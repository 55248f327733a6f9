"""The edit-arguments form: built from the tool's JSON Schema, read back with the schema's types,
validated by the gate, confirmed as a diff and bound to the new hash; refusals and attacks fail."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from html.parser import HTMLParser
from typing import Any, Literal
from urllib.parse import parse_qs, urlencode

import httpx
import pytest
from pydantic import BaseModel, Field

from maitre import Gate, Principal, Toolbox, ToolCall
from maitre.console.app import create_app
from maitre.console.forms import build_form, diff_arguments, field_messages, read_form

from .conftest import SECRET, csrf_of, pending_refund, sign_in

pytestmark = pytest.mark.anyio


# ------------------------------------------------------------------------------ a browser's form


class Forms(HTMLParser):
    """The forms of a page as a browser submits them (inputs, checkboxes, selects, textareas)."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[dict[str, Any]] = []
        self._select: dict[str, Any] | None = None
        self._option: dict[str, Any] | None = None
        self._textarea: dict[str, Any] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v if v is not None else "") for k, v in attrs}
        if tag == "form":
            self.forms.append({"action": a.get("action", ""), "controls": []})
            return
        if not self.forms:
            return
        controls = self.forms[-1]["controls"]
        if tag == "input":
            controls.append({"tag": "input", **a})
        elif tag == "button":
            controls.append({"tag": "button", **a})
        elif tag == "select":
            self._select = {"tag": "select", **a, "options": []}
            controls.append(self._select)
        elif tag == "option" and self._select is not None:
            self._option = {"value": a.get("value"), "selected": "selected" in a, "text": ""}
            self._select["options"].append(self._option)
        elif tag == "textarea":
            self._textarea = {"tag": "textarea", **a, "text": ""}
            controls.append(self._textarea)

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "option":
            self._option = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._textarea["text"] += data
        elif self._option is not None:
            self._option["text"] += data

    def form(self, action_ends: str) -> dict[str, Any]:
        found = [f for f in self.forms if f["action"].endswith(action_ends)]
        assert len(found) == 1, f"no single form posting to ...{action_ends}"
        return found[0]


def submission(form: dict[str, Any], click: tuple[str, str] | None = None) -> list[tuple[str, str]]:
    """The (name, value) pairs a browser sends for `form` when the button `click` is pressed."""
    pairs: list[tuple[str, str]] = []
    for c in form["controls"]:
        name = c.get("name")
        if not name:
            continue
        if c["tag"] == "input":
            kind = c.get("type", "text")
            if kind == "checkbox":
                if "checked" in c:
                    pairs.append((name, c.get("value") or "on"))
            else:
                pairs.append((name, c.get("value", "")))
        elif c["tag"] == "textarea":
            pairs.append((name, c["text"].replace("\r\n", "\n").replace("\n", "\r\n")))
        elif c["tag"] == "select":
            options = c["options"]
            chosen = [o for o in options if o["selected"]]
            if "multiple" not in c and not chosen and options:
                chosen = options[:1]
            pairs.extend((name, o["value"] if o["value"] is not None else o["text"]) for o in chosen)
        elif c["tag"] == "button" and click is not None and (name, c.get("value", "")) == click:
            pairs.append((name, c.get("value", "")))
    return pairs


def set_value(pairs: list[tuple[str, str]], name: str, value: str | None) -> list[tuple[str, str]]:
    """Type `value` into the field `name` (None clears a checkbox; a new name is a ticked box)."""
    kept = [(n, v) for n, v in pairs if n != name]
    return kept if value is None else [*kept, (name, value)]


async def post_pairs(client: httpx.AsyncClient, url: str, pairs: list[tuple[str, str]]) -> httpx.Response:
    return await client.post(
        url, content=urlencode(pairs), headers={"content-type": "application/x-www-form-urlencoded"}
    )


# ------------------------------------------------------------------------------ a nested tool


class Address(BaseModel):
    city: str
    zip: str | None = None


class Item(BaseModel):
    sku: str
    qty: int = Field(ge=1)
    price: Decimal = Field(gt=0, decimal_places=2)


class RefundRequest(BaseModel):  # seed 003
    order_id: str = Field(pattern=r"^ORD-[0-9]{8}$")
    reason: Literal["duplicate_charge", "not_received", "quality_issue", "other"]
    amount: Decimal = Field(gt=0, max_digits=10, decimal_places=2)
    idempotency_key: str = Field(min_length=16, max_length=128)


ORDER = {
    "request": {
        "order_id": "ORD-00000001",
        "reason": "not_received",
        "amount": "12.50",
        "idempotency_key": "key-0123456789abcdef",
    },
    "address": {"city": "Lyon", "zip": None},
    "items": [{"sku": "A-1", "qty": 1, "price": "12.50"}],
    "tags": ["urgent", "vip"],
    "express": False,
    "weight": 1.5,
    "priority": 2,
    "gift": None,
    "meta": {"source": "chat"},
    "note": "line one\nline two",
}


@pytest.fixture
def orders() -> Toolbox:
    box = Toolbox()

    @box.tool(effect="write", risk="high")
    def place_refund_order(
        request: RefundRequest,
        address: Address,
        items: list[Item],
        tags: list[str],
        express: bool = False,
        weight: float | None = None,
        priority: Literal[1, 2, 3] = 1,
        gift: Address | None = None,
        meta: dict[str, str] | None = None,
        note: str = "",
    ) -> str:
        """Refund an order and ship the replacement."""
        return "ok"

    return box


def schema_of(box: Toolbox) -> dict[str, Any]:
    tool = box.get("place_refund_order")
    assert tool is not None
    return tool.input_schema


def walk(fields: list[Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for f in fields:
        found[f.name] = f
        found.update(walk(f.children))
    return found


def test_the_form_follows_the_schema_nested_objects_arrays_enums_optional_and_decimal(orders):
    form = build_form(schema_of(orders), ORDER)
    assert form.fields is not None and not form.as_json
    f = walk(form.fields)
    assert f["args.request"].kind == "object" and f["args.request"].required
    assert f["args.request.reason"].kind == "choice"
    assert [o.value for o in f["args.request.reason"].options] == [
        '"duplicate_charge"',
        '"not_received"',
        '"quality_issue"',
        '"other"',
    ]
    assert f["args.request.reason"].value == '"not_received"'
    assert f["args.request.amount"].kind == "decimal" and f["args.request.amount"].value == "12.50"
    assert f["args.address.zip"].kind == "text" and f["args.address.zip"].optional
    assert f["args.items"].kind == "array" and len(f["args.items"].children) == 2  # the item + an empty row
    assert f["args.items.0.qty"].kind == "integer" and f["args.items.0.qty"].value == "1"
    assert (
        f["args.items.1.sku"].value == ""
        and f["args.items.1"].row_of == "args.items"
        and f["args.items.1"].label == "items[1]"
    )
    assert f["args.tags.1"].value == "vip"
    assert f["args.express"].kind == "boolean" and not f["args.express"].checked
    assert f["args.weight"].kind == "number" and f["args.weight"].value == "1.5"
    assert f["args.priority"].kind == "choice" and f["args.priority"].value == "2"
    assert f["args.gift"].kind == "object" and f["args.gift"].optional and not f["args.gift"].present
    assert f["args.meta"].kind == "json" and "map" in f["args.meta"].why_json  # a map: JSON for that field
    assert json.loads(f["args.meta"].value) == {"source": "chat"}
    again = build_form(schema_of(orders), ORDER, add_row="args.items")
    assert len(walk(again.fields or [])["args.items"].children) == 3


def test_what_a_form_cannot_show_falls_back_to_json():
    union = {
        "type": "object",
        "properties": {
            "target": {
                "oneOf": [
                    {"type": "object", "properties": {"email": {"type": "string"}}},
                    {"type": "object", "properties": {"phone": {"type": "string"}}},
                ]
            },
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
            "missing_ref": {"$ref": "#/$defs/Nowhere"},
            "count": {"type": "integer"},
        },
    }
    value = {"target": {"email": "a@b.c"}, "pair": ["x", 1], "missing_ref": 3, "count": "not an int"}
    f = walk(build_form(union, value).fields or [])
    assert {f[k].kind for k in ("args.target", "args.pair", "args.missing_ref", "args.count")} == {"json"}
    submitted = {
        "args.target": ['{"phone": "123"}'],
        "args.pair": ['["y", 2]'],
        "args.missing_ref": ["4"],
        "!json:args.count": ["1"],  # shown as JSON because its value did not fit
        "args.count": ["7"],
    }
    read, problems = read_form(union, submitted)
    assert problems == [] and read == {
        "target": {"phone": "123"},
        "pair": ["y", 2],
        "missing_ref": 4,
        "count": 7,
    }
    broken, problems = read_form(union, {**submitted, "args.pair": ["[1,"]})
    assert [p.where for p in problems] == ["$.pair"] and "pair" not in broken
    whole = build_form({"type": "array", "items": {"type": "string"}}, ["a"])
    assert whole.as_json and json.loads(whole.json_text) == ["a"]
    assert build_form(None, {"a": 1}).as_json  # no schema (the tool is unknown): JSON only


def test_other_schema_spellings_decimal_unions_refs_type_lists_and_sets():
    schema = {
        "type": "object",
        "definitions": {
            "Money": {"anyOf": [{"type": "number"}, {"type": "string", "pattern": r"^-?\d+(\.\d+)?$"}]}
        },
        "properties": {
            "price": {"allOf": [{"$ref": "#/definitions/Money"}], "description": "pydantic's Decimal"},
            "label": {"type": ["string", "null"]},
            "channels": {"type": "array", "uniqueItems": True, "items": {"enum": ["email", "sms", "post"]}},
            "mode": {"const": "fast"},
        },
        "required": ["price", "label", "channels", "mode"],
    }
    f = walk(
        build_form(schema, {"price": "9.99", "label": None, "channels": ["sms"], "mode": "fast"}).fields or []
    )
    assert f["args.price"].kind == "decimal" and f["args.price"].value == "9.99"
    assert f["args.label"].kind == "text" and f["args.label"].nullable and f["args.label"].value == ""
    assert f["args.channels"].kind == "multichoice" and f["args.channels"].chosen == ('"sms"',)
    assert f["args.mode"].kind == "choice" and [o.value for o in f["args.mode"].options] == ['"fast"']
    submitted = {
        "args.price": ["0.10"],
        "args.label": [""],
        "args.channels": ['"post"', '"email"'],  # a multiple select sends one value per option
        "args.mode": ['"fast"'],
    }
    value, problems = read_form(schema, submitted)
    assert problems == []
    assert value == {"price": "0.10", "label": None, "channels": ["email", "post"], "mode": "fast"}


def test_submitted_text_becomes_the_type_the_schema_asks_for(orders):
    schema = schema_of(orders)
    fields = {
        "args.request.order_id": ["ORD-00000002"],
        "args.request.reason": ['"other"'],
        "args.request.amount": [" 7.10 "],
        "args.request.idempotency_key": ["key-0123456789abcdef"],
        "args.address.city": ["Paris"],
        "args.address.zip": [""],  # empty where null is allowed: null
        "!rows:args.items": ["3"],
        "args.items.0.sku": ["A-1"],
        "args.items.0.qty": ["4"],
        "args.items.0.price": ["3.00"],
        "args.items.1.sku": [""],  # a blank row is no item
        "args.items.1.qty": [""],
        "args.items.2.sku": ["B-2"],
        "args.items.2.qty": ["x2"],  # not a number: passed on as typed, for the gate to teach
        "args.items.2.price": ["1.25"],
        "!rows:args.tags": ["2"],
        "args.tags.0": ["one"],
        "!remove:args.tags.1": ["1"],
        "args.tags.1": ["removed"],
        "args.express": ["true"],
        "args.weight": ["2"],
        "args.priority": ["3"],
        "!set:args.gift": ["1"],
        "args.gift.city": ["Nice"],
        "args.meta": [""],
        "args.note": ["a\r\nb"],
    }
    value, problems = read_form(schema, fields)
    assert problems == []
    assert value == {
        "request": {
            "order_id": "ORD-00000002",
            "reason": "other",
            "amount": "7.10",  # the exact decimal, as a string
            "idempotency_key": "key-0123456789abcdef",
        },
        "address": {"city": "Paris", "zip": None},
        "items": [{"sku": "A-1", "qty": 4, "price": "3.00"}, {"sku": "B-2", "qty": "x2", "price": "1.25"}],
        "tags": ["one"],
        "express": True,
        "weight": 2,
        "priority": 3,
        "gift": {"city": "Nice"},
        "meta": None,
        "note": "a\nb",
    }
    unticked, _ = read_form(
        schema, {k: v for k, v in fields.items() if k not in ("args.express", "!set:args.gift")}
    )
    assert unticked["express"] is False and unticked["gift"] is None


def test_the_gates_teaching_message_is_cut_into_one_line_per_field():
    message = (
        "Invalid arguments for t. $.amount: expected a number > 0; received 0 (integer). Input should be "
        "greater than 0. Missing required argument $.items[0].sku: expected a string. Unknown argument "
        "'colour' at $.colour. Allowed arguments: amount, items. A valid call looks like: t({}). Fix the "
        "arguments and call again."
    )
    fields = [
        {"path": "$.amount", "problem": "invalid"},
        {"path": "$.items[0].sku", "problem": "missing"},
        {"path": "$.colour", "problem": "unknown"},
    ]
    lines = field_messages(message, fields)
    assert (
        lines["$.amount"]
        == "$.amount: expected a number > 0; received 0 (integer). Input should be greater than 0."
    )
    assert lines["$.items[0].sku"] == "Missing required argument $.items[0].sku: expected a string."
    assert lines["$.colour"].startswith("Unknown argument 'colour'") and "valid call" not in lines["$.colour"]


def test_the_diff_names_changed_added_and_removed_paths():
    old = {"amount": "12.50", "items": [{"qty": 1}], "note": "x", "flag": 1}
    new = {"amount": "20.00", "items": [{"qty": 1}, {"qty": 2}], "flag": True, "extra": None}
    changes = {(c.where, c.kind, c.old_text, c.new_text) for c in diff_arguments(old, new)}
    assert changes == {
        ("$.amount", "changed", '"12.50"', '"20.00"'),
        ("$.items[1]", "added", "", '{"qty": 2}'),
        ("$.note", "removed", '"x"', ""),
        ("$.flag", "changed", "1", "true"),  # 1 and true are different JSON
        ("$.extra", "added", "", "null"),
    }
    assert diff_arguments(old, dict(old)) == []


# ------------------------------------------------------------------------------ through the console


@pytest.fixture
async def order_app(stores, accounts, orders):
    return create_app(stores, secret=SECRET, accounts=accounts, toolbox=orders)


async def pending_order(stores, orders) -> str:
    gate = Gate(orders, stores=stores)
    principal = Principal(user="alice", tenant="acme")
    call = ToolCall(id="c1", name="place_refund_order", arguments=ORDER)
    result = await gate.call(call, principal, gate.new_run(principal))
    assert result.error is not None and result.error.code == "APPROVAL_REQUIRED"
    return str(result.error.details["approval_id"])


def client_of(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver")


async def test_an_unchanged_form_reads_back_as_the_proposed_arguments(order_app, stores, orders):
    approval_id = await pending_order(stores, orders)
    proposed = (await Gate(orders, stores=stores).approvals.get(approval_id)).arguments
    async with client_of(order_app) as client:
        await sign_in(client, "bob")
        page = await client.get(f"/approvals/{approval_id}/edit")
        assert page.status_code == 200
        form = Forms(page.text).form(f"/approvals/{approval_id}/edit")
        pairs = submission(form, ("!action", "preview"))
        value, problems = read_form(schema_of(orders), parse_qs(urlencode(pairs), keep_blank_values=True))
        assert problems == [] and value == proposed  # schema -> form -> browser -> value: nothing lost
        confirm = await post_pairs(client, f"/approvals/{approval_id}/edit", pairs)
        assert confirm.status_code == 200 and "The edit changes nothing" in confirm.text


async def test_a_nested_edit_with_an_added_row_reads_back_as_the_intended_value(order_app, stores, orders):
    approval_id = await pending_order(stores, orders)
    url = f"/approvals/{approval_id}/edit"
    async with client_of(order_app) as client:
        await sign_in(client, "bob")
        form = Forms((await client.get(url)).text).form(url)
        pairs = submission(form, ("!action", "add:args.items"))
        pairs = set_value(pairs, "args.items.0.qty", "3")
        more = await post_pairs(client, url, pairs)  # no JS: the server adds the row
        assert more.status_code == 200 and 'name="args.items.2.sku"' in more.text
        assert 'value="3"' in more.text  # what was typed is kept
        pairs = submission(Forms(more.text).form(url), ("!action", "preview"))
        for name, value in {
            "args.request.amount": "20.00",
            "args.request.reason": '"duplicate_charge"',
            "args.items.1.sku": "B-2",
            "args.items.1.qty": "2",
            "args.items.1.price": "5.00",
            "args.weight": "",
            "args.priority": "3",
            "args.express": "true",
            "!remove:args.tags.0": "1",
            "!set:args.gift": "1",
            "args.gift.city": "Nice",
            "args.meta": '{"source": "phone"}',
        }.items():
            pairs = set_value(pairs, name, value)
        confirm = await post_pairs(client, url, pairs)
        assert confirm.status_code == 200, confirm.text
        edited = json.loads(Forms(confirm.text).form("/edit/confirm")["controls"][1]["value"])
    assert edited == {
        **ORDER,
        "request": {**ORDER["request"], "amount": "20.00", "reason": "duplicate_charge"},
        "items": [{"sku": "A-1", "qty": 3, "price": "12.50"}, {"sku": "B-2", "qty": 2, "price": "5.00"}],
        "tags": ["vip"],
        "express": True,
        "weight": None,
        "priority": 3,
        "gift": {"city": "Nice", "zip": None},
        "meta": {"source": "phone"},
    }
    for where in ("$.request.amount", "$.items[0].qty", "$.items[1]", "$.weight", "$.gift"):
        assert f"<code>{where}</code>" in confirm.text


async def test_an_edited_refund_is_confirmed_as_a_diff_bound_to_a_new_hash_and_runs_once_as_edited(
    client_for, gate, shop, stores
):
    pending = await pending_refund(gate)
    url = f"/approvals/{pending.approval_id}/edit"
    async with client_for() as client:
        await sign_in(client, "bob")
        form = Forms((await client.get(url)).text).form(url)
        pairs = set_value(submission(form, ("!action", "preview")), "args.amount", "20.00")
        confirm = await post_pairs(client, url, pairs)
        assert confirm.status_code == 200
        assert re.search(r"<del>&#34;12\.50&#34;</del>.*<ins>&#34;20\.00&#34;</ins>", confirm.text, re.S)
        assert (await gate.approvals.get(pending.approval_id)).status == "pending"  # not before confirming
        shown = re.search(r'<code class="hash">(h2:[0-9a-f]{12})&hellip;</code>', confirm.text)
        assert shown is not None
        step = Forms(confirm.text).form("/edit/confirm")
        pairs = set_value(submission(step), "note", "customer agreed to 20.00")
        done = await post_pairs(client, f"/approvals/{pending.approval_id}/edit/confirm", pairs)
        assert done.status_code == 200 and "edited arguments" in done.text
    request = await gate.approvals.get(pending.approval_id)
    assert request.status == "approved" and request.approver == "bob (via=console)"
    assert request.edited_arguments == {"order_id": "ORD-1", "amount": "20.00", "note": ""}
    assert request.approved_hash.startswith(shown.group(1)) and request.approved_hash != request.call_hash
    assert request.message == "customer agreed to 20.00"
    result = await pending.retry(gate)  # the model's call comes back with the approval id
    assert not result.is_error and shop.refunds == [{"order_id": "ORD-1", "amount": "20.00", "note": ""}]
    again = await pending.retry(gate)
    assert len(shop.refunds) == 1 and (again.replayed or again.is_error)
    decided = [e for e in await stores.audit.entries() if e.decision == "approval_decided"]
    assert [e.detail for e in decided] == ["approved by bob (via=console) with edited arguments"]
    assert decided[0].call_hash == request.approved_hash


@pytest.mark.parametrize(
    ("amount", "taught"),
    [
        ("0", "Input should be greater than 0"),
        ("abc", "received &#34;abc&#34;"),
        ("99999", "Input should be less than or equal to 5000"),
    ],
)
async def test_an_invalid_edit_is_the_form_again_with_the_gates_error_at_the_field(
    client_for, gate, shop, amount, taught
):
    pending = await pending_refund(gate)
    url = f"/approvals/{pending.approval_id}/edit"
    async with client_for() as client:
        await sign_in(client, "bob")
        form = Forms((await client.get(url)).text).form(url)
        pairs = set_value(submission(form, ("!action", "preview")), "args.amount", amount)
        pairs = set_value(pairs, "args.note", "kept as typed")
        page = await post_pairs(client, url, pairs)
        assert page.status_code == 422 and "nothing was approved" in page.text
        at_field = re.search(
            r'<p class="field-error" id="e-args\.amount" role="alert">(.*?)</p>', page.text, re.S
        )
        assert at_field is not None and taught in at_field.group(1) and "$.amount" in at_field.group(1)
        assert 'id="e-args.order_id"' not in page.text  # only the wrong field is marked
        assert f'name="args.amount" value="{amount}"' in page.text
        assert 'name="args.note" value="kept as typed"' in page.text
        # the confirm step checks again: a forged confirmation of the invalid value approves nothing
        forged = json.dumps({"order_id": "ORD-1", "amount": amount, "note": ""})
        token = csrf_of(page.text)
        refused = await client.post(
            f"/approvals/{pending.approval_id}/edit/confirm",
            data={"csrf": token, "edited": forged, "hash": "h2:000"},
        )
        assert refused.status_code == 422 and 'id="e-args.amount"' in refused.text
    request = await gate.approvals.get(pending.approval_id)
    assert request.status == "pending" and request.edited_arguments is None and shop.refunds == []


async def test_a_confirmation_whose_arguments_changed_after_the_preview_approves_nothing(client_for, gate):
    pending = await pending_refund(gate)
    url = f"/approvals/{pending.approval_id}/edit"
    async with client_for() as client:
        await sign_in(client, "bob")
        pairs = set_value(submission(Forms((await client.get(url)).text).form(url)), "args.amount", "20.00")
        confirm = await post_pairs(client, url, [*pairs, ("!action", "preview")])
        pairs = submission(Forms(confirm.text).form("/edit/confirm"))
        swapped = [(n, v.replace("20.00", "4999.00") if n == "edited" else v) for n, v in pairs]
        response = await post_pairs(client, f"/approvals/{pending.approval_id}/edit/confirm", swapped)
        assert response.status_code == 409 and "no longer give the call you confirmed" in response.text
    assert (await gate.approvals.get(pending.approval_id)).status == "pending"


async def test_edits_by_someone_without_the_role_or_of_another_tenant_are_refused(client_for, gate, shop):
    pending = await pending_refund(gate)
    edited = json.dumps({"order_id": "ORD-1", "amount": "4999.00", "note": ""})
    for name, status in (("carol", 403), ("eve", 404), ("alice", 403)):  # alice asked: no self-approval
        async with client_for() as client:
            await sign_in(client, name)
            token = csrf_of((await client.get("/")).text)
            assert (await client.get(f"/approvals/{pending.approval_id}/edit")).status_code == status
            preview = await client.post(
                f"/approvals/{pending.approval_id}/edit",
                data={"csrf": token, "!mode": "json", "!json": edited, "!action": "preview"},
            )
            confirm = await client.post(
                f"/approvals/{pending.approval_id}/edit/confirm",
                data={"csrf": token, "edited": edited, "hash": ""},
            )
            assert preview.status_code == status and confirm.status_code == status
            assert "4999" not in preview.text + confirm.text
    async with client_for() as client:
        await sign_in(client, "bob")
        no_token = await client.post(
            f"/approvals/{pending.approval_id}/edit/confirm", data={"edited": edited}
        )
        assert no_token.status_code == 403
    request = await gate.approvals.get(pending.approval_id)
    assert request.status == "pending" and request.edited_arguments is None and shop.refunds == []


async def test_without_the_tool_edits_are_json_only_and_never_approved(stores, accounts, gate, shop):
    app = create_app(stores, secret=SECRET, accounts=accounts)  # started without a toolbox
    pending = await pending_refund(gate)
    url = f"/approvals/{pending.approval_id}/edit"
    async with client_of(app) as client:
        await sign_in(client, "bob")
        request_page = await client.get(f"/approvals/{pending.approval_id}")
        assert "gate cannot validate an edit" in request_page.text
        page = await client.get(url)
        assert (
            page.status_code == 200 and 'name="!json"' in page.text and 'name="args.amount"' not in page.text
        )
        assert "cannot validate edited arguments" in page.text
        token = csrf_of(page.text)
        edited = json.dumps({"order_id": "ORD-1", "amount": "20.00", "note": ""})
        preview = await client.post(url, data={"csrf": token, "!mode": "json", "!json": edited})
        assert preview.status_code == 422 and "never approved unvalidated" in preview.text
        assert "20.00" in preview.text  # the typed JSON is kept
        confirm = await client.post(f"{url}/confirm", data={"csrf": token, "edited": edited, "hash": ""})
        assert confirm.status_code == 422 and "never approved unvalidated" in confirm.text
        assert (await gate.approvals.get(pending.approval_id)).status == "pending"
        plain = await client.post(f"/approvals/{pending.approval_id}/approve", data={"csrf": token})
        assert plain.status_code == 200  # the proposed call can still be approved as it is
    assert (await gate.approvals.get(pending.approval_id)).edited_arguments is None


async def test_the_json_editor_validates_like_the_form(client_for, gate):
    pending = await pending_refund(gate)
    url = f"/approvals/{pending.approval_id}/edit"
    async with client_for() as client:
        await sign_in(client, "bob")
        page = await client.get(url + "?as=json")
        assert 'name="!json"' in page.text
        token = csrf_of(page.text)
        broken = await client.post(url, data={"csrf": token, "!mode": "json", "!json": '{"amount": '})
        assert broken.status_code == 422 and "not valid JSON" in broken.text
        wrong = await client.post(
            url, data={"csrf": token, "!mode": "json", "!json": '{"order_id": "ORD-1", "amount": 12.5}'}
        )
        assert wrong.status_code == 422 and "not an exact decimal" in wrong.text  # the gate's own teaching
        back = await client.post(
            url,
            data={
                "csrf": token,
                "!mode": "json",
                "!json": '{"order_id": "ORD-9", "amount": "3.00"}',
                "!action": "as-form",
            },
        )
        assert back.status_code == 200 and 'name="args.order_id" value="ORD-9"' in back.text
    assert (await gate.approvals.get(pending.approval_id)).status == "pending"


async def test_a_decided_used_or_expired_request_cannot_be_edited(client_for, gate, monkeypatch):
    import time

    pending = await pending_refund(gate)
    url = f"/approvals/{pending.approval_id}/edit"
    edited = {"order_id": "ORD-1", "amount": "20.00", "note": ""}
    async with client_for() as client:
        await sign_in(client, "bob")
        token = csrf_of((await client.get(url)).text)
        assert (
            await client.post(f"/approvals/{pending.approval_id}/approve", data={"csrf": token})
        ).status_code == 200
        for response in (
            await client.get(url),
            await client.post(url, data={"csrf": token, "!mode": "json", "!json": json.dumps(edited)}),
            await client.post(
                url + "/confirm", data={"csrf": token, "edited": json.dumps(edited), "hash": ""}
            ),
        ):
            assert response.status_code == 409 and "already approved" in response.text
        await pending.retry(gate)
        used = await client.get(url)
        assert used.status_code == 409 and "used" in used.text
    later = await pending_refund(gate)
    gate_ttl = time.time() + 3 * 24 * 3600
    monkeypatch.setattr(time, "time", lambda: gate_ttl)
    async with client_for() as client:
        await sign_in(client, "bob")
        token = csrf_of((await client.get("/")).text)
        for response in (
            await client.get(f"/approvals/{later.approval_id}/edit"),
            await client.post(
                f"/approvals/{later.approval_id}/edit/confirm",
                data={"csrf": token, "edited": json.dumps(edited), "hash": ""},
            ),
        ):
            assert response.status_code == 410 and "expired" in response.text


async def test_script_in_arguments_is_text_on_the_edit_and_confirm_pages(client_for, gate):
    script = "<script>alert(1)</script>"
    attribute = '"><img src=x onerror=alert(1)>'
    pending = await pending_refund(gate, {"order_id": script, "amount": "1.00", "note": attribute})
    url = f"/approvals/{pending.approval_id}/edit"
    async with client_for() as client:
        await sign_in(client, "bob")
        page = await client.get(url)
        pairs = set_value(
            submission(Forms(page.text).form(url), ("!action", "preview")), "args.amount", "2.00"
        )
        confirm = await post_pairs(client, url, pairs)
        as_json = await client.get(url + "?as=json")
        invalid = await post_pairs(client, url, set_value(pairs, "args.amount", attribute))
        assert invalid.status_code == 422
        for shown in (page, confirm, as_json, invalid):
            assert shown.status_code in (200, 422)
            assert script not in shown.text and "<img" not in shown.text
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown.text
            assert "&lt;img src=x onerror=alert(1)&gt;" in shown.text
        # and the escaped values still arrive exactly: the form round-trips them
        edited = json.loads(Forms(confirm.text).form("/edit/confirm")["controls"][1]["value"])
        assert edited == {"order_id": script, "amount": "2.00", "note": attribute}


async def test_forged_or_junk_edit_posts_are_refused_with_a_page_never_a_crash(client_for, gate, shop):
    pending = await pending_refund(gate)
    url = f"/approvals/{pending.approval_id}/edit"
    deep = "[" * 5000 + "]" * 5000  # within the form size limit, past the JSON parser's nesting
    async with client_for() as client:
        await sign_in(client, "bob")
        token = csrf_of((await client.get(url)).text)
        posts = [
            (url, {"!mode": "json", "!json": deep}),
            (url, {"!mode": "json", "!json": '{"a":' * 100 + "1" + "}" * 100}),
            (url, {"!mode": "json", "!json": "[1, 2]"}),
            (url + "/confirm", {"edited": deep, "hash": "h2:0"}),
            (url + "/confirm", {"edited": "not json", "hash": ""}),
            (
                url,
                {
                    "!mode": "form",
                    "!rows:args.order_id": "99999999",
                    "args.amount": "1.00",
                    "!action": "add:x",
                },
            ),
            (url, {"!mode": "form", "args.order_id": "ORD-1", "args.amount": "1.00", "args.bogus": "x"}),
            (url, {"!mode": "form", "!json:args.amount": "1", "args.amount": deep, "args.order_id": "ORD-1"}),
            (url, {"!mode": "mystery", "!action": "launch"}),
        ]
        for target, data in posts:
            response = await client.post(target, data={"csrf": token, **data})
            assert response.status_code in (200, 400, 409, 422), (target, data, response.status_code)
            assert "Traceback" not in response.text
    request = await gate.approvals.get(pending.approval_id)
    assert request.status == "pending" and request.edited_arguments is None and shop.refunds == []
