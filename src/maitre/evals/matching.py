"""Does what the model did match what a case expects? BFCL-style matching of values, and the checks.

Arguments are matched the way the Berkeley Function-Calling Leaderboard's AST checker does - by
structure and value, never by the text of the JSON - with the rules written out here:

- **Plain values** compare by value and type. Numbers by value (`1 == 1.0`; a boolean is never a
  number). A string matches only a string, exactly: `"1"` does *not* match `1`, because a model that
  sends a string where the schema wants a number made a type error. An ISO date (`2026-07-22`) or
  date-time (`2026-07-22T10:00:00Z`) in the expectation is compared as a date: see `$date`.
  A list matches a list of the same length, element by element, in order. An object matches an
  object with the same keys (an extra argument the case does not name is a mismatch, as in BFCL;
  `allow_extra_arguments: true` on a case turns that off), each value matched by these rules.
- **Operators** are objects whose every key starts with `$`; all of an object's operators must hold:

  | operator | matches |
  |---|---|
  | `{"$one_of": [A, B]}` | any of the specs (BFCL's list of acceptable values) |
  | `{"$optional": A}` | as an object member: absent, or present and matching A |
  | `{"$absent": true}` | as an object member: must not be there |
  | `{"$any": true}` | any value (present) |
  | `{"$type": "integer"}` | a JSON type: string, integer, number, boolean, object, array, null |
  | `{"$decimal": "12.5"}` | a number or a decimal string of that value (`"12.50"`, `12.5`) |
  | `{"$date": "2026-07-22"}` | a date in any accepted format (below) |
  | `{"$datetime": "2026-07-22T10:00:00Z"}` | the same instant, in any ISO form or offset |
  | `{"$regex": "^T-\\d{6}$"}` | a string the pattern matches (`re.search`) |
  | `{"$contains": "refund"}` | a string containing the text, ignoring case |
  | `{"$gt": 0, "$lte": 500}` | a number or decimal string in range |
  | `{"$unordered": [A, B]}` | a list with one element matching each spec, in any order |
  | `{"$exact": V}` | V taken literally (for data whose keys start with `$`) |

- **Dates** are accepted as ISO 8601 (`2026-07-22`, `20260722`, a date-time whose date it is not -
  a date-time never equals a bare date), `2026/07/22`, `22 July 2026`, `22 Jul 2026`,
  `July 22, 2026` and `Jul 22, 2026`. Numeric day/month orders (`07/22/2026`, `22/07/2026`) are
  ambiguous and never match. A date-time without an offset is read as UTC.

Every mismatch comes back as a `Mismatch` with the path of the value (`arguments.items[1].sku`),
so a report can say exactly what was wrong. `check_spec` finds mistakes in a spec itself (an
unknown operator, a `$regex` that does not compile) when the case file is loaded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from ..jsonutil import json_type
from .records import RUNTIME_TOOLS, CallRecord, Check, TrialRecord, tool_matches

if TYPE_CHECKING:
    from .cases import EvalCase

__all__ = [
    "Mismatch",
    "OPERATORS",
    "argument_results",
    "check_spec",
    "check_trial",
    "chosen_tools",
    "constraint_mismatches",
    "match_value",
    "parse_date",
    "selection_sets",
]

OPERATORS = frozenset(
    {
        "$one_of",
        "$optional",
        "$absent",
        "$any",
        "$type",
        "$decimal",
        "$date",
        "$datetime",
        "$regex",
        "$contains",
        "$gt",
        "$gte",
        "$lt",
        "$lte",
        "$unordered",
        "$exact",
    }
)
_MEMBER_ONLY = frozenset({"$optional", "$absent"})
_TYPES = frozenset({"string", "integer", "number", "boolean", "object", "array", "null"})
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ISO_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
_DATE_FORMATS = ("%Y/%m/%d", "%d %B %Y", "%d %b %Y", "%B %d, %Y", "%b %d, %Y", "%B %d %Y", "%b %d %Y")


@dataclass(frozen=True)
class Mismatch:
    """One way a value did not match its spec."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def _is_operator(spec: Any) -> bool:
    return (
        isinstance(spec, dict) and bool(spec) and all(isinstance(k, str) and k.startswith("$") for k in spec)
    )


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_decimal(value: Any) -> Decimal | None:
    """A number, or a string that is exactly a decimal number, as a Decimal; else None."""
    if _is_number(value):
        number = Decimal(str(value))
        return number if number.is_finite() else None  # NaN and infinity compare with nothing
    if isinstance(value, str) and re.fullmatch(r"\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*", value):
        try:
            return Decimal(value.strip())
        except InvalidOperation:  # pragma: no cover - the pattern admits only valid decimals
            return None
    return None


def parse_date(value: Any) -> date | None:
    """`value` as a calendar date if it is a date in an accepted format (see the module docstring)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        if "T" not in text and ":" not in text:
            return date.fromisoformat(text)
    except ValueError:
        pass
    for format in _DATE_FORMATS:
        try:
            return datetime.strptime(text, format).date()
        except ValueError:
            continue
    return None


def _parse_datetime(value: Any) -> datetime | None:
    if not isinstance(value, str) or not _ISO_DATETIME.match(value.strip()):
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _has_type(value: Any, wanted: str) -> bool:
    actual = json_type(value)
    if wanted == "number":
        return actual in ("integer", "number")
    if wanted == "integer":  # as JSON Schema: 2.0 is an integer
        return actual == "integer" or (actual == "number" and float(value).is_integer())
    return actual == wanted


# -- matching ----------------------------------------------------------------------------------------


def match_value(spec: Any, actual: Any, *, path: str = "", allow_extra: bool = False) -> list[Mismatch]:
    """Every way `actual` fails `spec` (empty: it matches). See the module docstring for the rules."""
    if _is_operator(spec):
        return _match_operators(spec, actual, path, allow_extra)
    if isinstance(spec, dict):
        return _match_object(spec, actual, path, allow_extra)
    if isinstance(spec, list):
        if not isinstance(actual, list):
            return [Mismatch(path, f"expected a list, got {_show(actual)}")]
        if len(actual) != len(spec):
            return [Mismatch(path, f"expected {len(spec)} items, got {len(actual)}")]
        found: list[Mismatch] = []
        for index, (item_spec, item) in enumerate(zip(spec, actual, strict=True)):
            found += match_value(item_spec, item, path=f"{path}[{index}]", allow_extra=allow_extra)
        return found
    if isinstance(spec, str) and _ISO_DATETIME.match(spec) and _parse_datetime(spec) is not None:
        return _match_operators({"$datetime": spec}, actual, path, allow_extra)
    if isinstance(spec, str) and _ISO_DATE.match(spec) and parse_date(spec) is not None:
        return _match_operators({"$date": spec}, actual, path, allow_extra)
    return _match_literal(spec, actual, path)


def _match_literal(spec: Any, actual: Any, path: str) -> list[Mismatch]:
    if _is_number(spec):
        if not _is_number(actual):
            kind = "a string" if isinstance(actual, str) else json_type(actual)
            return [Mismatch(path, f"expected the number {_show(spec)}, got {kind} {_show(actual)}")]
        if Decimal(str(spec)) != Decimal(str(actual)):
            return [Mismatch(path, f"expected {_show(spec)}, got {_show(actual)}")]
        return []
    if isinstance(spec, list | dict):  # only reached from $exact
        if json_type(spec) != json_type(actual) or json.dumps(spec, sort_keys=True) != json.dumps(
            actual, sort_keys=True
        ):
            return [Mismatch(path, f"expected exactly {_show(spec)}, got {_show(actual)}")]
        return []
    if json_type(spec) != json_type(actual) or spec != actual:
        return [Mismatch(path, f"expected {_show(spec)}, got {_show(actual)}")]
    return []


def _match_object(spec: dict[str, Any], actual: Any, path: str, allow_extra: bool) -> list[Mismatch]:
    if not isinstance(actual, dict):
        return [Mismatch(path, f"expected an object, got {_show(actual)}")]
    found: list[Mismatch] = []
    for key, member in spec.items():
        where = f"{path}.{key}" if path else key
        operators = member if _is_operator(member) else {}
        if key not in actual:
            if operators.get("$absent") is True or "$optional" in operators:
                continue
            found.append(Mismatch(where, "missing"))
            continue
        if operators.get("$absent") is True:
            found.append(Mismatch(where, f"must be absent, got {_show(actual[key])}"))
            continue
        if "$optional" in operators:
            member = operators["$optional"]
        found += match_value(member, actual[key], path=where, allow_extra=allow_extra)
    if not allow_extra:
        for key in actual:
            if key not in spec:
                where = f"{path}.{key}" if path else key
                found.append(
                    Mismatch(where, f"unexpected (the case does not name it), got {_show(actual[key])}")
                )
    return found


def _match_operators(spec: dict[str, Any], actual: Any, path: str, allow_extra: bool) -> list[Mismatch]:
    found: list[Mismatch] = []
    for operator, argument in spec.items():
        found += _operator(operator, argument, actual, path, allow_extra)
    return found


def _operator(operator: str, argument: Any, actual: Any, path: str, allow_extra: bool) -> list[Mismatch]:
    if operator in ("$optional", "$absent"):  # handled by the object around it; at top level:
        return (
            [] if operator == "$absent" else match_value(argument, actual, path=path, allow_extra=allow_extra)
        )
    if operator == "$any":
        return []
    if operator == "$exact":
        return _match_literal(argument, actual, path)
    if operator == "$one_of":
        for option in argument:
            if not match_value(option, actual, path=path, allow_extra=allow_extra):
                return []
        return [Mismatch(path, f"expected one of {_show(argument)}, got {_show(actual)}")]
    if operator == "$type":
        wanted = [argument] if isinstance(argument, str) else list(argument)
        if any(_has_type(actual, w) for w in wanted):
            return []
        return [Mismatch(path, f"expected {' or '.join(wanted)}, got {json_type(actual)} {_show(actual)}")]
    if operator == "$decimal":
        want, got = Decimal(str(argument)), _as_decimal(actual)
        if got is None:
            return [Mismatch(path, f"expected the decimal {argument}, got {_show(actual)}")]
        return (
            []
            if got == want
            else [Mismatch(path, f"expected {argument} (as a decimal), got {_show(actual)}")]
        )
    if operator == "$date":
        wanted_date = parse_date(argument)
        got_date = parse_date(actual)
        if got_date is None:
            return [Mismatch(path, f"expected the date {argument}, got {_show(actual)} (not a date)")]
        return (
            []
            if got_date == wanted_date
            else [Mismatch(path, f"expected the date {argument}, got {_show(actual)}")]
        )
    if operator == "$datetime":
        wanted_at, got_at = _parse_datetime(argument), _parse_datetime(actual)
        if got_at is None:
            return [Mismatch(path, f"expected the time {argument}, got {_show(actual)} (not a date-time)")]
        return (
            []
            if got_at == wanted_at
            else [Mismatch(path, f"expected the time {argument}, got {_show(actual)}")]
        )
    if operator == "$regex":
        if isinstance(actual, str) and re.search(argument, actual):
            return []
        return [Mismatch(path, f"expected text matching /{argument}/, got {_show(actual)}")]
    if operator == "$contains":
        if isinstance(actual, str) and str(argument).casefold() in actual.casefold():
            return []
        return [Mismatch(path, f"expected text containing {_show(argument)}, got {_show(actual)}")]
    if operator in ("$gt", "$gte", "$lt", "$lte"):
        value = _as_decimal(actual)
        bound = Decimal(str(argument))
        if value is None:
            return [Mismatch(path, f"expected a number, got {_show(actual)}")]
        ok = {
            "$gt": value > bound,
            "$gte": value >= bound,
            "$lt": value < bound,
            "$lte": value <= bound,
        }[operator]
        symbol = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[operator]
        return [] if ok else [Mismatch(path, f"expected {symbol} {argument}, got {_show(actual)}")]
    if operator == "$unordered":
        return _match_unordered(argument, actual, path, allow_extra)
    raise ValueError(f"unknown operator {operator}")  # check_spec refuses these at load time


def _match_unordered(specs: list[Any], actual: Any, path: str, allow_extra: bool) -> list[Mismatch]:
    if not isinstance(actual, list):
        return [Mismatch(path, f"expected a list, got {_show(actual)}")]
    if len(actual) != len(specs):
        return [Mismatch(path, f"expected {len(specs)} items in any order, got {len(actual)}")]
    fits = [
        {
            j
            for j, item in enumerate(actual)
            if not match_value(spec, item, path=path, allow_extra=allow_extra)
        }
        for spec in specs
    ]
    taken: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:  # augmenting path (Kuhn's bipartite matching)
        for j in fits[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in taken or assign(taken[j], seen):
                taken[j] = i
                return True
        return False

    unmatched = [i for i in range(len(specs)) if not assign(i, set())]
    return [Mismatch(path, f"no item matches {_show(specs[i])}") for i in unmatched]


# -- checking a spec ---------------------------------------------------------------------------------


def check_spec(spec: Any, *, path: str = "", member: bool = False) -> list[str]:
    """Mistakes in a spec itself (unknown operator, bad operand), as `path: problem` lines."""
    where = path or "(value)"
    if isinstance(spec, dict) and any(isinstance(k, str) and k.startswith("$") for k in spec):
        problems: list[str] = []
        if not _is_operator(spec):
            return [
                f"{where}: mixes operators and plain keys ({', '.join(map(str, spec))}); wrap data in $exact"
            ]
        for operator, argument in spec.items():
            if operator not in OPERATORS:
                problems.append(
                    f"{where}: unknown operator {operator} (known: {', '.join(sorted(OPERATORS))})"
                )
            elif operator in _MEMBER_ONLY and not member:
                problems.append(f"{where}: {operator} applies only to an object's member")
            else:
                problems += _check_operand(operator, argument, where)
        return problems
    if isinstance(spec, dict):
        return [
            p
            for key, value in spec.items()
            for p in check_spec(value, path=f"{path}.{key}" if path else key, member=True)
        ]
    if isinstance(spec, list):
        return [p for i, value in enumerate(spec) for p in check_spec(value, path=f"{path}[{i}]")]
    return []


def _check_operand(operator: str, argument: Any, where: str) -> list[str]:
    if operator in ("$one_of", "$unordered"):
        if not isinstance(argument, list) or not argument:
            return [f"{where}: {operator} takes a non-empty list"]
        return [p for i, a in enumerate(argument) for p in check_spec(a, path=f"{where}{operator}[{i}]")]
    if operator == "$optional":
        return check_spec(argument, path=where)
    if operator in ("$absent", "$any"):
        return [] if argument is True else [f"{where}: {operator} takes true"]
    if operator == "$type":
        names = [argument] if isinstance(argument, str) else argument
        if not isinstance(names, list) or not names or any(n not in _TYPES for n in names):
            return [f"{where}: $type takes one of {', '.join(sorted(_TYPES))} (or a list of them)"]
        return []
    if operator == "$decimal" or operator in ("$gt", "$gte", "$lt", "$lte"):
        if _as_decimal(argument) is None:
            return [f"{where}: {operator} takes a number, got {_show(argument)}"]
        return []
    if operator == "$date":
        return (
            []
            if parse_date(argument) is not None
            else [f"{where}: $date takes a date, got {_show(argument)}"]
        )
    if operator == "$datetime":
        ok = _parse_datetime(argument) is not None
        return [] if ok else [f"{where}: $datetime takes an ISO date-time, got {_show(argument)}"]
    if operator == "$regex":
        try:
            re.compile(argument)
        except (re.error, TypeError) as exc:
            return [f"{where}: $regex does not compile: {exc}"]
        return []
    if operator == "$contains":
        return [] if isinstance(argument, str) else [f"{where}: $contains takes a string"]
    return []  # $exact: anything


# -- the checks of a trial ---------------------------------------------------------------------------


def chosen_tools(calls: Sequence[CallRecord], case: EvalCase) -> list[str]:
    """The tools the model chose, in first-call order, without maitre's runtime tools (unless the
    case names them)."""
    named = {e.tool for e in case.expected_calls} | set(case.forbidden_tools)
    seen: list[str] = []
    for call in calls:
        runtime = any(tool_matches(call.tool, r) for r in RUNTIME_TOOLS)
        if runtime and not any(tool_matches(call.tool, n) for n in named):
            continue
        if call.tool not in seen:
            seen.append(call.tool)
    return seen


def _label(tool: str, names: Sequence[str]) -> str:
    """A chosen tool under the name a case uses for it (so `shop.get_order` counts as `get_order`)."""
    return next((wanted for wanted in names if tool_matches(tool, wanted)), tool)


def selection_sets(
    calls: Sequence[CallRecord], case: EvalCase, *, names: Sequence[str] = ()
) -> tuple[set[str], set[str]]:
    """(chosen, expected) tool names, both under the case's names (or, for a tool the case does not
    name, under one of `names`): what precision, recall and the confusion matrix count."""
    known = [e.tool for e in case.expected_calls] + list(case.forbidden_tools) + list(names)
    chosen = {_label(t, known) for t in chosen_tools(calls, case)}
    return chosen, {e.tool for e in case.expected_calls}


def constraint_mismatches(call: CallRecord, case: EvalCase) -> list[Mismatch] | None:
    """How `call` breaks the case's business constraints for its tool; None when none apply."""
    for tool, rules in case.constraints.items():
        if tool_matches(call.tool, tool):
            if call.arguments is None:
                return [Mismatch("arguments", "not a JSON object")]
            present = {k: v for k, v in rules.items() if k in call.arguments}
            return match_value(present, call.arguments, path="arguments", allow_extra=True)
    return None


def _argument_match(call: CallRecord, spec: dict[str, Any], case: EvalCase) -> list[Mismatch]:
    if call.arguments is None:
        return [Mismatch("arguments", "not a JSON object")]
    return match_value(spec, call.arguments, path="arguments", allow_extra=case.allow_extra_arguments)


def argument_results(case: EvalCase, calls: Sequence[CallRecord]) -> list[tuple[str, list[Mismatch] | None]]:
    """For each expected call with arguments: None when its tool was never called, `[]` when some
    call of it matched, else the mismatches of the closest call."""
    results: list[tuple[str, list[Mismatch] | None]] = []
    for wanted in case.expected_calls:
        if wanted.arguments is None:
            continue
        candidates = [c for c in calls if tool_matches(c.tool, wanted.tool)]
        if not candidates:
            results.append((wanted.tool, None))
            continue
        found = [_argument_match(c, wanted.arguments, case) for c in candidates]
        results.append((wanted.tool, min(found, key=len)))
    return results


def _selection(case: EvalCase, calls: Sequence[CallRecord]) -> list[Check]:
    expected = case.expected_calls
    chosen = chosen_tools(calls, case)
    if not expected:
        called = f"; called {', '.join(chosen)}" if chosen else ""
        return [Check(name="selection", ok=not chosen, detail="no tool expected" + called)]
    missing = [e.tool for e in expected if not any(tool_matches(t, e.tool) for t in chosen)]
    never = f"never called {', '.join(missing)}; " if missing else ""
    checks = [
        Check(name="selection", ok=not missing, detail=f"{never}called {', '.join(chosen) or 'no tool'}")
    ]
    if case.tool_order == "ordered" and len(expected) > 1:
        sequence = [c.tool for c in calls]
        position = 0
        for wanted in expected:  # each expected tool after the one before it (a subsequence)
            while position < len(sequence) and not tool_matches(sequence[position], wanted.tool):
                position += 1
            position += 1
        wanted_order = " -> ".join(e.tool for e in expected)
        detail = f"expected {wanted_order}; called {' -> '.join(sequence) or 'nothing'}"
        checks.append(Check(name="order", ok=position <= len(sequence), detail=detail))
    return checks


def _approval(expected: bool | list[str], calls: Sequence[CallRecord]) -> Check:
    asked = sorted({c.tool for c in calls if c.approval_requested})
    if isinstance(expected, bool):
        ok = bool(asked) == expected
        want = "an approval request" if expected else "no approval request"
    else:
        want = "approval requests for " + ", ".join(expected)
        ok = len(asked) == len(expected) and all(any(tool_matches(a, w) for a in asked) for w in expected)
    return Check(name="approval", ok=ok, detail=f"expected {want}; asked for {', '.join(asked) or 'none'}")


def check_trial(case: EvalCase, trial: TrialRecord) -> list[Check]:
    """Every expectation of `case` against what happened in `trial`."""
    calls = trial.calls
    checks = _selection(case, calls) if case.scores_selection else []
    results = argument_results(case, calls)
    if results:
        problems = [
            f"{tool}: not called" if found is None else f"{tool}: " + "; ".join(str(m) for m in found)
            for tool, found in results
            if found is None or found
        ]
        checks.append(Check(name="arguments", ok=not problems, detail=" | ".join(problems) or "all matched"))
    if case.forbidden_tools:
        hit = sorted({c.tool for c in calls for f in case.forbidden_tools if tool_matches(c.tool, f)})
        detail = f"called forbidden {', '.join(hit)}" if hit else "no forbidden tool called"
        checks.append(Check(name="forbidden", ok=not hit, detail=detail))
    if case.max_tool_calls is not None:
        detail = f"{len(calls)} calls (at most {case.max_tool_calls})"
        checks.append(Check(name="max_tool_calls", ok=len(calls) <= case.max_tool_calls, detail=detail))
    if case.expected_stop_reason is not None:
        detail = f"expected {case.expected_stop_reason}, got {trial.stop_reason}"
        checks.append(
            Check(name="stop_reason", ok=trial.stop_reason == case.expected_stop_reason, detail=detail)
        )
    if case.expected_approval is not None:
        checks.append(_approval(case.expected_approval, calls))
    if case.constraints:
        broken = []
        for call in calls:
            found = constraint_mismatches(call, case)
            if found:
                broken.append(f"{call.tool}: " + "; ".join(str(m) for m in found))
        checks.append(Check(name="constraints", ok=not broken, detail=" | ".join(broken) or "all held"))
    return checks
