"""One bad record never stops a sync or loses the good ones, and nothing nonsensical is
stored: every record and Document passes `plm_core.documents.check_document`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plm_core.documents import check_document, document_from_record
from plm_core.errors import PlmUserError
from plm_core.job import Job
from plm_core.records import Document
from plm_core.settings import Settings

pytest.importorskip("bm25s")

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
]


@pytest.fixture()
def job(tmp_path: Path) -> Job:
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
    # a word only in the title is found: titles are searched
    assert job.retrieve("zeppelin", k=1)[0].doc_id == "good"


def test_api_misuse_is_caught_not_stored(job: Job, tmp_path: Path) -> None:
    records = [
        {"id": "n", "text": None},
        {"id": "", "text": "x"},
        {"id": {"nested": 1}, "text": "x"},
        {"id": "w", "text": "  "},
        Document(id="s", text="bad \ud800"),
        Document(id="", text="no id"),
        {"id": "ok", "text": "a fine record about airships"},
    ]
    report = job.ingest(records)
    assert report.added == ["ok"] and len(report.failed) == len(records) - 1
    assert {d for d in job.store.doc_fingerprints()} == {"ok"}


def test_a_string_source_is_one_path_not_its_characters(job: Job, tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(GOOD) + "\n")
    assert job.ingest(str(path)).added == ["good"]
    with pytest.raises(PlmUserError, match="must be paths"):
        job.ingest(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "doc",
    [
        Document(id="a", text=""),
        Document(id=" ", text="x"),
        Document(id="a", text="x", title="t \udc80"),
        Document(id="a", text="x", metadata={"k": float("nan")}),
        Document(id="a", text="x", metadata={1: "x"}),
    ],
)
def test_check_document_rejects(doc: Document) -> None:
    with pytest.raises(PlmUserError):
        check_document(doc)


def test_document_from_record_is_strict_and_reads_ints() -> None:
    assert document_from_record({"_id": 7, "text": "x"}).id == "7"
    assert document_from_record({"id": "a", "title": "T", "text": "x"}, include_title=True).text == "T\n\nx"
    for rec in ({"id": True, "text": "x"}, {"text": "x"}, {"id": "a"}, {"id": "a", "text": 5}, ["a"]):
        with pytest.raises(PlmUserError):
            document_from_record(rec)  # type: ignore[arg-type]


@pytest.mark.parametrize("pattern", ["/etc/*.md", "../*.md", "docs/../../*.md", "~/*.md"])
def test_loader_patterns_stay_inside_their_folder(pattern: str) -> None:
    from pydantic import ValidationError

    from plm_plugins.loaders.markdown_dir import MarkdownLoader

    with pytest.raises(ValidationError, match="folder being loaded"):
        MarkdownLoader(pattern=pattern)
    assert MarkdownLoader(pattern="**/*.md").config.pattern == "**/*.md"
