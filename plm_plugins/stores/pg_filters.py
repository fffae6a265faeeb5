"""Metadata filters as SQL: `plm_index.filters` specs compiled to a PostgreSQL WHERE fragment.

`compile_sql(spec, column)` gives `(sql, params)`: a boolean expression over the `jsonb`
column (psycopg 3 `%s` placeholders) that keeps exactly the rows whose metadata
`plm_index.filters.compile_filters(spec)` accepts. Every user value, keys included, is a
parameter; only `column` (trusted, from code) is written into the SQL. The mapping, per key:

- The value is `column -> key`; a missing key is SQL NULL, so no condition holds (`ne` adds
  `column ? key`). `plm_items(value)` is the elements of an array, or the value alone.
- `eq`, `ne`, `in` share one membership test: operands are sorted as in Python's `in` into
  plain JSON values (strings that are not dates, finite numbers, booleans, null), days
  (date operands), and moments (datetime operands, kept as their UTC instant and their own
  written day). An element matches a plain value by jsonb equality (numbers numerically, so
  1 = 1.0, and true is not 1); a date element matches a day, or a moment's day; a datetime
  element matches a day by its own date, or a moment by its instant. `eq` is one operand,
  `ne` is NOT `eq` (with the key present), `in` is any operand; NaN and infinities equal no
  JSON number, and strings Postgres cannot store (NUL, lone surrogates) no stored string,
  so they drop out. A lone plain `eq` (the common `team=storage`) is written as
  jsonb containment, `column @> {key: v} OR column @> {key: [v]}`, which a GIN index serves.
- Ranges: one element must meet all bounds (an EXISTS over `plm_items`): number bounds
  against `plm_num(element)` (NULL unless a JSON number), as exact `numeric`; date bounds
  against `plm_when(element)`, the (day, UTC instant) of an ISO date or datetime string
  read exactly as `plm_index.filters.as_date` reads it with Python's `fromisoformat` (the
  grammar, odd corners included, is copied into SQL), else NULLs: a date bound compares
  days, a datetime bound compares instants with a datetime and days with a date.

`SQL_FUNCTIONS` creates those helpers (`CREATE OR REPLACE`, so it can run at every start)
in the first schema of the search_path; the compiled SQL calls them unqualified. They are
IMMUTABLE (usable in expression indexes); `plm_when` costs some 6 µs a datetime string.

One difference remains, at the edge of floating point: Postgres compares JSON numbers as
exact decimals, Python as binary floats when a float is involved. The two agree on every
int/int and float/float comparison and on int/float ones up to 2**53; past that an int
and a float that Python finds unequal by a few units (10**23 against 1e23) may be equal here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from plm import compile_filters
from plm.filters import RANGE_OPS, as_date, normalize_filters

# The characters str.strip() removes (str.isspace()), which as_date strips before parsing.
PY_WHITESPACE = (
    *range(0x09, 0x0E), *range(0x1C, 0x21), 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
    0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
)  # fmt: skip
_WS = "U&'" + "".join(f"\\{c:04X}" for c in PY_WHITESPACE) + "'"
_X = r"[\x01-\x59\x5b-\x7f]"  # one ASCII character but Z

SQL_FUNCTIONS = r"""
CREATE OR REPLACE FUNCTION plm_items(v jsonb) RETURNS SETOF jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT e FROM jsonb_array_elements(CASE WHEN jsonb_typeof(v) = 'array' THEN v ELSE jsonb_build_array(v) END) AS e
  WHERE v IS NOT NULL $$;
CREATE OR REPLACE FUNCTION plm_num(v jsonb) RETURNS numeric LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN jsonb_typeof(v) = 'number' THEN v::numeric END $$;
CREATE OR REPLACE FUNCTION plm_when(v jsonb, OUT day date, OUT ts timestamp)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE  -- regexes only test (~) and substr() cuts: capture groups make Postgres regexes ~50x slower
  s text; r text; b text; z text; zp int; fp int; y int; mo int; d int; sec text := ''; frac text := '';
  off bigint := 0;
BEGIN
  IF jsonb_typeof(v) <> 'string' THEN RETURN; END IF;
  s := btrim(v #>> '{}', @WS@);
  IF s !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' THEN
    IF right(s, 1) IN ('Z', 'z') THEN s := left(s, -1) || '+00:00'; END IF;
    IF s !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-2][0-9]:[0-5][0-9]' OR substr(s, 12, 2)::int > 23 THEN RETURN; END IF;
    r := substr(s, 17);
    zp := strpos(translate(r, '-', '+'), '+');  -- the zone starts at the first + or -
    IF zp = 0 THEN  -- no zone: [:SS[(:|.|,)digits]] or [(.|,)digits]
      b := r;
      IF b !~ '^(:[0-9]{2}([:.,][0-9]+)?|[.,][0-9]+)?$' THEN RETURN; END IF;
    ELSE  -- CPython lets one ASCII character through before a zone, and anything after 6 digits
      b := left(r, zp - 1);
      z := substr(r, zp + 1);
      IF b !~ '^(@X@|:[0-9]{2}@X@?|(:[0-9]{2}[:.,]|[.,])([0-9]{1,5}|[0-9]{6}[^Z]*))?$'
        OR (z !~ '^[0-9]{2}([.,][0-9]+|:[0-9]{2}([.,][0-9]+|:[0-9]{2}([:.,][0-9]+)?)?)?$'
            AND z !~ '^[0-9]{2}([.,][0-9]+|[0-9]{2}([.,][0-9]+|[0-9]{2}([.,][0-9]+|[0-9]{2,})?)?)?$')
      THEN RETURN; END IF;
      z := replace(z, ':', '');  -- now HH[MM[SS]][(.|,)]digits...
      fp := strpos(translate(z, ',', '.'), '.');
      IF fp > 0 THEN frac := substr(z, fp + 1); z := left(z, fp - 1); ELSE frac := substr(z, 7); END IF;
      off := substr(z, 1, 2)::int * 3600 + coalesce(nullif(substr(z, 3, 2), '')::int, 0) * 60
        + coalesce(nullif(substr(z, 5, 2), '')::int, 0);
      IF off <> 0 THEN  -- CPython: a zone of 0 whole seconds is UTC, its microseconds dropped
        off := off * 1000000 + rpad(left(frac, 6), 6, '0')::int;
      END IF;
      frac := '';
      IF off >= 86400000000 THEN RETURN; END IF;
      IF substr(r, zp, 1) = '-' THEN off := -off; END IF;
    END IF;
    IF left(b, 1) = ':' AND length(b) >= 3 THEN
      sec := substr(b, 2, 2);
      frac := substr(b, 5);
    ELSIF length(b) >= 2 THEN
      frac := substr(b, 2);
    END IF;
    IF sec > '59' THEN RETURN; END IF;
  END IF;
  y := substr(s, 1, 4)::int; mo := substr(s, 6, 2)::int; d := substr(s, 9, 2)::int;
  IF y < 1 OR mo NOT BETWEEN 1 AND 12 OR d < 1 OR d > (CASE WHEN mo = 2 THEN (CASE WHEN mod(y, 4) = 0
      AND (mod(y, 100) <> 0 OR mod(y, 400) = 0) THEN 29 ELSE 28 END) WHEN mo IN (4, 6, 9, 11) THEN 30 ELSE 31 END)
  THEN RETURN; END IF;
  day := make_date(y, mo, d);
  IF length(s) > 10 THEN
    ts := day + make_time(substr(s, 12, 2)::int, substr(s, 15, 2)::int, 0) + interval '1 microsecond'
      * (coalesce(nullif(sec, '')::bigint, 0) * 1000000 + rpad(left(frac, 6), 6, '0')::int - off);
  END IF;
END $$;
""".replace("@WS@", _WS).replace("@X@", _X)


def _storable(text: str) -> bool:
    """Whether Postgres can hold this string at all (no NUL, no lone surrogate): if not, no
    stored key or value equals it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def _instant(moment: datetime) -> list[Any]:
    """A datetime as [naive local time, UTC offset]: the SQL subtracts (Python may overflow)."""
    return [moment.replace(tzinfo=None), moment.utcoffset() or timedelta(0)]


def _exists(column: str, key: str, test: str, dated: bool, test_params: list[Any], params: list[Any]) -> str:
    """SQL: some element of the key's value passes `test` (over `e.v`, and `w` when dated)."""
    params += [key, *test_params]
    lateral = ", LATERAL plm_when(e.v) AS w" if dated else ""
    return f"EXISTS (SELECT 1 FROM plm_items({column} -> %s::text) AS e(v){lateral} WHERE {test})"


def _member(column: str, key: str, operands: list[Any], params: list[Any]) -> str:
    """SQL: some element of the key's value equals one of `operands` (Python's `_equal`)."""
    plain: list[Any] = []
    days: list[date] = []
    moments: list[datetime] = []
    for operand in operands:
        when = as_date(operand)
        if isinstance(when, datetime):
            moments.append(when)
        elif when is not None:
            days.append(when)
        elif isinstance(operand, float) and not math.isfinite(operand):
            continue  # NaN and infinities equal no JSON number
        elif not isinstance(operand, str) or _storable(operand):
            plain.append(operand)
    if not (plain or days or moments):
        return "FALSE"
    if len(plain) == 1 and not (days or moments):  # containment, which a GIN index serves
        params += [json.dumps({key: plain[0]}), json.dumps({key: [plain[0]]})]
        return f"({column} @> %s::jsonb OR {column} @> %s::jsonb)"
    tests: list[str] = []
    test_params: list[Any] = []
    if plain:
        tests.append("e.v = ANY(%s::text[]::jsonb[])")
        test_params.append([json.dumps(v) for v in plain])
    if days:
        tests.append("w.day = ANY(%s::date[])")
        test_params.append(days)
    if moments:
        tests.append(
            "CASE WHEN w.ts IS NOT NULL THEN w.ts IN (SELECT l - o FROM unnest(%s::timestamp[], %s::interval[]) "
            "AS u(l, o)) ELSE w.day = ANY(%s::date[]) END"
        )
        local = [_instant(m) for m in moments]
        test_params += [[lo[0] for lo in local], [lo[1] for lo in local], [m.date() for m in moments]]
    return _exists(column, key, " OR ".join(tests), bool(days or moments), test_params, params)


_SQL_OP = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _ranges(column: str, key: str, bounds: list[tuple[str, Any]], params: list[Any]) -> str:
    """SQL: one element of the key's value meets every bound (numbers, or dates)."""
    tests: list[str] = []
    test_params: list[Any] = []
    dated = False
    for op, bound in bounds:
        sql_op = _SQL_OP[op]
        if isinstance(bound, datetime):
            dated = True
            tests.append(
                f"CASE WHEN w.ts IS NOT NULL THEN w.ts {sql_op} (%s::timestamp - %s::interval) "
                f"ELSE w.day {sql_op} %s::date END"
            )
            test_params += [*_instant(bound), bound.date()]
        elif isinstance(bound, date):
            dated = True
            tests.append(f"w.day {sql_op} %s::date")
            test_params.append(bound)
        elif isinstance(bound, float) and math.isnan(bound):
            return "FALSE"  # nothing compares with NaN
        else:  # exact decimals: a float as its shortest repr, which orders floats as Python does
            tests.append(f"plm_num(e.v) {sql_op} %s::numeric")
            test_params.append(Decimal(repr(bound)) if isinstance(bound, float) else Decimal(int(bound)))
    return _exists(column, key, " AND ".join(tests), dated, test_params, params)


def compile_sql(filters: Mapping[str, Any] | None, column: str = "c.metadata") -> tuple[str, list[Any]]:
    """(SQL boolean expression, params) equivalent to plm_index.filters.compile_filters(filters)
    over the jsonb `column`; ("TRUE", []) for an empty/None spec. Bad specs raise the same
    PlmUserError as compile_filters, before any SQL is built."""
    compile_filters(filters)  # validation, with the core's own errors
    spec = normalize_filters(filters)
    if not spec:
        return "TRUE", []
    parts: list[str] = []
    params: list[Any] = []
    for key, ops in spec.items():
        if not _storable(key):
            return "FALSE", []  # no stored metadata has this key
        if "eq" in ops:
            parts.append(_member(column, key, [ops["eq"]], params))
        if "ne" in ops:
            params.append(key)
            parts.append(f"({column} ? %s::text) AND NOT {_member(column, key, [ops['ne']], params)}")
        if "in" in ops:
            parts.append(_member(column, key, list(ops["in"]), params))
        bounds = [(op, ops[op]) for op in RANGE_OPS if op in ops]
        if bounds:
            parts.append(_ranges(column, key, bounds, params))
    return " AND ".join(f"({p})" for p in parts), params
