"""Evaluation inputs a user writes or downloads: cases files and BEIR query files fail with
one clear error (never a traceback, never gigabytes), and filtered cases are judged by the
same filter implementation retrieval uses."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from plm_core.errors import PlmUserError
from plm_core.records import Hit
from plm_eval.dataset import load_query_set
from plm_eval.validation import Case, load_cases, run_case

BOMB = (
    'a0: &a0 ["x","x","x","x","x","x","x","x","x"]\n'
    + "".join(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]\n" for i in range(1, 9))
    + "cases: *a8\n"
)


def test_nested_yaml_aliases_are_refused_quickly(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    t0 = time.perf_counter()
    with pytest.raises(PlmUserError, match="aliases"):
        load_cases(path)
    assert time.perf_counter() - t0 < 2


def test_non_utf8_cases_file_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "cases.yaml"
    path.write_bytes(b"cases:\n  - query: caf\xe9\n    expect: {doc_id: a}\n")
    with pytest.raises(PlmUserError, match="not UTF-8"):
        load_cases(path)


@pytest.mark.parametrize(
    "line, expected",
    [
        (b"[1, 2]\n", "not an object"),
        (b'"x"\n', "not an object"),
        (b'{"_id": {"a": 1}, "text": "q"}\n', "'_id' is"),
        (b'{"_id": "q1", "text": null}\n', "'text' is NoneType"),
        (b'{"_id": "q1", "text": "caf\xe9"}\n', "not UTF-8"),
        (b"{not json\n", "not valid JSON"),
    ],
)
def test_bad_query_lines_name_file_and_line(tmp_path: Path, line: bytes, expected: str) -> None:
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    (tmp_path / "queries.jsonl").write_bytes(b'{"_id": "q0", "text": "fine"}\n' + line)
    with pytest.raises(PlmUserError) as info:
        load_query_set(tmp_path, "test")
    assert expected in str(info.value) and "queries.jsonl:2" in str(info.value)


def _hit(rank: int, **metadata: object) -> Hit:
    return Hit(chunk_id=f"c{rank}", doc_id=f"d{rank}", score=1.0 / rank, rank=rank, metadata=metadata)


class _Fixed:
    def __init__(self, hits: list[Hit]) -> None:
        self.hits = hits

    def retrieve(self, query: str, k: int = 5, filters: dict | None = None) -> list[Hit]:
        return self.hits[:k]


@pytest.mark.parametrize(
    "filters, hits",
    [
        ({"version": {"gte": 3}}, [_hit(1, version=4), _hit(2, version=3)]),
        ({"team": {"in": ["a", "b"]}}, [_hit(1, team="b"), _hit(2, team="a")]),
        ({"team": {"ne": "c"}}, [_hit(1, team="b")]),
        ({"updated": {"gte": "2024-01-01"}}, [_hit(1, updated="2024-05-01T10:00:00")]),
        ({"tags": "db"}, [_hit(1, tags=["db", "backup"])]),
    ],
    ids=["range", "in", "ne", "date", "list"],
)
def test_filtered_hits_are_judged_by_the_filter_implementation(filters: dict, hits: list[Hit]) -> None:
    case = Case.model_validate({"name": "c", "query": "q", "k": 5, "filters": filters, "expect": {"doc_id": "d1"}})
    result = run_case(_Fixed(hits), case)
    assert result.passed, result.report()
    outside = [*hits, _hit(len(hits) + 1, version=1, team="c", updated="2020-01-01", tags=["x"])]
    assert run_case(_Fixed(outside), case).status == "error"  # a hit the filters exclude is caught
