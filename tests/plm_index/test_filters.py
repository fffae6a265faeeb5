"""Metadata filter specs: matching semantics, validation, CLI parsing, canonical keys."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import pytest

from plm_core.errors import PlmUserError
from plm_index.cli_values import parse_filter_args
from plm_index.filters import compile_filters, filter_key


def _matches(filters: dict[str, Any], meta: dict[str, Any]) -> bool:
    predicate = compile_filters(filters)
    assert predicate is not None
    return predicate(meta)


def test_no_filters_compile_to_none() -> None:
    assert compile_filters(None) is None
    assert compile_filters({}) is None


@pytest.mark.parametrize(
    ("filters", "meta", "expected"),
    [
        ({"team": "storage"}, {"team": "storage"}, True),
        ({"team": "storage"}, {"team": "search"}, False),
        ({"team": "storage"}, {"other": "storage"}, False),  # missing key: no match
        ({"tags": "db"}, {"tags": ["backup", "db"]}, True),  # list contains value
        ({"tags": "db"}, {"tags": ["backup"]}, False),
        ({"version": 2}, {"version": 2.0}, True),  # numbers compare numerically
        ({"version": 2}, {"version": "2"}, False),  # a string is not a number
        ({"draft": True}, {"draft": 1}, False),  # bools are not numbers
        ({"draft": False}, {"draft": False}, True),
        ({"team": {"eq": "storage"}}, {"team": "storage"}, True),
        ({"team": {"ne": "storage"}}, {"team": "search"}, True),
        ({"team": {"ne": "storage"}}, {"team": "storage"}, False),
        ({"team": {"ne": "storage"}}, {}, False),  # missing key never matches, ne included
        ({"tags": {"ne": "db"}}, {"tags": ["db", "x"]}, False),  # ne = the list lacks the value
        ({"tags": {"in": ["db", "ops"]}}, {"tags": ["backup", "ops"]}, True),
        ({"tags": {"in": ["db", "ops"]}}, {"tags": ["backup"]}, False),
        ({"team": {"in": ["storage", "search"]}}, {"team": "search"}, True),
        ({"team": {"in": ["storage", "search"]}}, {"team": "ui"}, False),
    ],
)
def test_equality_and_in(filters: dict[str, Any], meta: dict[str, Any], expected: bool) -> None:
    assert _matches(filters, meta) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, False), (2, True), (4.5, True), (5, False), ("3", False), (True, False), (None, False), ([1, 3], True)],
)
def test_number_ranges(value: Any, expected: bool) -> None:
    assert _matches({"version": {"gte": 2, "lt": 5}}, {"version": value}) is expected


def test_range_bounds_each_op() -> None:
    meta = {"n": 3}
    assert _matches({"n": {"gt": 2}}, meta) and not _matches({"n": {"gt": 3}}, meta)
    assert _matches({"n": {"gte": 3}}, meta) and not _matches({"n": {"gte": 3.5}}, meta)
    assert _matches({"n": {"lt": 4}}, meta) and not _matches({"n": {"lt": 3}}, meta)
    assert _matches({"n": {"lte": 3}}, meta) and not _matches({"n": {"lte": 2.9}}, meta)


def test_a_list_value_needs_one_element_inside_the_whole_range() -> None:
    # 1 is >= 0 but not > 5... and 9 is > 5 but not < 8: no single element fits both
    assert not _matches({"v": {"gt": 5, "lt": 8}}, {"v": [1, 9]})
    assert _matches({"v": {"gt": 5, "lt": 8}}, {"v": [1, 6, 9]})


@pytest.mark.parametrize(
    ("filters", "value", "expected"),
    [
        ({"gte": "2024-05-01"}, "2024-05-01", True),
        ({"gte": "2024-05-01"}, "2024-04-30", False),
        ({"gt": "2024-05-01"}, "2024-05-02", True),
        ({"lt": "2024-06-01"}, "2024-05-31", True),
        # a date is the whole day: a time on that day is neither before nor after it
        ({"lte": "2024-05-01"}, "2024-05-01T23:00:00", True),
        ({"gt": "2024-05-01"}, "2024-05-01T23:00:00", False),
        ({"lt": "2024-05-01"}, "2024-05-01T00:00:00", False),
        ({"gte": "2024-05-01T10:00:00"}, "2024-05-01", True),  # the day counts, whichever side
        # datetimes compare exactly; a naive one counts as UTC against a zoned one
        ({"gte": "2024-05-01T10:00:00"}, "2024-05-01T09:59:59", False),
        ({"gte": "2024-05-01T10:00:00"}, "2024-05-01T10:30:00Z", True),
        ({"lt": "2024-05-01T10:00:00+02:00"}, "2024-05-01T07:00:00", True),
        ({"gte": date(2024, 5, 1)}, datetime(2024, 5, 1, 8), True),  # objects work too
        ({"gte": "2024-05-01"}, date(2024, 6, 1), True),
        ({"gte": "2024-05-01"}, "May 2024", False),  # not an ISO date: no match
        ({"gte": "2024-05-01"}, 20240501, False),  # a number is not a date
        ({"gte": "2024-05-01"}, "2024-13-45", False),  # looks like a date, is not one
    ],
)
def test_date_ranges(filters: dict[str, Any], value: Any, expected: bool) -> None:
    assert _matches({"updated": filters}, {"updated": value}) is expected


def test_date_equality_by_day() -> None:
    assert _matches({"updated": "2024-05-01"}, {"updated": "2024-05-01T10:00:00"})
    assert not _matches({"updated": "2024-05-01"}, {"updated": "2024-05-02"})
    assert _matches({"updated": {"in": ["2024-04-01", "2024-05-01"]}}, {"updated": "2024-05-01"})


def test_number_range_on_a_string_value_is_no_match() -> None:
    assert not _matches({"version": {"gte": 2}}, {"version": "v3"})
    assert not _matches({"version": {"gte": 2}}, {"version": "2024-05-01"})


def test_several_keys_all_hold() -> None:
    filters = {"team": "storage", "version": {"gte": 2}, "tags": {"in": ["db"]}}
    assert _matches(filters, {"team": "storage", "version": 3, "tags": ["db"]})
    assert not _matches(filters, {"team": "storage", "version": 1, "tags": ["db"]})
    assert not _matches(filters, {"team": "storage", "version": 3})


def test_several_ops_on_one_key_all_hold() -> None:
    filters = {"version": {"gte": 1, "ne": 2, "in": [1, 2, 3, 7]}}
    assert [v for v in range(10) if _matches(filters, {"version": v})] == [1, 3, 7]


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"version": {"between": [1, 2]}}, r"filter on 'version': unknown operator\(s\) \['between'\].*eq, ne, in, gt"),
        ({"tags": {"in": []}}, r"'tags'.*'in' needs at least one value"),
        ({"tags": {"in": "db"}}, r"'tags'.*'in' needs a list"),
        ({"tags": ["a", "b"]}, r"'tags'.*bare list.*'in'"),
        ({"name": {"gte": "bob"}}, r"'name'.*'gte' needs a number or an ISO date"),
        ({"v": {"gte": True}}, r"'v'.*'gte' needs a number"),
        ({"v": {"gte": 1, "lt": "2024-01-01"}}, r"'v'.*mix numbers and dates"),
        ({"v": {}}, r"'v'.*empty"),
        ({"v": {"eq": {"a": 1}}}, r"'v'.*'eq' needs a single value"),
        ({"": "x"}, r"non-empty strings"),
    ],
)
def test_bad_specs_name_the_key_and_the_operators(filters: dict[str, Any], message: str) -> None:
    with pytest.raises(PlmUserError, match=message):
        compile_filters(filters)


def test_a_spec_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(PlmUserError, match="mapping"):
        compile_filters(["team=storage"])  # type: ignore[arg-type]


def test_odd_metadata_never_raises() -> None:
    predicate = compile_filters({"v": {"gte": 1}, "w": "x", "d": {"lt": "2024-01-01"}})
    assert predicate is not None
    odd: list[dict[str, Any]] = [
        {},
        {"v": None, "w": None, "d": None},
        {"v": {"a": 1}, "w": ["x", {"y": 1}], "d": [None, 3]},
    ]
    for meta in odd:
        assert predicate(meta) is False


# ---------------------------------------------------------------------- CLI
def test_parse_filter_args_operators() -> None:
    spec = parse_filter_args(
        ["team=storage", "tags=db, backup", "year>=2020", "year<2024", "score>0.5", "draft=false", "n!=3", "m<=9"]
    )
    assert spec == {
        "team": "storage",
        "tags": {"in": ["db", "backup"]},
        "year": {"gte": 2020, "lt": 2024},
        "score": {"gt": 0.5},
        "draft": False,
        "n": {"ne": 3},
        "m": {"lte": 9},
    }


def test_parse_filter_args_values() -> None:
    spec = parse_filter_args(
        ["a=1", "b=-2.5", "c=true", "d=2024-05-01", "e='007'", 'f="x, y"', "g=x,'y, z'", "h==v", "i=1e3"]
    )
    assert spec == {
        "a": 1,
        "b": -2.5,
        "c": True,
        "d": "2024-05-01",
        "e": "007",
        "f": "x, y",
        "g": {"in": ["x", "y, z"]},
        "h": "v",
        "i": 1000.0,
    }
    assert parse_filter_args(["updated>=2024-05-01", "n!=3", "n>0.5"]) == {
        "updated": {"gte": "2024-05-01"},
        "n": {"ne": 3, "gt": 0.5},
    }
    assert parse_filter_args([]) == {}


def test_parsed_args_filter_like_the_python_spec() -> None:
    predicate = compile_filters(parse_filter_args(["tags=db,ops", "version>=2", "updated<2024-06-01"]))
    assert predicate is not None
    assert predicate({"tags": ["ops"], "version": 2, "updated": "2024-05-31"})
    assert not predicate({"tags": ["ops"], "version": 2, "updated": "2024-06-01"})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["team"], "expected KEY=VALUE"),
        (["=storage"], "expected KEY=VALUE"),
        (["team="], "no value after '='"),
        (["version=>2"], "starts with an operator"),
        (["version>=1,2"], "only works with '='"),
        (["tags=a,,b"], "empty item"),
        (["team=a", "team=b"], "already has a 'eq' condition.*team=a,b"),
        (["name>=bob"], "'name'.*number or an ISO date"),
    ],
)
def test_bad_filter_args_show_an_example(args: list[str], message: str) -> None:
    with pytest.raises(PlmUserError, match=message):
        parse_filter_args(args)
    if "ISO" not in message and "team=a,b" not in message:  # those two carry their own hint
        with pytest.raises(PlmUserError, match="--filter team=storage"):
            parse_filter_args(args)


# ---------------------------------------------------------------------- keys
def test_filter_key_is_canonical() -> None:
    a = filter_key({"team": "storage", "v": {"gte": 2, "lt": 5.0}, "tags": {"in": ["b", "a"]}})
    b = filter_key({"tags": {"in": ["a", "b", "a"]}, "v": {"lt": 5, "gte": 2.0}, "team": {"eq": "storage"}})
    assert a == b
    assert filter_key({"team": "storage"}) != filter_key({"team": "search"})
    assert filter_key({"d": {"gte": "2024-05-01"}}) == filter_key({"d": {"gte": date(2024, 5, 1)}})
    assert filter_key({"v": 1}) != filter_key({"v": "1"}) != filter_key({"v": True})


def test_in_with_a_huge_list_is_a_set_lookup_with_the_same_meaning() -> None:
    import time

    metadata = [
        {"section": f"s{i % 20}", "n": i % 7, "flag": i % 2 == 0, "day": f"2024-01-{1 + i % 9:02d}"} for i in range(300)
    ]
    values = [f"v{i}" for i in range(100_000)]
    t0 = time.perf_counter()
    match = compile_filters({"section": {"in": [*values, "s3"]}})
    assert match is not None and sum(match(m) for m in metadata) == 15
    assert time.perf_counter() - t0 < 5  # was minutes: rows x values comparisons
    # same meaning as equality: numbers across int/float, booleans apart from numbers, dates by day
    by_number = compile_filters({"n": {"in": [*range(1000, 2000), 3.0]}})
    assert by_number is not None and [m["n"] for m in metadata if by_number(m)] == [3] * 43
    by_bool = compile_filters({"flag": {"in": [True]}})
    assert by_bool is not None and sum(by_bool(m) for m in metadata) == 150
    assert compile_filters({"n": {"in": [True]}})({"n": 1}) is False  # type: ignore[misc]
    by_day = compile_filters({"day": {"in": ["2024-01-02T10:00:00", "nope"]}})
    assert by_day is not None and sum(by_day(m) for m in metadata) == 34
    with pytest.raises(PlmUserError, match="at most"):
        compile_filters({"section": {"in": list(range(1_000_001))}})


class _UnhashableText(str):
    __hash__ = None  # type: ignore[assignment]


def test_in_means_any_eq_for_every_kind_of_value() -> None:
    """`{"in": values}` keeps exactly what one `{"eq": v}` per value keeps, whatever the
    types: the set lookups must not change what equality means."""
    import math
    from datetime import timedelta, timezone

    plus2 = timezone(timedelta(hours=2))
    operands: list[Any] = [
        "storage", "2024-05-01", " 2024-05-02 ", "2024-05-03T10:00:00", "2024-05-03T12:00:00+02:00",
        "2024-13-45", date(2024, 6, 1), datetime(2024, 6, 2, 8, 30), datetime(2024, 6, 3, 1, tzinfo=plus2),
        1, 2.5, 0, True, None, math.nan, "", "1",
    ]  # fmt: skip
    values: list[Any] = [
        *operands, "Storage", "2024-05-01T23:59:00", "2024-05-02", "2024-05-03", "2024-05-03T10:00:00Z",
        "2024-05-03T10:00:00+00:00", "2024-05-03T10:00:01", date(2024, 5, 3), datetime(2024, 5, 1),
        datetime(2024, 6, 1, 23, tzinfo=plus2), datetime(2024, 6, 2, 8, 30, tzinfo=timezone.utc),
        datetime(2024, 6, 2, 10, 30, tzinfo=plus2), datetime(2024, 6, 2, 23, 59), "2024-06-02",
        datetime(2024, 6, 2, 23, tzinfo=timezone.utc), 1.0, 2, 1 + 0j, False, 2.5000001, float("nan"),
        "2024-13-45 ", {"a": 1}, ["storage"], ("x", 1.0), b"storage", _UnhashableText("storage"),
        _UnhashableText("2024-05-01"), _UnhashableText("other"),
    ]  # fmt: skip
    one_of = compile_filters({"v": {"in": operands}})
    each = [compile_filters({"v": o}) for o in operands]
    assert one_of is not None and all(e is not None for e in each)
    for value in values:
        for meta in ({"v": value}, {"v": [value]}, {"v": ["zzz", value]}):
            expected = any(e(meta) for e in each if e is not None)
            assert one_of(meta) is expected, (value, meta)
    # spot checks that the oracle itself means what the module doc says
    assert one_of({"v": "2024-05-01T23:59:00"}) and one_of({"v": datetime(2024, 6, 2, 10, 30, tzinfo=plus2)})
    assert not one_of({"v": "2024-05-03T10:00:01"}) and not one_of({"v": math.nan}) and not one_of({"v": False})


def test_in_with_100k_dates_is_a_set_lookup() -> None:
    """Dates were still compared one by one: 100k ISO days over 300 rows took 45 s."""
    import time
    from datetime import timedelta

    metadata = [{"day": f"2024-01-{1 + i % 9:02d}", "at": f"2024-01-0{1 + i % 3}T10:00:00Z"} for i in range(300)]
    days = [(date(1800, 1, 1) + timedelta(days=i)).isoformat() for i in range(100_000)]  # up to 2073
    moments = [datetime(2000, 1, 1) + timedelta(minutes=i) for i in range(100_000)]
    t0 = time.perf_counter()
    by_day = compile_filters({"day": {"in": [*days[:80_000], "2024-01-02T09:00:00"]}})
    by_moment = compile_filters({"at": {"in": [*moments, datetime(2024, 1, 2, 10), date(2024, 1, 3)]}})
    assert by_day is not None and by_moment is not None
    assert sum(by_day(m) for m in metadata) == 34  # 2024 is past the 80k days: only the datetime's day
    assert sum(by_moment(m) for m in metadata) == 200  # 01-02 10:00 exactly, and all of 01-03
    assert time.perf_counter() - t0 < 5  # was 45 s; a loaded CI machine needs room above ~0.3 s


def test_spec_size_is_bounded_with_a_short_error() -> None:
    from plm_index.filters import MAX_FILTER_KEYS, MAX_IN_VALUES

    with pytest.raises(PlmUserError, match=f"at most {MAX_FILTER_KEYS} are allowed"):
        compile_filters({f"k{i}": i for i in range(MAX_FILTER_KEYS + 1)})
    half = MAX_IN_VALUES // 2 + 1
    with pytest.raises(PlmUserError, match="all keys together") as info:
        compile_filters({"a": {"in": list(range(half))}, "b": {"in": list(range(half))}})
    assert "'b'" in str(info.value)
    for huge in ({"tags": list(range(500_000))}, {"v": {"gte": "x" * 500_000}}, ["x"] * 500_000):
        with pytest.raises(PlmUserError) as info:
            compile_filters(huge)  # type: ignore[arg-type]
        assert len(str(info.value)) < 600, "an error echoing a user's spec stays one short paragraph"
