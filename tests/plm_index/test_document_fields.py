"""Whatever chunker made them, chunks carry their document's metadata and title from the
chunker on: the enrichers after it read them (the `contextual` enricher's title prefix),
filters find them, and a cached enricher that returns the wrong type is named as one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import plm
from plm_core.errors import PipelineError, TypeValidationError
from plm_core.registry import build_registry
from plm_core.settings import Settings
from plm_index.job import Job

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
            body = [line for line in lines[plm.front_matter_lines(lines) :] if line.strip()]
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


def job_for(tmp_path: Path, enricher: str) -> Job:
    registry = build_registry()
    for cls in (BareLines, TitleWords, CachedStrings):
        registry.add(cls)
    (tmp_path / "job.toml").write_text(CONFIG.format(enricher=enricher))
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
    from plm_index.sync import index_fingerprint

    job = job_for(tmp_path, "title_words")
    before = index_fingerprint({"index": job.config.raw["index"], "embedder": {}}, None, "")
    assert job.index_fingerprint() != before
