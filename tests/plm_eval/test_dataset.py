"""BEIR query and qrels files as users download or write them: every way one can be
unreadable is one PlmUserError naming file:line and the fix, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from plm_core.errors import PlmUserError
from plm_eval.dataset import load_query_set, read_qrels

QRELS = b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\n"


def dataset(tmp_path: Path, queries: bytes, qrels: bytes = QRELS) -> Path:
    (tmp_path / "qrels").mkdir(parents=True)
    (tmp_path / "qrels" / "test.tsv").write_bytes(qrels)
    (tmp_path / "queries.jsonl").write_bytes(queries)
    return tmp_path


def error(tmp_path: Path, queries: bytes, qrels: bytes = QRELS) -> str:
    with pytest.raises(PlmUserError) as info:
        load_query_set(dataset(tmp_path, queries, qrels), "test")
    return str(info.value)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"[1, 2]", "a JSON array, not an object"),
        (b'"x"', "a JSON string, not an object"),
        (b"7", "a JSON number, not an object"),
        (b"null", "a JSON null, not an object"),
        (b'{"_id": 1.5, "text": "q"}', "'_id' is 1.5, not a string or integer"),
        (b'{"_id": true, "text": "q"}', "'_id' is True"),
        (b'{"_id": ["q2"], "text": "q"}', "'_id' is ['q2']"),
        (b'{"text": "q"}', "'_id' is None (missing), not a string or integer"),
        (b'{"_id": "q2", "text": 3}', "'text' is int, not a string"),
        (b'{"_id": "q2"}', "'text' is NoneType (missing), not a string"),
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),  # too deep for json: RecursionError
        (b'{"_id": "q2", "text": "caf\xe9"}', "not UTF-8 (byte offset 56: b'\\xe9')"),
    ],
)
def test_bad_query_lines_name_file_line_and_the_expected_shape(tmp_path: Path, line: bytes, expected: str) -> None:
    message = error(tmp_path, b'{"_id": "q1", "text": "fine"}\n' + line + b"\n")
    assert f"queries.jsonl:2: {expected}" in message, message
    if "UTF-8" not in message:
        assert "expected one JSON object per line with a string '_id' and a string 'text'" in message


def test_query_text_may_hold_characters_that_splitlines_breaks_on(tmp_path: Path) -> None:
    """U+2028, U+2029 and U+0085 are legal unescaped in a JSON string; they end no line."""
    odd = "a\u2028b\u2029c\x85d"
    queries = f'{{"_id": "q1", "text": "{odd}"}}\n{{"_id": "q2", "text": "two"}}\n'.encode()
    qs = load_query_set(dataset(tmp_path, queries), "test")
    assert qs.queries == {"q1": odd, "q2": "two"}
    message = error(tmp_path / "again", queries + b"[1]\n")
    assert "queries.jsonl:3: a JSON array" in message, message  # line numbers count real line ends


def test_bom_and_windows_line_ends_are_read(tmp_path: Path) -> None:
    queries = b'\xef\xbb\xbf{"_id": "q1", "text": "one"}\r\n{"_id": 2, "text": "two"}\r\n'
    qrels = b"\xef\xbb\xbfquery-id\tcorpus-id\tscore\r\nq1\td1\t1\r\n2\td2\t2\r\n"
    qs = load_query_set(dataset(tmp_path, queries, qrels), "test")
    assert qs.queries == {"q1": "one", "2": "two"}
    assert qs.qrels == {"q1": {"d1": 1}, "2": {"d2": 2}}


@pytest.mark.parametrize(
    ("qrels", "expected"),
    [
        (b"query-id\tcorpus-id\tscore\nq1\td\xe91\t1\n", "test.tsv:2: not UTF-8 (byte offset 29: b'\\xe9')"),
        (b"q1\td1\t1\nq2\t" + b"x" * 200_000 + b"\t1\n", "test.tsv:2: not a qrels row (field larger than"),
        (b"q1\td1\n", "test.tsv:1: expected 'query-id<TAB>corpus-id<TAB>score'"),
        (b"q1\td1\thigh\n", "test.tsv:1: relevance 'high' is not a number"),
        (b"q1\td1\tinf\n", "test.tsv:1: relevance 'inf' is not a number"),
    ],
)
def test_bad_qrels_name_file_and_line(tmp_path: Path, qrels: bytes, expected: str) -> None:
    path = tmp_path / "test.tsv"
    path.write_bytes(qrels)
    with pytest.raises(PlmUserError) as info:
        read_qrels(path)
    assert expected in str(info.value), str(info.value)


def test_an_unreadable_file_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "test.tsv"
    path.mkdir()  # exists, cannot be read as a file
    with pytest.raises(PlmUserError, match="test.tsv: cannot be read"):
        read_qrels(path)


@pytest.mark.parametrize("corpus", ["../..", "..", "/etc", "docs/../../outside", "../set2"])
def test_the_corpus_never_leads_outside_the_dataset(tmp_path: Path, corpus: str) -> None:
    from plm_core.config import load_job
    from plm_eval.dataset import resolve_corpus
    from plm_index.plugins import build_registry

    ds = tmp_path / "data" / "set"
    (ds / "docs").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "data" / "set2").mkdir()
    config = tmp_path / "job.toml"
    config.write_text(
        f'[job]\ncorpus = ["{corpus}"]\n[index.load]\nuse = "markdown_dir"\n[query.retrieve]\nuse = "bm25s"\n'
    )
    job = load_job(config, build_registry(autoload=False))
    with pytest.raises(PlmUserError, match="outside the dataset folder") as info:
        resolve_corpus(job, ds)
    assert corpus in str(info.value)
    with pytest.raises(PlmUserError, match="outside the dataset folder"):
        resolve_corpus(job, ds, corpus)  # --corpus too
    assert resolve_corpus(job, ds, "docs") == ds / "docs"
    # a link the dataset's owner made is the dataset's own choice (e.g. a corpus on another disk)
    (ds / "link").symlink_to(tmp_path / "outside", target_is_directory=True)
    assert resolve_corpus(job, ds, "link") == ds / "link"
