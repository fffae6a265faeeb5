"""One bad record never stops a sync or loses the good ones, and nothing nonsensical is
stored: every record and Document passes `plm_index.documents.check_document`."""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from plm_core.errors import PlmUserError
from plm_core.records import Document
from plm_core.settings import Settings
from plm_index.documents import (
    DocumentError,
    MissingFieldError,
    check_document,
    document_from_record,
    is_blank,
    record_id,
    searchable_text,
)
from plm_index.job import Job


def deep(levels: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(levels):
        node["a"] = {}
        node = node["a"]
    return root


def rejected(call: Any, match: str) -> DocumentError:
    """The DocumentError `call()` raises: a PlmUserError (the CLI prints it without a
    traceback) whose message is one line and matches `match`."""
    with pytest.raises(DocumentError, match=match) as info:
        call()
    assert isinstance(info.value, PlmUserError) and "\n" not in str(info.value)
    str(info.value).encode("utf-8")  # printable, even when it quotes a lone surrogate
    return info.value


# --- check_document ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        (Document(id="a", text=""), "text is empty"),
        (Document(id="a", text=" \n\t "), "text is blank"),
        (Document(id="a", text="\u200b\ufeff\u00ad\x01"), "text is blank"),  # nothing visible
        (Document(id="a", text="a\x00b"), r"text holds a NUL character \(\\x00\) at character 1"),
        (Document(id="a", text="ab", metadata={"k\x00": 1}), "a key in document 'a': metadata holds a NUL"),
        (Document(id="a", text=None), "text must be a string, got null"),  # type: ignore[arg-type]
        (Document(id="", text="x"), "id must be a non-empty string"),
        (Document(id=" ", text="x"), "id must be a non-empty string"),
        (Document(id=7, text="x"), "got int"),  # type: ignore[arg-type]
        (Document(id="a" * 600, text="x"), "600 characters"),
        (Document(id="a\nb", text="x"), "control character"),
        (Document(id="\ud83d", text="x"), r"id '\\ud83d' is not valid Unicode"),
        (Document(id="a", text="bad \ud83d"), "text is not valid Unicode.*character 4"),
        (Document(id="a", text="x", title="t \udc80"), "title is not valid Unicode"),
        (Document(id="a", text="x", title=None), "title must be a string"),  # type: ignore[arg-type]
        (Document(id="a", text="x", path="/tmp/\udcff.md"), "path is not valid Unicode"),
        (Document(id="a", text="x", metadata=None), "metadata must be a table"),  # type: ignore[arg-type]
        (Document(id="a", text="x", metadata={"k": "v \udc00"}), r"metadata\.k is not valid Unicode"),
        (Document(id="a", text="x", metadata={"\udc00": 1}), "a key in .*metadata is not valid Unicode"),
        (Document(id="a", text="x", metadata={"k": [{"deeper": "\ud800"}]}), r"metadata\.k\[0\]\.deeper"),
        (Document(id="a", text="x", metadata={1: "x"}), "key of type int"),  # type: ignore[dict-item]
        (Document(id="a", text="x", metadata={"k": float("nan")}), "not a finite number"),
        (Document(id="a", text="x", metadata={"k": float("inf")}), "not a finite number"),
        (Document(id="a", text="x", metadata={"k": 2**64}), "beyond 64 bits"),
        (Document(id="a", text="x", metadata={"k": 10**5000}), "beyond 64 bits"),  # str() would raise
        (Document(id="a", text="x", metadata={"k": {1, 2}}), "has type set"),
        (Document(id="a", text="x", metadata={"k": b"raw"}), "has type bytes"),
        (Document(id="a", text="x", metadata={"k": datetime.date(2024, 5, 1)}), "has type date.*ISO string"),
        (Document(id="a", text="x", metadata={"k": object()}), "has type object"),
        (Document(id="a", text="x", metadata=deep(50)), "nested more than 20 levels"),
    ],
)
def test_check_document_rejects_what_cannot_be_stored_or_found(doc: Document, match: str) -> None:
    rejected(lambda: check_document(doc), match)


def test_check_document_rejects_a_value_whose_str_raises() -> None:
    class Hostile:
        def __str__(self) -> str:
            raise RuntimeError("boom")

    rejected(lambda: check_document(Document(id="a", text="x", metadata={"k": Hostile()})), "has type Hostile")


def test_check_document_rejects_what_is_not_a_document() -> None:
    rejected(lambda: check_document({"id": "a", "text": "x"}), "expected a Document, got dict")  # type: ignore[arg-type]


def test_check_document_accepts_json_like_metadata_and_any_visible_text() -> None:
    meta = {"s": "é", "i": -(2**63) + 1, "f": 1.5, "b": True, "n": None, "l": [1, "x", [2]], "t": {"u": {"v": 1}}}
    check_document(Document(id="id with spaces/é", text="…", title="", path="", metadata=meta))
    check_document(Document(id="a", text="\u200bword"))
    check_document(Document(id="a", text="x", metadata=deep(19)))


def test_is_blank_and_searchable_text() -> None:
    assert is_blank("") and is_blank(" \n\u3000\u200b\ufeff") and not is_blank(" a ") and not is_blank("·")
    assert searchable_text("Zeppelin", "hangar", include_title=True) == "Zeppelin\n\nhangar"
    assert searchable_text("  ", "hangar", include_title=True) == "hangar"  # a blank title adds nothing
    assert searchable_text("Zeppelin", "hangar", include_title=False) == "hangar"


# --- document_from_record ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("rec", "match"),
    [
        ({"id": "a", "text": None}, "field 'text' is null"),  # never the word "None"
        ({"id": "a"}, "missing field 'text'"),
        ({"id": "a", "text": ""}, "text is empty"),
        ({"id": "a", "text": "  \n "}, "text is blank"),
        ({"id": "a", "text": 5}, "field 'text' must be a string, got int"),
        ({"id": "", "text": "x"}, "id field 'id' is empty"),
        ({"id": "   ", "text": "x"}, "id field 'id' is blank"),
        ({"id": {"nested": 1}, "text": "x"}, "must be a non-empty string or an integer, got dict"),
        ({"id": [1], "text": "x"}, "got list"),
        ({"id": 1.5, "text": "x"}, "got float"),
        ({"id": True, "text": "x"}, "got bool"),
        ({"id": None, "text": "x"}, "field 'id' is null"),
        ({"text": "x"}, "missing field 'id' or '_id'"),
        ({"id": 10**600, "text": "x"}, "over 512 digits"),
        ({"id": "a", "text": "x", "title": ["x"]}, "field 'title' must be a string or null, got list"),
        ({"id": "a", "text": "x", "title": 0}, "got int"),  # not silently no title
        ({"id": "a", "text": "x", "title": False}, "got bool"),
        ({"id": "a", "text": "x", "title": "\udc00"}, "title is not valid Unicode"),
        ({"id": "a", "text": "x", "metadata": 0}, "'metadata' must be a JSON object or null, got int"),
        ({"id": "a", "text": "x", "metadata": []}, "got list"),
        ({"id": "a", "text": "x", "metadata": "x"}, "got str"),
        ({"id": "a", "text": "x", "metadata": {"k": "\ud83d"}}, r"metadata\.k is not valid Unicode"),
        ({"id": "a", "text": "bad \ud83d"}, "text is not valid Unicode"),
        ({"text": "x", "other": deep(5000)}, "missing field"),  # no repr of a deep record
        ({"id": deep(5000), "text": "x"}, "got dict"),
        (["a", "list"], "must be a JSON object"),
    ],
)
def test_document_from_record_rejects_with_a_one_line_reason(rec: Any, match: str) -> None:
    rejected(lambda: document_from_record(rec), match)


def test_a_missing_field_names_the_field() -> None:
    err = rejected(lambda: document_from_record({"id": "a"}, text_field="body"), "missing field 'body'")
    assert isinstance(err, MissingFieldError) and err.field == "body"
    err = rejected(lambda: record_id({"text": "x"}, ("key",)), "missing field 'key'")
    assert isinstance(err, MissingFieldError) and err.field == "key"


def test_document_from_record_reads_ids_titles_and_metadata() -> None:
    assert document_from_record({"_id": 7, "text": "x"}).id == "7"
    assert document_from_record({"id": "a", "_id": "b", "text": "x"}).id == "a"
    doc = document_from_record({"id": "a", "title": "T", "text": "x", "metadata": {"k": 1}}, include_title=True)
    assert (doc.text, doc.title, dict(doc.metadata)) == ("T\n\nx", "T", {"k": 1})
    doc = document_from_record({"id": "a", "title": None, "text": "x", "metadata": None})
    assert (doc.text, doc.title, dict(doc.metadata)) == ("x", "", {})
    # a blank text is fine when the title is indexed: BEIR corpora have such documents
    assert document_from_record({"id": "a", "title": "T", "text": ""}, include_title=True).text == "T\n\n"
    doc = document_from_record({"k": "a", "body": "x", "h": 3}, text_field="body", id_fields=("k",), metadata={"h": 3})
    assert (doc.id, doc.text, dict(doc.metadata)) == ("a", "x", {"h": 3})


# --- through a Job ----------------------------------------------------------------------

CONFIG = """
[job]
name = "records"
[index.load]
use = "json_records"
[index.chunk]
use = "markdown_semantic"
[query.retrieve]
use = "bm25s"
method = "lucene"
"""

GOOD = {"id": "good", "title": "Zeppelin maintenance", "text": "Hangar checks every week for the airship."}
BAD_LINES = [
    '{"id": "surrogate", "text": "bad \\ud83d here"}',  # valid JSON, not valid Unicode
    "[" * 100_000 + "]" * 100_000,  # nested 100k deep
    '{"id": "null", "text": null}',
    '{"id": "empty", "text": ""}',
    '{"id": "blank", "text": "   \\n  "}',
    '{"id": "", "text": "an empty id"}',
    '{"id": {"nested": 1}, "text": "an object as id"}',
    '{"id": "badtitle", "title": ["x"], "text": "a list as title"}',
    '{"id": "badmeta", "text": "metadata with a surrogate", "meta": "x \\udc00"}',
    '{"id": "\\ud800", "text": "a surrogate id"}',
    '{"id": "big", "text": "a huge number", "n": ' + "9" * 5000 + "}",
]


@pytest.fixture()
def job(tmp_path: Path) -> Job:
    pytest.importorskip("bm25s")
    (tmp_path / "job.toml").write_text(CONFIG)
    settings = Settings(progress=False, cache=False, ingest_batch=1, data_dir=str(tmp_path / "data"))
    return Job.from_config(tmp_path / "job.toml", index_dir=tmp_path / "index", settings=settings)


def test_bad_records_fail_one_by_one_and_the_good_one_lands(job: Job, tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join([*BAD_LINES, json.dumps(GOOD)]) + "\n")
    report = job.ingest([path])
    assert report.added == ["good"]
    assert len(report.failed) == len(BAD_LINES), [f.error for f in report.failed]
    assert all(f.path.startswith(path.as_posix()) for f in report.failed)
    for f in report.failed:
        (f.path + f.error + f.doc_id).encode("utf-8")  # every failure can be printed
    # a word only in the title is found: titles are searched
    assert job.retrieve("zeppelin", k=1)[0].doc_id == "good"


def test_api_misuse_is_caught_not_stored(job: Job) -> None:
    records: list[Document | Mapping[str, Any]] = [
        {"id": "n", "text": None},
        {"id": "", "text": "x"},
        {"id": {"nested": 1}, "text": "x"},
        {"id": "w", "text": "  "},
        {"id": "t", "text": "x", "title": 0},
        {"id": "m", "text": "x", "metadata": {"when": datetime.date(2024, 5, 1)}},
        Document(id="s", text="bad \ud800"),
        Document(id="", text="no id"),
        Document(id="k", text="x", metadata={"k": "\udc00"}),
        {"id": "ok", "text": "a fine record about airships"},
    ]
    report = job.ingest(records)
    assert report.added == ["ok"] and len(report.failed) == len(records) - 1
    assert set(job.store.doc_fingerprints()) == {"ok"}


def test_a_string_source_is_one_path_not_its_characters(job: Job, tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(GOOD) + "\n")
    assert job.ingest(str(path)).added == ["good"]
    with pytest.raises(PlmUserError, match="must be paths"):
        job.ingest(42)  # type: ignore[arg-type]


def test_a_rejected_api_document_with_an_unprintable_id_or_path_reports_safely(job: Job) -> None:
    report = job.ingest([Document(id="bad \ud800", text="x", path="/tmp/\udcff.md"), {"id": "ok", "text": "fine text"}])
    assert report.added == ["ok"] and len(report.failed) == 1
    failure = report.failed[0]
    assert failure.doc_id == "" and failure.path.encode("utf-8") and "\\udcff" in failure.path
