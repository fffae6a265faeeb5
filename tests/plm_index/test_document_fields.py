"""Whatever chunker made them, chunks carry their document's metadata and title from the
chunker on: the enrichers after it read them (the `contextual` enricher's title prefix),
filters find them, and a cached enricher that returns the wrong type is named as one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import plm
from plm_core.errors import PipelineError, TypeValidationError
from plm_core.settings import Settings
from plm_index.job import Job
from plm_index.plugins import build_registry

CONFIG = """
[job]
name = "fields"
[store]
use = "sqlite"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "bare_lines"
[index.enrich]
use = "{enricher}"
[query.retrieve]
use = "bm25s"
tokenizer = "whitespace_lower"
"""


class BareLines(plm.Chunker):
    """A third party's chunker that copies neither metadata nor title (as the contract page's
    first example did)."""

    name = "bare_lines"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:
        out = []
        for doc in data:
            lines = doc.text.split("\n")
            body = [line for line in lines[plm.documents.front_matter_lines(lines) :] if line.strip()]
            out += [plm.Chunk(id=f"{doc.id}#{i}", doc_id=doc.id, text=t) for i, t in enumerate(body)]
        return out


class TitleWords(plm.ChunkTransform):
    """An enricher that puts the chunk's title (from its metadata) in front of its index text."""

    name = "title_words"

    def run(self, data: list[plm.Chunk]) -> list[plm.Chunk]:
        return [replace(c, enriched=f"{c.metadata.get('title', '')} {c.text}") for c in data]


class CachedStrings(plm.ChunkTransform):
    """A cached enricher (`cache_fields`) that returns strings instead of chunks."""

    name = "cached_strings"
    cache_fields = ("keywords",)

    def run(self, data: list[plm.Chunk]) -> list[plm.Chunk]:
        return [c.text for c in data]  # type: ignore[misc]


def job_for(tmp_path: Path, enricher: str, chunker: str = "bare_lines") -> Job:
    registry = build_registry()
    for cls in (BareLines, TitleWords, CachedStrings, ParagraphIds, Orphans, BreaksOnB):
        registry.add(cls)
    (tmp_path / "job.toml").write_text(
        CONFIG.format(enricher=enricher).replace('use = "bare_lines"', f'use = "{chunker}"')
    )
    settings = Settings(progress=False, data_dir=str(tmp_path / "data"))
    return Job.from_config(tmp_path / "job.toml", index_dir=tmp_path / "index", settings=settings, registry=registry)


def test_enrichers_after_any_chunker_read_the_documents_title_and_metadata(tmp_path: Path) -> None:
    pytest.importorskip("bm25s")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "vault.md").write_text("---\nteam: storage\n---\n# Secrets Vault\n\nRotate tokens weekly.\n")
    job = job_for(tmp_path, "title_words")
    assert job.ingest([docs]).failed == []
    chunks = job.open().store.chunks()
    assert {c.metadata["title"] for c in chunks} == {"Secrets Vault"} and {c.metadata["team"] for c in chunks} == {
        "storage"
    }
    # the enricher saw the title: "rotate" is in the body only, "secrets" in the title only
    assert [c.index_text for c in chunks if c.text.startswith("Rotate")] == ["Secrets Vault Rotate tokens weekly."]
    (hit,) = job.retrieve("secrets rotate", k=1, filters={"team": "storage"})
    assert hit.text == "Rotate tokens weekly."


def test_a_cached_enricher_returning_the_wrong_type_is_named(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nSome text.\n")
    with pytest.raises(PipelineError) as err:
        job_for(tmp_path, "cached_strings").ingest([docs])
    assert isinstance(err.value.cause, TypeValidationError)
    assert "'cached_strings' (enrichers) returned a list holding a str at 0" in str(err.value)


def test_an_index_from_a_third_party_chunker_is_chunked_again_once(tmp_path: Path) -> None:
    # its stored chunks were made before the runtime added the document's fields to them
    from plm_index.fingerprints import index_fingerprint

    job = job_for(tmp_path, "title_words")
    before = index_fingerprint({"index": job.config.raw["index"], "embedder": {}}, None, "")
    assert job.index_fingerprint() != before


class ParagraphIds(plm.Chunker):
    """A chunker whose ids are unique within a document only (`p0`, `p1`, ... in each)."""

    name = "paragraph_ids"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:
        return [plm.Chunk(id="p0", doc_id=doc.id, text=doc.text) for doc in data]


class Orphans(plm.Chunker):
    """A chunker that files its chunks under a document it was not given."""

    name = "orphans"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:
        return [plm.Chunk(id=f"{doc.id}#0", doc_id="nobody", text=doc.text) for doc in data]


def test_chunk_ids_shared_by_two_documents_name_the_chunker_not_the_database(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAlpha text.\n")
    (docs / "b.md").write_text("# B\n\nBeta text.\n")
    job = job_for(tmp_path, "title_words", "paragraph_ids")
    with pytest.raises(PipelineError) as err:  # both in one batch
        job.ingest([docs])
    assert isinstance(err.value.cause, TypeValidationError)
    msg = str(err.value)
    assert "'paragraph_ids' (chunkers) gave the id 'p0' to two chunks (of documents" in msg
    assert "unique in the whole index" in msg
    # in two syncs: the second document's chunk clashes with the first's, already stored
    (docs / "b.md").unlink()
    assert job.ingest([docs]).failed == []
    (docs / "b.md").write_text("# B\n\nBeta text.\n")
    with pytest.raises(TypeValidationError) as clash:
        job.ingest([docs])
    assert "chunk 'p0' of document 'b" in str(clash.value) and "document 'a" in str(clash.value)
    assert "already has a chunk with that id" in str(clash.value)
    (stored,) = {c.doc_id for c in job.open().store.chunks()}  # the first document's alone: nothing half-written
    assert stored.startswith("a")


def test_a_chunk_filed_under_a_document_it_was_not_given_names_the_chunker(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAlpha text.\n")
    with pytest.raises(PipelineError) as err:
        job_for(tmp_path, "title_words", "orphans").ingest([docs])
    assert "'orphans' (chunkers) made chunk" in str(err.value) and "for document 'nobody'" in str(err.value)


class BreaksOnB(plm.Chunker):
    """A chunker with a bug that only some documents reach."""

    name = "breaks_on_b"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:
        return [plm.Chunk(id=f"{d.id}#0", doc_id=d.id, text=d.summary if "b-" in d.text else d.text) for d in data]  # type: ignore[attr-defined]


def test_a_chunker_bug_logs_its_traceback_once_and_a_line_for_each_other_document(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a", "b1", "b2", "b3"):
        (docs / f"{name}.md").write_text("# T\n\nplain b-\n" if name.startswith("b") else "# T\n\nfine\n")
    job = job_for(tmp_path, "title_words", "breaks_on_b")
    with caplog.at_level("WARNING"):
        report = job.ingest([docs])
    assert sorted(Path(f.path).stem for f in report.failed) == ["b1", "b2", "b3"]
    failed = [r for r in caplog.records if r.getMessage().startswith("document ")]
    assert len(failed) == 3 and [r.exc_info is not None for r in failed] == [True, False, False]
