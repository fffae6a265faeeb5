"""Metadata filters: which chunks a query may return, decided on each chunk's metadata.

A filter spec maps a metadata key to a condition; several keys must all hold (AND):

    {"team": "storage"}                          equality
    {"tags": {"in": ["db", "backup"]}}           the value is one of these
    {"version": {"gte": 2, "lt": 5}}             a range (numbers or dates)
    {"updated": {"gte": "2024-05-01"}}           dates are ISO strings (or date objects)
    {"team": {"ne": "search"}, "draft": False}   not equal; booleans are plain values

A bare value means `{"eq": value}`; an operator dict may combine `eq`, `ne`, `in`, `gt`,
`gte`, `lt`, `lte` (all must hold). The same in the CLI, one `--filter` per condition
(see `parse_filter_args`): `team=storage`, `tags=db,backup`, `version>=2`, `version<5`.

Semantics, chosen so that a filter never raises on odd metadata:
- A missing key never matches, whatever the operator (`ne` included): a filter only
  keeps chunks that carry the field.
- A list value (front-matter `tags: [a, b]`) matches `eq` when it contains the value,
  `in` when any element is in the set, a range when one element satisfies all bounds;
  `ne` is the negation of `eq` (the list does not contain the value).
- Numbers compare numerically (1 == 1.0); booleans are not numbers (True != 1).
- Dates: `2024-05-01` or `2024-05-01T10:00:00[+02:00|Z]` strings (metadata from Markdown
  front matter keeps dates as strings) or date/datetime objects compare as dates when both
  sides are dates. A date without a time means the whole day: a datetime compared with a
  date is cut to its date, so `updated <= 2024-05-01` keeps `2024-05-01T23:00` and
  `updated = 2024-05-01` keeps any time that day. A datetime without a zone counts as UTC
  when compared with one that has a zone.
- A type mismatch (a string against a number range, a date against a number) is no match.
- Bad specs (unknown operator, an empty or non-list `in`, a range bound that is neither a
  number nor a date) raise `PlmUserError` naming the key and the allowed operators.
- Size: a spec names at most 100 keys and lists at most 1,000,000 `in` values in all
  (`MAX_FILTER_KEYS`, `MAX_IN_VALUES`); `in` is a set lookup, so its length costs once,
  when the spec is compiled, not per chunk.

Pure Python on purpose: the core imports no numpy; retrievers turn the predicate into a
mask over their rows.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, timezone
from typing import Any

from plm_core.errors import PlmUserError

Predicate = Callable[[Mapping[str, Any]], bool]

RANGE_OPS = ("gt", "gte", "lt", "lte")
OPS = ("eq", "ne", "in", *RANGE_OPS)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
_MISSING = object()
# Filters may come from a service's users: bound the work one spec can ask for. Matching
# costs one set lookup per value whatever the list's length, so the bound is on building.
MAX_FILTER_KEYS = 100  # metadata fields in one spec
MAX_IN_VALUES = 1_000_000  # 'in' values in one spec, all keys together
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 80
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxset = _SHORT.maxfrozenset = _SHORT.maxdict = 5


# ---------------------------------------------------------------------- values
def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def as_date(value: Any) -> date | datetime | None:
    """`value` as a date or datetime when it is one or an ISO string of one, else None."""
    if isinstance(value, (date, datetime)):
        return value
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        if _DATE.match(text):
            return date.fromisoformat(text)
        if _DATETIME.match(text):
            # Python 3.10's fromisoformat does not read a trailing Z.
            return datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "Zz" else text)
    except ValueError:
        return None
    return None


def _date_pair(a: date | datetime, b: date | datetime) -> tuple[Any, Any]:
    """Two comparable values: a date against a datetime compares by day (see module doc)."""
    a_dt, b_dt = isinstance(a, datetime), isinstance(b, datetime)
    if a_dt and b_dt:
        assert isinstance(a, datetime) and isinstance(b, datetime)
        if (a.tzinfo is None) != (b.tzinfo is None):
            a = a if a.tzinfo else a.replace(tzinfo=timezone.utc)
            b = b if b.tzinfo else b.replace(tzinfo=timezone.utc)
        return a, b
    if a_dt:
        assert isinstance(a, datetime)
        return a.date(), b
    if b_dt:
        assert isinstance(b, datetime)
        return a, b.date()
    return a, b


def _equal(value: Any, target: Any) -> bool:
    if isinstance(value, bool) or isinstance(target, bool):
        return isinstance(value, bool) and isinstance(target, bool) and value is target
    if _is_number(value) or _is_number(target):
        return _is_number(value) and _is_number(target) and value == target
    value_date, target_date = as_date(value), as_date(target)
    if value_date is not None and target_date is not None:
        a, b = _date_pair(value_date, target_date)
        return bool(a == b)
    if type(value) is not type(target) and not (isinstance(value, str) and isinstance(target, str)):
        return False
    try:
        return bool(value == target)
    except Exception:  # an exotic metadata object: no match, never an error
        return False


def _compare(value: Any, op: str, bound: Any) -> bool:
    """`value <op> bound` for a range op; a type mismatch is False."""
    if _is_number(bound):
        if not _is_number(value):
            return False
        a, b = value, bound
    else:
        value_date = as_date(value)
        if value_date is None:
            return False
        a, b = _date_pair(value_date, bound)
    try:
        if op == "gt":
            return bool(a > b)
        if op == "gte":
            return bool(a >= b)
        if op == "lt":
            return bool(a < b)
        return bool(a <= b)
    except TypeError:
        return False


# ---------------------------------------------------------------------- specs
def _short(value: Any) -> str:
    """`repr(value)` cut short: an error about a million-value spec stays one readable line."""
    return _SHORT.repr(value)


def _spec_error(key: str, problem: str) -> PlmUserError:
    return PlmUserError(
        f"filter on {_short(key)}: {problem}. A condition is a value (equality) or a dict of operators "
        f"{', '.join(OPS)}, e.g. {{'team': 'storage'}}, {{'tags': {{'in': ['a', 'b']}}}}, "
        "{'version': {'gte': 2, 'lt': 5}}, {'updated': {'gte': '2024-05-01'}}"
    )


def _scalar(key: str, op: str, value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool, date)):
        return value
    raise _spec_error(key, f"{op!r} needs a single value (a string, number, boolean or date), got {_short(value)}")


def normalize_filters(filters: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The validated spec as {key: {op: operand}}; range bounds that are dates become dates."""
    if filters is None:
        return {}
    if not isinstance(filters, Mapping):
        raise PlmUserError(f"filters must be a mapping of metadata key to condition, got {_short(filters)}")
    if len(filters) > MAX_FILTER_KEYS:
        raise PlmUserError(
            f"filters name {len(filters):,} metadata keys; at most {MAX_FILTER_KEYS} are allowed in one spec"
        )
    out: dict[str, dict[str, Any]] = {}
    n_values = 0
    for key, condition in filters.items():
        if not isinstance(key, str) or not key:
            raise PlmUserError(f"filter keys must be non-empty strings (metadata field names), got {_short(key)}")
        if isinstance(condition, Mapping):
            if not condition:
                raise _spec_error(key, "the operator dict is empty")
            ops = dict(condition)
        elif isinstance(condition, (list, tuple, set, frozenset)):
            raise _spec_error(key, f"a bare list {_short(list(condition))} is ambiguous; write {{'in': [...]}}")
        else:
            ops = {"eq": condition}
        unknown = [op for op in ops if op not in OPS]
        if unknown:
            raise _spec_error(key, f"unknown operator(s) {_short(unknown)}")
        checked: dict[str, Any] = {}
        kinds: set[str] = set()
        for op, operand in ops.items():
            if op in ("eq", "ne"):
                checked[op] = _scalar(key, op, operand)
            elif op == "in":
                if not isinstance(operand, (list, tuple, set, frozenset)):
                    raise _spec_error(key, f"'in' needs a list of values, got {_short(operand)}")
                if not operand:
                    raise _spec_error(key, "'in' needs at least one value (an empty list matches nothing)")
                n_values += len(operand)
                if n_values > MAX_IN_VALUES:
                    raise _spec_error(
                        key,
                        f"'in' lists {n_values:,} values in this spec; at most {MAX_IN_VALUES:,} are allowed "
                        "(all keys together)",
                    )
                checked[op] = [_scalar(key, op, v) for v in operand]
            else:
                bound = operand if _is_number(operand) else as_date(operand)
                if bound is None:
                    raise _spec_error(
                        key, f"{op!r} needs a number or an ISO date ('2024-05-01'), got {_short(operand)}"
                    )
                kinds.add("number" if _is_number(bound) else "date")
                checked[op] = bound
        if len(kinds) > 1:
            raise _spec_error(key, "range bounds mix numbers and dates")
        out[key] = checked
    return out


def _as_utc(moment: datetime) -> datetime:
    """A datetime in the one form set lookups compare: naive counts as UTC (see `_date_pair`)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _key(value: Any) -> tuple[Any, ...] | None:
    """A hashable key equal for two non-date values exactly when `_equal` says they are;
    None for a value no key stands for (NaN equals nothing, an exotic object)."""
    if isinstance(value, bool):
        return ("b", value)
    if _is_number(value):
        return ("n", value) if value == value else None  # NaN != NaN, but a set finds it by identity
    if value is None:
        return ("z",)
    if isinstance(value, str):
        return ("s", value)
    return None


def _membership(operands: Sequence[Any]) -> Callable[[Any], bool]:
    """`value in operands` with `_equal`'s meaning, by set lookups: a long list costs no
    more per chunk than a short one, dates included.

    Dates need three sets because a day equals every time on it while two times on that
    day differ: a day matches a day operand or the day of a datetime operand; a datetime
    matches a day operand by its day, or a datetime operand exactly (naive as UTC).
    """
    keyed: set[tuple[Any, ...]] = set()
    days: set[date] = set()  # date operands
    moments: set[datetime] = set()  # datetime operands, as UTC
    moment_days: set[date] = set()  # the days of datetime operands
    others: list[Any] = []  # operands no key stands for: compared one by one (NaN)
    for operand in operands:
        when = as_date(operand)
        if isinstance(when, datetime):
            moments.add(_as_utc(when))
            moment_days.add(when.date())
        elif when is not None:
            days.add(when)
        elif (k := _key(operand)) is not None:
            keyed.add(k)
        else:
            others.append(operand)

    def lookup(value: Any) -> bool:
        when = as_date(value)
        if isinstance(when, datetime):
            return when.date() in days or _as_utc(when) in moments
        if when is not None:
            return when in days or when in moment_days
        k = _key(value)
        if k is not None:
            return k in keyed
        return any(_equal(value, o) for o in others)

    def contains(value: Any) -> bool:
        try:
            return lookup(value)
        except TypeError:  # metadata that cannot be hashed (an odd str subclass): one by one, like eq
            return any(_equal(value, o) for o in operands)

    return contains


def _condition(key: str, ops: Mapping[str, Any]) -> Predicate:
    ranges = [(op, ops[op]) for op in RANGE_OPS if op in ops]
    member = _membership(ops["in"]) if "in" in ops else None

    def scalar_in_range(value: Any) -> bool:
        return all(_compare(value, op, bound) for op, bound in ranges)

    def holds(meta: Mapping[str, Any]) -> bool:
        value = meta.get(key, _MISSING)
        if value is _MISSING:
            return False
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        if "eq" in ops and not any(_equal(v, ops["eq"]) for v in items):
            return False
        if "ne" in ops and any(_equal(v, ops["ne"]) for v in items):
            return False
        if member is not None and not any(member(v) for v in items):
            return False
        return not ranges or any(scalar_in_range(v) for v in items)

    return holds


def compile_filters(filters: Mapping[str, Any] | None) -> Predicate | None:
    """A predicate over one chunk's metadata, or None when there is nothing to filter."""
    spec = normalize_filters(filters)
    if not spec:
        return None
    conditions = [_condition(key, ops) for key, ops in spec.items()]

    def matches(meta: Mapping[str, Any]) -> bool:
        return all(condition(meta) for condition in conditions)

    return matches


def filter_key(filters: Mapping[str, Any] | None) -> str:
    """A canonical JSON string for a spec: equal specs give equal keys (for caching masks)."""

    def canon(value: Any) -> Any:
        if isinstance(value, (date, datetime)):
            return {"$date": value.isoformat()}
        if isinstance(value, float) and value.is_integer():
            return int(value)  # 2.0 and 2 filter alike
        return value

    spec = {
        key: {
            op: sorted({json.dumps(canon(v), sort_keys=True) for v in operand}) if op == "in" else canon(operand)
            for op, operand in ops.items()
        }
        for key, ops in normalize_filters(filters).items()
    }
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))
