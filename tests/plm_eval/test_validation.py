"""YAML validation cases: loading errors and the expectation checks, on hand-made hits."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from plm_core.errors import PlmUserError
from plm_core.records import Hit
from plm_eval.validation import Case, check_case, load_cases, run_case, run_cases, summary

REPO = Path(__file__).resolve().parents[2]

DR = {"section": "operations", "title": "Disaster Recovery", "version": 5, "updated": "2026-04-22"}
BILLING = {"section": "billing", "title": "Billing and Invoices", "version": 2}
HITS = [  # ranks count from 1, as users see them
    Hit(
        "dr#1",
        "disaster-recovery",
        0.9,
        1,
        "An **RPO of 15  minutes** means at most\nthe last writes",
        ("Disaster Recovery", "Recovery objectives"),
        DR,
    ),
    Hit(
        "bk#0",
        "backup-and-restore",
        0.8,
        2,
        "Snapshots run hourly.",
        ("Backup and Restore",),
        {"section": "operations"},
    ),
    Hit(
        "bi#2",
        "billing-and-invoices",
        0.7,
        3,
        "Invoices are issued monthly.",
        ("Billing and Invoices", "Invoices"),
        BILLING,
    ),
]


def case(k: int = 5, **expect: Any) -> Case:
    return Case.model_validate({"name": "c", "query": "q", "k": k, "expect": expect})


# ---------------------------------------------------------------- check_case


@pytest.mark.parametrize(
    "expect",
    [
        {"doc_id": "disaster-recovery"},
        {"doc_id": ["disaster-recovery", "billing-and-invoices"]},
        {"doc_id": "backup-and-restore", "rank_at_most": 2},
        {"not_doc_id": ["dns", "quotas"]},
        {"text_contains": "rpo OF 15 minutes"},  # case and whitespace runs are ignored
        {"text_contains": ["15 minutes", "issued monthly"]},  # may be met by different hits
        {"heading_contains": "recovery objectives"},
        {"heading_contains": "Disaster Recovery > Recovery"},
        {"metadata": {"section": "operations", "title": "Disaster Recovery"}},
        {"metadata": {"version": "5"}},  # equal as text
        {"metadata": {"updated": date(2026, 4, 22)}},  # what YAML makes of `updated: 2026-04-22`
    ],
)
def test_expectations_that_hold(expect: dict[str, Any]) -> None:
    assert check_case(case(**expect), HITS) == []


@pytest.mark.parametrize(
    ("expect", "k", "message"),
    [
        (
            {"doc_id": "dns"},
            5,
            "doc_id: 'dns' is not in the top 5 (got: disaster-recovery, backup-and-restore, billing-and-invoices)",
        ),
        ({"doc_id": "billing-and-invoices"}, 2, "doc_id: 'billing-and-invoices' is not in the top 2"),
        (
            {"doc_id": "billing-and-invoices", "rank_at_most": 2},
            5,
            "rank_at_most: 'billing-and-invoices' first appears at rank 3, expected rank <= 2",
        ),
        ({"not_doc_id": "billing-and-invoices"}, 5, "not_doc_id: 'billing-and-invoices' is in the top 5, at rank 3"),
        ({"text_contains": "RPO of **15"}, 5, "text_contains: no hit in the top 5 contains 'RPO of **15'"),
        ({"text_contains": "issued monthly"}, 2, "text_contains: no hit in the top 2 contains 'issued monthly'"),
        (
            {"heading_contains": "Failover"},
            5,
            "heading_contains: no heading in the top 5 contains 'Failover' "
            "(headings: Disaster Recovery > Recovery objectives;",
        ),
        (
            {"metadata": {"section": "security"}},
            5,
            "metadata: no hit in the top 5 has {'section': 'security'} (got section='operations' at ranks 1, 2; "
            "section='billing' at rank 3)",
        ),
        # one hit must carry every listed value: these are on two different hits
        ({"metadata": {"section": "billing", "title": "Disaster Recovery"}}, 5, "metadata: no hit in the top 5 has"),
    ],
)
def test_expectations_that_fail_say_what_and_why(expect: dict[str, Any], k: int, message: str) -> None:
    failures = check_case(case(k=k, **expect), HITS)
    assert len(failures) == 1
    assert failures[0].startswith(message), failures[0]


def test_every_failing_expectation_is_reported() -> None:
    failures = check_case(case(doc_id="dns", text_contains="nope", not_doc_id="disaster-recovery"), HITS)
    assert [f.split(":")[0] for f in failures] == ["doc_id", "not_doc_id", "text_contains"]


def test_no_hits_fails_readably() -> None:
    (failure,) = check_case(case(doc_id="dns"), [])
    assert failure == "doc_id: 'dns' is not in the top 5 (got: no hits)"


# ---------------------------------------------------------------- running


class FakeJob:
    def __init__(self, hits: list[Hit], error: Exception | None = None) -> None:
        self.hits, self.error, self.calls = hits, error, []  # type: ignore[var-annotated]

    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None) -> list[Hit]:
        self.calls.append((query, k, filters))
        if self.error:
            raise self.error
        return self.hits[:k]


def test_run_cases_passes_k_and_filters_and_sums_up() -> None:
    job = FakeJob(HITS)
    ok, bad = case(k=3, doc_id="disaster-recovery"), case(k=1, doc_id="backup-and-restore")
    results = run_cases(job, [ok, bad])
    assert [r.status for r in results] == ["pass", "fail"]
    assert job.calls == [("q", 3, None), ("q", 1, None)]
    assert summary(results) == "1 passed, 1 failed"
    assert "backup-and-restore" in results[1].report() and "1. disaster-recovery" in results[1].report()


def test_a_pipeline_that_cannot_filter_makes_an_error_result_not_a_crash() -> None:
    filtered = Case.model_validate({"query": "q", "filters": {"section": "operations"}, "expect": {"doc_id": "x"}})
    job = FakeJob([], PlmUserError("retrieval stage 'retrieve' does not support metadata filters yet"))
    (result,) = run_cases(job, [filtered])
    assert result.status == "error" and "does not support metadata filters" in result.messages[0]
    assert summary([result]) == "0 passed, 0 failed, 1 error"


def test_hits_outside_the_filters_are_an_error() -> None:
    filtered = Case.model_validate(
        {"query": "q", "filters": {"section": "operations"}, "expect": {"doc_id": "disaster-recovery"}}
    )
    result = run_case(FakeJob(HITS), filtered)
    assert result.status == "error"
    assert result.messages == [
        "retrieval ignored filters {'section': 'operations'}: rank 3 (billing-and-invoices) has section='billing'"
    ]


# ---------------------------------------------------------------- loading


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cases.yaml"
    path.write_text(text)
    return path


def test_load_applies_defaults_and_names(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
defaults: {k: 3}
cases:
  - query: How long is a JWT valid?
    expect: {doc_id: 123, text_contains: [3600, seconds]}
  - name: explicit
    query: q
    k: 7
    expect: {doc_id: [a, b], rank_at_most: 7}
""",
    )
    first, second = load_cases(path)
    assert (first.name, first.top_k, first.expect.doc_id, first.expect.text_contains) == (
        "How long is a JWT valid?",
        3,
        ["123"],
        ["3600", "seconds"],
    )
    assert (second.name, second.top_k, second.expect.doc_id) == ("explicit", 7, ["a", "b"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "cases:\n  - name: rpo\n    query: q\n    expect: {doc_idd: x}\n",
            ["case 1 ('rpo'): unknown key 'expect.doc_idd'", "Did you mean 'doc_id'?"],
        ),
        (
            "cases:\n  - name: rpo\n    query: q\n    expct: {doc_id: x}\n",
            ["case 1 ('rpo'): unknown key 'expct'", "missing required key 'expect'"],
        ),
        ("cases:\n  - name: rpo\n    expect: {doc_id: x}\n", ["case 1 ('rpo'): missing required key 'query'"]),
        (
            "cases:\n  - query: where\n    k: five\n    expect: {doc_id: x}\n",
            ["case 1 ('where'): key 'k': Input should be a valid integer", "(got 'five')"],
        ),
        (
            "cases:\n  - query: a\n    expect: {doc_id: x}\n  - query: b\n    expect: {doc_id: {x: 1}}\n",
            ["case 2 ('b'): key 'expect.doc_id.0'"],
        ),
        ("cases:\n  - query: a\n    expect: {rank_at_most: 2}\n", ["rank_at_most needs doc_id"]),
        ("cases:\n  - query: a\n    expect: {}\n", ["give at least one expectation"]),
        ("defaults: {top_k: 3}\ncases: []\n", ["defaults: unknown key 'top_k'", "cases"]),
        (
            "cases:\n  - query: a\n    k: 3\n    expect: {doc_id: x, rank_at_most: 4}\n",
            ["case 1 ('a'): expect.rank_at_most = 4 is larger than k = 3"],
        ),
        (
            "cases:\n  - {query: a, expect: {doc_id: x}}\n  - {query: a, expect: {doc_id: y}}\n",
            ["case 2 ('a'): duplicate case name 'a'"],
        ),
        ("cases:\n  - query: [unclosed\n", [":3: malformed YAML"]),
        ("- query: a\n", ["expected a mapping with a 'cases:' list"]),
        ("", ["expected a mapping"]),
    ],
)
def test_malformed_files_name_file_case_and_key(tmp_path: Path, text: str, expected: list[str]) -> None:
    path = write(tmp_path, text)
    with pytest.raises(PlmUserError) as info:
        load_cases(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    for part in expected:
        assert part in message, message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PlmUserError, match="cases file not found"):
        load_cases(tmp_path / "nope.yaml")


def test_the_shipped_cases_file_loads() -> None:
    cases = load_cases(REPO / "examples" / "sample_corpus" / "cases.yaml")
    assert 10 <= len(cases) <= 15 and not any(c.filters for c in cases)


def test_cli_rejects_a_malformed_cases_file_before_loading_anything(tmp_path: Path) -> None:
    path = write(tmp_path, "cases:\n  - name: rpo\n    query: q\n    expect: {txt_contains: x}\n")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "plm_index.cli",
            "validate",
            "-c",
            str(REPO / "configs" / "poc_parity.toml"),
            "--cases",
            str(path),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={**os.environ, "PLM_PROGRESS": "0"},
    )
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.startswith("error: ") and "Traceback" not in res.stderr
    assert "case 1 ('rpo'): unknown key 'expect.txt_contains'" in res.stderr


# ---------------------------------------------------------------- filtered cases


def _filtered_hit(rank: int, **metadata: Any) -> Hit:
    return Hit(f"c{rank}", f"d{rank}", 1.0 / rank, rank, "text", ("T",), metadata)


@pytest.mark.parametrize(
    ("filters", "inside", "outside"),
    [
        ("{version: {gte: 3}}", [{"version": 4}, {"version": 3.0}], {"version": 2}),
        ("{version: {gt: 1, lte: 5}}", [{"version": 5}], {"version": "5"}),  # a string is not a number
        ("{section: {in: [ops, security]}}", [{"section": "security"}, {"section": "ops"}], {"section": "billing"}),
        ("{section: {ne: billing}}", [{"section": "ops"}], {"section": "billing"}),
        ("{section: {ne: billing}}", [{"section": "ops"}], {"team": "x"}),  # a missing key never matches
        # YAML reads 2024-05-01 as a date; front matter keeps dates as strings; a date is the whole day
        (
            "{updated: {gte: 2024-05-01}}",
            [{"updated": "2024-05-01T08:00:00Z"}, {"updated": "2025-01-01"}],
            {"updated": "2024-04-30"},
        ),
        ("{updated: 2024-05-01}", [{"updated": "2024-05-01T23:59:00"}], {"updated": "2024-05-02"}),
        ("{updated: {in: [2024-05-01, 2024-06-01]}}", [{"updated": "2024-06-01"}], {"updated": "2024-05-31"}),
        ("{tags: db}", [{"tags": ["backup", "db"]}], {"tags": ["backup"]}),  # a list value contains
        ("{tags: {in: [db, ops]}}", [{"tags": ["x", "ops"]}], {"tags": []}),
        ("{tags: {ne: db}}", [{"tags": ["ops"]}], {"tags": ["ops", "db"]}),
        ("{draft: false}", [{"draft": False}], {"draft": 0}),  # booleans are not numbers
    ],
)
def test_filtered_results_are_judged_by_plm_core_filters(
    tmp_path: Path, filters: str, inside: list[dict[str, Any]], outside: dict[str, Any]
) -> None:
    """`plm validate` must not call valid filtered results "retrieval ignored filters"
    (it used plain equality), yet still catch a hit the filters exclude."""
    path = write(tmp_path, f"cases:\n  - query: q\n    filters: {filters}\n    expect: {{doc_id: d1}}\n")
    (filtered,) = load_cases(path)
    hits = [_filtered_hit(rank, **meta) for rank, meta in enumerate(inside, 1)]
    result = run_case(FakeJob(hits), filtered)
    assert result.status == "pass", result.report()
    result = run_case(FakeJob([*hits, _filtered_hit(len(hits) + 1, **outside)]), filtered)
    assert result.status == "error", result.report()
    assert result.messages[0].startswith(f"retrieval ignored filters {filtered.filters}: rank {len(hits) + 1} ")


def test_a_bad_filter_spec_is_a_file_error_naming_the_case(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "cases:\n  - {query: a, expect: {doc_id: x}}\n"
        "  - name: newer\n    query: b\n    filters: {version: {newer_than: 3}}\n    expect: {doc_id: x}\n",
    )
    with pytest.raises(PlmUserError) as info:
        load_cases(path)
    message = str(info.value)
    assert message.startswith(f"{path}: case 2 ('newer'): filters: filter on 'version': unknown operator"), message


def test_a_bad_filter_spec_the_retriever_ignored_is_an_error_result() -> None:
    filtered = Case.model_validate({"query": "q", "filters": {"v": {"in": []}}, "expect": {"doc_id": "x"}})
    result = run_case(FakeJob(HITS), filtered)  # a stub that never looks at the filters
    assert result.status == "error" and "'in' needs at least one value" in result.messages[0]


# ---------------------------------------------------------------- hostile files


def _one_line_error(path: Path) -> str:
    with pytest.raises(PlmUserError) as info:
        load_cases(path)
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message, message
    return message


BILLION_LAUGHS = "cases:\n  - &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"  - &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]\n" for i in range(1, 9)
)  # 9 ** 8 values at the last level


def test_nested_aliases_are_one_line_error_in_milliseconds(tmp_path: Path) -> None:
    import time

    path = write(tmp_path, BILLION_LAUGHS)
    t0 = time.perf_counter()
    message = _one_line_error(path)
    assert time.perf_counter() - t0 < 1  # was 19 s and 1.9 GB
    assert "aliases" in message and "over the limit of 200,000" in message


def test_the_alias_limit_counts_what_aliases_add_not_the_files_own_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long file without aliases is not a "billion laughs"; a shared block is fine
    until its copies add more than the limit."""
    import plm_eval.validation as validation

    monkeypatch.setattr(validation, "MAX_ALIAS_VALUES", 50)
    plain = "".join(f"  - {{query: q{i}, expect: {{doc_id: [a, b, c], not_doc_id: [x, y]}}}}\n" for i in range(40))
    assert len(load_cases(write(tmp_path, "cases:\n" + plain))) == 40  # 400+ values of its own
    shared = "  - {query: q0, expect: {doc_id: x, not_doc_id: &ids [a, b, c, d]}}\n"
    copies = "".join(f"  - {{query: q{i}, expect: {{doc_id: x, not_doc_id: *ids}}}}\n" for i in range(1, 11))
    assert len(load_cases(write(tmp_path, "cases:\n" + shared + copies))) == 11  # 10 copies add 50
    more = "  - {query: q11, expect: {doc_id: x, not_doc_id: *ids}}\n"
    assert "expand to 55 more values" in _one_line_error(write(tmp_path, "cases:\n" + shared + copies + more))


def test_undecodable_and_unprintable_text_is_one_line_naming_file_line_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "cases.yaml"
    path.write_bytes(b"cases:\n  - query: caf\xe9\n    expect: {doc_id: x}\n")
    assert f"{path}:2: not UTF-8 text (byte offset 21" in _one_line_error(path)
    path.write_text("cases:\n  - query: a\x00b\n    expect: {doc_id: x}\n")
    assert f"{path}:2: malformed YAML: character #x0000 at offset 19" in _one_line_error(path)
    path.write_bytes(b"\xef\xbb\xbfcases:\n  - {query: a, expect: {doc_id: x}}\n")  # a UTF-8 BOM is fine
    assert [c.query for c in load_cases(path)] == ["a"]


@pytest.mark.parametrize(
    "content", [b"cases:\n  - query: caf\xe9\n", BILLION_LAUGHS.encode()], ids=["latin1", "aliases"]
)
def test_cli_reports_a_hostile_cases_file_as_one_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "cases.yaml"
    path.write_bytes(content)
    res = subprocess.run(
        [sys.executable, "-m", "plm_index.cli", "validate", "-c", str(REPO / "configs" / "poc_parity.toml")]
        + ["--cases", str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={**os.environ, "PLM_PROGRESS": "0"},
    )
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.startswith(f"error: {path}") and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
