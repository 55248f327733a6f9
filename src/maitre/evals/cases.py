"""Evaluation cases: seed 003's format, read from JSON Lines or YAML, checked before anything runs.

Seed 003 (§13) writes a case as

    {"input": "Check the status of ticket T-123456", "expected_tool": "get_ticket_status",
     "expected_arguments": {"ticket_id": "T-123456"}, "forbidden_tools": ["create_ticket_draft"],
     "max_tool_calls": 1}

and that line is a valid case here as it stands. The other fields (all optional):

- `id`: a name for reports and `maitre eval compare` (default: `FILE:LINE`); unique in a file.
- `expected_tools`: several tools, each a name or `{"tool": NAME, "arguments": {...}}`, instead of
  `expected_tool`/`expected_arguments`. `[]` means *no tool should be called*. With neither field
  the case does not score tool selection at all.
- `tool_order`: `any` (default: the expected tools are a set) or `ordered` (they must be called in
  that order; other calls may come between).
- `forbidden_tools`, `max_tool_calls`: seed 003's.
- `min_tool_calls`, `min_steps`: the shortest trajectory, for efficiency (default: one call per
  expected tool; one step per ordered tool, or one step for all of an unordered set, plus the step
  that answers).
- `expected_stop_reason`: a `maitre.agent.StopReason` value (`completed`, `approval_required`, ...).
- `expected_approval`: `true` (some call must wait for a person), `false` (none may), or the tool
  names that must.
- `on_approval`: `stop` (default: the trial ends paused), `approve` or `deny` (a stand-in
  approver decides every request and the run goes on, at most 5 times).
- `constraints`: business rules per tool, in the matcher's language, checked on every call of that
  tool - `{"issue_refund": {"amount": {"$gt": 0, "$lte": 500}}}` (an argument not sent is not
  checked: the tool's schema says what is required).
- `allow_extra_arguments`: accept arguments the expected ones do not name (default false, as BFCL).
- `principal`: who asks (`{"user": ..., "tenant": ..., "scopes": [...], "roles": [...]}`;
  default user `eval`, tenant `eval`).
- `tags`: labels shown in reports.
- `expected_route`: `CONTEXT`, `RETRIEVE` or `ACT` (seed 002's three piles, see
  `maitre.routing`): the route a router should choose for the input. A case with an
  `expected_route` and none of the fields above but `id` and `tags` is a *routing case*: it is
  routed (by `maitre eval --router`), never run by an agent, so a file of routing cases needs no
  `--agent`. A case that also sets an agent field (`expected_tool`, `max_tool_calls`, ...) is both
  run and routed, and passes when both are right.

Argument specs are described in `maitre.evals.matching`. Any mistake in a file - broken JSON or
YAML, an unknown field, a wrong type, an unknown operator, a duplicate id - is a `CaseFileError`
naming the file and line of the case.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..agent.limits import StopReason
from ..exceptions import UserError
from ..types import Principal
from .matching import check_spec

__all__ = ["CaseFileError", "EvalCase", "ExpectedCall", "PrincipalSpec", "load_cases", "parse_cases"]

_STOP_REASONS = tuple(str(r) for r in StopReason)
_ROUTES = ("CONTEXT", "RETRIEVE", "ACT")
"""`maitre.routing.ROUTES` as text (the case format does not load the router to check a label)."""
_NOT_AGENT_FIELDS = frozenset({"id", "input", "expected_route", "tags", "source"})
"""The fields a routing case may set without asking for an agent run."""


class CaseFileError(UserError):
    """A case file cannot be used; the message names the file and line (`cases.jsonl:3: ...`)."""


class ExpectedCall(BaseModel):
    """A tool the model should call, and optionally the arguments it should call it with."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(min_length=1)
    arguments: dict[str, Any] | None = None
    """An argument spec (see `maitre.evals.matching`); None: any arguments."""


class PrincipalSpec(BaseModel):
    """Who the case's user is."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user: str = "eval"
    tenant: str = "eval"
    scopes: list[str] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)

    def principal(self) -> Principal:
        return Principal(
            user=self.user, tenant=self.tenant, scopes=frozenset(self.scopes), roles=frozenset(self.roles)
        )


class EvalCase(BaseModel):
    """One case. See the module docstring for the fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = ""
    input: str = Field(min_length=1)
    expected_tool: str | None = Field(default=None, min_length=1)
    expected_arguments: dict[str, Any] | None = None
    expected_tools: list[str | ExpectedCall] | None = None
    tool_order: Literal["any", "ordered"] = "any"
    forbidden_tools: list[str] = Field(default_factory=list)
    max_tool_calls: int | None = Field(default=None, ge=0)
    min_tool_calls: int | None = Field(default=None, ge=0)
    min_steps: int | None = Field(default=None, ge=1)
    expected_stop_reason: str | None = None
    expected_approval: bool | list[str] | None = None
    on_approval: Literal["stop", "approve", "deny"] = "stop"
    constraints: dict[str, dict[str, Any]] = Field(default_factory=dict)
    allow_extra_arguments: bool = False
    principal: PrincipalSpec = Field(default_factory=PrincipalSpec)
    tags: list[str] = Field(default_factory=list)
    expected_route: Literal["CONTEXT", "RETRIEVE", "ACT"] | None = None
    source: str = ""
    """Where the case was read: `FILE:LINE` (set by the loader)."""

    @field_validator("expected_stop_reason")
    @classmethod
    def _known_stop_reason(cls, value: str | None) -> str | None:
        if value is not None and value not in _STOP_REASONS:
            raise ValueError(f"{value!r} is not a stop reason; use one of {', '.join(_STOP_REASONS)}")
        return value

    @field_validator("expected_route", mode="before")
    @classmethod
    def _known_route(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str) or value.strip().upper() not in _ROUTES:
            raise ValueError(f"{value!r} is not a route; use one of {', '.join(_ROUTES)}")
        return value.strip().upper()

    @model_validator(mode="after")
    def _consistent(self) -> EvalCase:
        if self.expected_tool is not None and self.expected_tools is not None:
            raise ValueError("give expected_tool or expected_tools, not both")
        if self.expected_arguments is not None and self.expected_tool is None:
            raise ValueError("expected_arguments belongs with expected_tool (or use expected_tools)")
        problems = []
        for call in self.expected_calls:
            if call.arguments is not None:
                problems += check_spec(call.arguments, path=f"{call.tool}.arguments")
        for tool, rules in self.constraints.items():
            problems += check_spec(rules, path=f"constraints.{tool}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def expected_calls(self) -> list[ExpectedCall]:
        """`expected_tool` + `expected_arguments`, or `expected_tools`, as one list."""
        if self.expected_tool is not None:
            return [ExpectedCall(tool=self.expected_tool, arguments=self.expected_arguments)]
        return [ExpectedCall(tool=e) if isinstance(e, str) else e for e in self.expected_tools or []]

    @property
    def runs_agent(self) -> bool:
        """An agent runs this case: it is not a routing case (one that sets only `expected_route`,
        with `id` and `tags`)."""
        return self.expected_route is None or bool(self.model_fields_set - _NOT_AGENT_FIELDS)

    @property
    def is_routed(self) -> bool:
        """A router is scored on this case (it sets `expected_route`)."""
        return self.expected_route is not None

    @property
    def scores_selection(self) -> bool:
        """The case says which tools to call (an empty list included)."""
        return self.expected_tool is not None or self.expected_tools is not None

    @property
    def minimum_calls(self) -> int:
        return self.min_tool_calls if self.min_tool_calls is not None else len(self.expected_calls)

    @property
    def minimum_steps(self) -> int:
        if self.min_steps is not None:
            return self.min_steps
        count = len(self.expected_calls)
        if count == 0:
            return 1
        return (count if self.tool_order == "ordered" else 1) + 1


# -- loading ------------------------------------------------------------------------------------------


def load_cases(path: str | Path) -> list[EvalCase]:
    """Read and check every case in `path` (`.jsonl`/`.ndjson` or `.yaml`/`.yml`)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CaseFileError(f"{file}: no such case file") from None
    except IsADirectoryError:
        raise CaseFileError(f"{file}: is a folder; give a .jsonl or .yaml file of cases") from None
    except UnicodeDecodeError as exc:
        raise CaseFileError(f"{file}: not UTF-8 text ({exc.reason})") from None
    return parse_cases(text, name=str(file), kind=_kind(file))


def _kind(file: Path) -> Literal["jsonl", "yaml"]:
    suffix = file.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".yaml", ".yml"):
        return "yaml"
    raise CaseFileError(f"{file}: cases are JSON Lines (.jsonl) or YAML (.yaml); got {suffix or 'no suffix'}")


def parse_cases(text: str, *, name: str, kind: Literal["jsonl", "yaml"]) -> list[EvalCase]:
    """The cases in `text` (read from `name`, which the errors cite)."""
    raw = _jsonl(text, name) if kind == "jsonl" else _yaml(text, name)
    cases: list[EvalCase] = []
    seen: dict[str, str] = {}
    for line, data in raw:
        where = f"{name}:{line}"
        if not isinstance(data, dict):
            raise CaseFileError(f"{where}: a case is an object with an 'input', got {type(data).__name__}")
        data = {**data, "source": where}
        data.setdefault("id", f"{Path(name).name}:{line}")
        try:
            case = EvalCase.model_validate(data)
        except ValidationError as exc:
            raise CaseFileError(f"{where}: {_describe(exc)}") from None
        if case.id in seen:
            raise CaseFileError(f"{where}: duplicate case id {case.id!r} (first at {seen[case.id]})")
        seen[case.id] = where
        cases.append(case)
    if not cases:
        raise CaseFileError(f"{name}: no cases in the file")
    return cases


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:3]:
        location = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"]).lstrip(".")
        message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{location}: {message}" if location else message)
    more = len(exc.errors()) - 3
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _jsonl(text: str, name: str) -> list[tuple[int, Any]]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            found.append((number, json.loads(stripped)))
        except json.JSONDecodeError as exc:
            raise CaseFileError(f"{name}:{number}:{exc.colno}: not valid JSON: {exc.msg}") from None
    return found


def _yaml(text: str, name: str) -> list[tuple[int, Any]]:
    try:
        yaml: Any = importlib.import_module("yaml")
    except ModuleNotFoundError:  # pragma: no cover - PyYAML is a core dependency
        raise CaseFileError(
            f"{name}: reading YAML needs PyYAML (pip install pyyaml), or write JSON Lines"
        ) from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise CaseFileError(f"{name}{line}: not valid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise CaseFileError(f"{name}: not valid YAML: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("cases"), list):
        items = data["cases"]
        node = next(v for k, v in root.value if k.value == "cases")
    elif isinstance(data, list):
        items, node = data, root
    else:
        raise CaseFileError(f"{name}: a YAML case file is a list of cases (or has a 'cases:' list)")
    return [
        (item_node.start_mark.line + 1, _plain(item))
        for item_node, item in zip(node.value, items, strict=True)
    ]


def _plain(value: Any) -> Any:
    """YAML's dates and times as ISO text (what a model sends), so they match as dates do."""
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
