"""compile_sql: the SQL form of a metadata filter keeps exactly the rows the Python predicate keeps."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest

from plm_core.errors import PlmUserError
from plm_index.filters import as_date, compile_filters
from plm_plugins.stores.pg_filters import PY_WHITESPACE, SQL_FUNCTIONS, compile_sql

psycopg = pytest.importorskip("psycopg")

PLUS2 = timezone(timedelta(hours=2))
INJECTION = "x'); DROP TABLE t; --"
# Metadata values chosen to sit on every seam of the semantics.
VALUES: list[Any] = [
    "storage", "Storage", "", "1", "true", "null", INJECTION, "May 2024", "2024-02-30", "2024-13-45",
    "2024-05-01", " 2024-05-01\n", "2024-05-02", "2024-04-30", "2024-05-01T00:00:00", "2024-05-01T10:00:00",
    "2024-05-01T23:59:00", "2024-05-01T10:00:00Z", "2024-05-01T10:00:00z", "2024-05-01T12:00:00+02:00",
    "2024-05-01T10:00:00+00:00", "2024-05-01T10:00:00.5", "2024-05-01T10:00:00.1234567Z", "2024-05-01 10:00",
    "2024-04-30T23:00:00-02:00", "2024-05-01T01:00:00+05:00", "2024-05-01T10:30 +02:00", "2024-05-01T24:00",
    "2024-05-01T10:00:00+24:00", "2024-05-01T10:00:00+02:00:00.5", "0001-01-01T00:30+01:00",
    "9999-12-31T23:00-02:00", "2024-06-01", "2024-06-01T10:00:00Z",
    0, 1, 1.0, 2, 2.0, 2.5, -1, 3, 6, 9, 0.1, 1e-7, 10**20, 1e20, 2**53 + 1,
    True, False, None,
    [], ["db", "ops"], ["backup"], [1, "1", True], [1, 9], [1, 6, 9], ["2024-05-01", "2024-06-01T10:00:00Z"],
    [None], [["db"]], [{"a": 1}], ["storage", 2.0, None, "2024-05-01T10:00:00+02:00"], [[1, 6]], ["2024-02-30", 3],
    {"a": 1}, {"eq": "storage"},
]  # fmt: skip
_MISSING = object()


def _metadata() -> list[dict[str, Any]]:
    """A few hundred metadata dicts: `v` and `w` drawn from VALUES, sometimes missing."""
    n = len(VALUES)
    rows: list[dict[str, Any]] = [{}, {"other": "storage"}]
    for i, v in enumerate(VALUES):
        for j in range(4):
            w = VALUES[(i * 7 + j * 13) % n] if j != 3 else _MISSING
            meta = {"v": v} if w is _MISSING else {"v": v, "w": w}
            rows.append(meta)
        rows.append({"w": v})
    return rows


# Operands for eq / ne / in, as a spec may write them (strings, numbers, objects).
OPERANDS: list[Any] = [
    "storage", "", "1", INJECTION, "2024-02-30", "May 2024", "2024-05-01", " 2024-05-01 ", "2024-05-01T10:00:00",
    "2024-05-01T10:00:00Z", "2024-05-01T12:00:00+02:00", "2024-04-30T23:00:00-02:00", "0001-01-01T00:30+01:00",
    date(2024, 5, 1), datetime(2024, 5, 1, 10), datetime(2024, 5, 1, 12, tzinfo=PLUS2),
    0, 1, 1.0, 2, 2.5, 10**20, 2**53 + 1, 0.1, math.nan, math.inf, True, False, None, "db", "ops",
]  # fmt: skip
NUMBER_BOUNDS: list[Any] = [0, 1, 2, 2.0, 2.5, 5, 6, 9, -1, 1e-7, 10**20, math.inf, -math.inf, math.nan]
DATE_BOUNDS: list[Any] = [
    "2024-05-01", "2024-05-02", "2024-04-30", "2024-05-01T10:00:00", "2024-05-01T10:00:00Z",
    "2024-05-01T09:59:59.999999+00:00", "2024-05-01T12:00:00+02:00", "2024-05-01T00:00:00-05:00", "2024-06-01",
    date(2024, 5, 1), datetime(2024, 5, 1, 10, tzinfo=timezone.utc), "0001-01-01T00:00:00+01:00", "9999-12-31",
]  # fmt: skip


def _specs() -> Iterator[dict[str, Any]]:
    for o in OPERANDS:
        yield {"v": o}
        yield {"v": {"ne": o}}
        yield {"v": {"in": [o]}}
        yield {"v": {"in": [o, "storage", 2, "2024-06-01T10:00:00Z"]}}
    for ops in (["gt"], ["gte"], ["lt"], ["lte"]):
        for b in NUMBER_BOUNDS + DATE_BOUNDS:
            yield {"v": {ops[0]: b}}
    pairs = [(1, 9), (5, 8), (2, 2), (0.05, 0.2), ("2024-05-01", "2024-05-01"), ("2024-04-30", "2024-05-01T10:00")]
    for lo, hi in pairs:
        yield {"v": {"gt": lo, "lt": hi}}
        yield {"v": {"gte": lo, "lte": hi}}
    yield {"v": {"gte": "2024-05-01", "lt": datetime(2024, 5, 1, 11)}}
    yield {"v": {"gte": 1, "ne": 2, "in": [1, 2, 3, 6, 9]}}
    yield {"v": {"eq": "db", "ne": "ops"}}
    yield {"v": {"eq": 1, "in": [1, True, "1"], "lte": 1}}
    yield {"v": {"ne": None}}
    yield {"v": "storage", "w": {"ne": "storage"}}
    yield {"v": {"in": ["2024-05-01", 1, None]}, "w": {"gte": 0}}
    yield {"w": {"in": [True, False]}, "v": {"lt": "2024-06-01"}}
    yield {"v": {"in": [f"s{i}" for i in range(500)] + ["ops"]}}
    yield {"missing": {"ne": "x"}}
    yield {INJECTION: 1}
    yield {"v": "a\x00b"}  # strings Postgres cannot store: nothing equals them
    yield {"v": {"ne": "\ud800"}}
    yield {"v": {"in": ["\ud800", "a\x00", "storage"]}}
    yield {"v": {"ne": 1}, "k\x00": {"ne": 1}}


@pytest.fixture
def conn(pg_dsn: str) -> Iterator[Any]:
    with psycopg.connect(pg_dsn, autocommit=True) as connection:
        connection.execute(SQL_FUNCTIONS)
        connection.execute(SQL_FUNCTIONS)  # idempotent: the store runs it at every start
        connection.execute("CREATE TABLE t (id int PRIMARY KEY, metadata jsonb NOT NULL)")
        with connection.cursor() as cur:
            cur.executemany(
                "INSERT INTO t VALUES (%s, %s::jsonb)", [(i, json.dumps(m)) for i, m in enumerate(_metadata())]
            )
        yield connection


def _mismatches(conn: Any, compile_fn: Callable[[dict[str, Any]], tuple[str, list[Any]]]) -> Iterator[Any]:
    """(spec, rows only SQL keeps, rows only Python keeps) for each spec where they differ."""
    rows = _metadata()
    for spec in _specs():
        predicate = compile_filters(spec)
        assert predicate is not None
        expected = {i for i, meta in enumerate(rows) if predicate(meta)}
        sql, params = compile_fn(spec)
        got = {r[0] for r in conn.execute(f"SELECT id FROM t AS c WHERE {sql}", params).fetchall()}
        if got != expected:
            yield spec, sorted(got - expected)[:3], sorted(expected - got)[:3]


def test_sql_keeps_exactly_the_rows_the_python_predicate_keeps(conn: Any) -> None:
    specs = list(_specs())
    assert len(specs) > 200 and len(_metadata()) > 300
    bad = list(_mismatches(conn, compile_sql))
    assert not bad, "\n".join(f"{s}: extra rows {extra}, missing rows {missing}" for s, extra, missing in bad)
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == len(_metadata())  # no injection


@pytest.mark.parametrize(
    ("wrong", "right"),
    [(">=", ">"), ("w.ts IS NOT NULL", "w.ts IS NULL"), ("AND NOT", "AND"), (" OR c.metadata", " AND c.metadata")],
)
def test_the_equivalence_check_catches_a_wrong_compiler(conn: Any, wrong: str, right: str) -> None:
    def broken(spec: dict[str, Any]) -> tuple[str, list[Any]]:
        sql, params = compile_sql(spec)
        return sql.replace(wrong, right), params

    assert next(_mismatches(conn, broken), None) is not None


def _iso_strings(n: int, seed: int = 7) -> list[str]:
    """ISO-ish datetimes with the odd corners CPython's fromisoformat accepts or refuses, mutated."""
    rng = random.Random(seed)

    def two(hi: int) -> str:
        return str(rng.randint(0, hi)).zfill(2)

    def digits() -> str:
        return "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 9)))

    out = {
        "2024-05-01T10:30:45.1234567a+02:00", "2024-05-01T10:30x+02:00", "2024-05-01T10:30é+02:00",
        "2024-05-01T10:30zz", "2024-05-01T10:30:45+0200305", "2024-05-01T10:30:45+02003055",
        "2024-05-01T10:30:45+00:00:00.5", "2024-05-01T10:30:45-00:00:01.5", "2024-05-01T10:30:45+00:99:99",
        "2024-05-01T10:30:45-23:59:59.9999999", "2024-05-01T10:30:45+24:00", "2024-05-01T10:30Z+02:00",
        "\u30002024-05-01T10:30:45:5\x1c", "0000-01-01", "2023-02-29", "2024-02-29", "١٢٣٤-05-01",
    }  # fmt: skip
    while len(out) < n:
        s = f"{str(rng.randint(1, 9999)).zfill(4)}-{two(13)}-{two(31)}{rng.choice('T ')}{two(23)}:{two(59)}"
        s += (":" + two(59)) * (rng.random() < 0.6) + (rng.choice(".,:") + digits()) * (rng.random() < 0.4)
        k = rng.random()
        if k < 0.2:
            s += rng.choice("Zz")
        elif k < 0.8:
            sep = rng.choice([":", ""])
            s += rng.choice("+-") + sep.join(two(rng.choice([23, 99])) for _ in range(rng.choice([1, 2, 3])))
            s += (rng.choice(".,") + digits()) * (rng.random() < 0.3)
        if rng.random() < 0.2:
            s = s[:10]
        for _ in range(rng.choice([0, 1, 1, 2])):
            i, c = rng.randrange(len(s) + 1), rng.choice("0123456789:.,+-Zz T\u00e9x\n")
            s = rng.choice([s[:i] + c + s[i:], s[:i] + s[i + 1 :], s[:i] + c + s[i + 1 :]])
        out.add(s)
    return sorted(out)


def test_sql_reads_iso_strings_exactly_as_python(conn: Any) -> None:
    """plm_when(string) is (day, UTC instant) of plm_index.filters.as_date, or NULLs."""
    strings = _iso_strings(6000)
    when = [as_date(s) for s in strings]
    assert sum(isinstance(w, datetime) for w in when) > 800 and sum(type(w) is date for w in when) > 100
    day = [w.date() if isinstance(w, datetime) else w for w in when]
    local = [w.replace(tzinfo=None) if isinstance(w, datetime) else None for w in when]
    offset = [(w.utcoffset() or timedelta(0)) if isinstance(w, datetime) else None for w in when]
    wrong = conn.execute(
        "SELECT s, w.day, w.ts::text, d, (l - o)::text FROM unnest(%s::text[], %s::date[], %s::timestamp[], "
        "%s::interval[]) AS u(s, d, l, o), LATERAL plm_when(to_jsonb(s)) AS w "
        "WHERE w.day IS DISTINCT FROM d OR w.ts IS DISTINCT FROM l - o",
        [strings, day, local, offset],
    ).fetchall()
    assert not wrong


def test_values_are_parameters_never_sql() -> None:
    sql, params = compile_sql({INJECTION: INJECTION, "team": {"in": [INJECTION, "a"]}})
    assert "DROP" not in sql and "'" not in sql
    assert sql.count("%s") == len(params) and params[0] == json.dumps({INJECTION: INJECTION})


def test_empty_spec_is_true() -> None:
    assert compile_sql(None) == ("TRUE", [])
    assert compile_sql({}) == ("TRUE", [])


@pytest.mark.parametrize(
    "spec",
    [{"v": {"between": [1, 2]}}, {"v": {"in": []}}, {"v": ["a"]}, {"v": {"gte": "bob"}}, {"": 1}, ["x"]],
)
def test_bad_specs_raise_the_core_error(spec: Any) -> None:
    with pytest.raises(PlmUserError):
        compile_sql(spec)


def test_whitespace_is_what_str_strip_removes() -> None:
    assert set(PY_WHITESPACE) == {i for i in range(0x110000) if chr(i).isspace()}


def test_custom_column() -> None:
    sql, _ = compile_sql({"team": "storage", "n": {"gt": 1}}, column="chunks.meta")
    assert "chunks.meta" in sql and "c.metadata" not in sql
