"""Chunks are embedded across ingest batches, in corpus order: an embedder that batches a
call's texts by length (sentence-transformers) then gives each chunk the vector one call
over the corpus gives, as the POC computed them, whatever `ingest_batch` is."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from plm_needs import needs
from plm_toys import bag_of_words

from plm_core.config import load_job
from plm_core.settings import Settings
from plm_index.job import Job
from plm_index.plugins import build_registry

Words = bag_of_words(["pod", "node", "backup", "restore"])
CALLS: list[list[str]] = []


class Recording(Words):  # type: ignore[misc, valid-type]
    name = "recording_words"

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        if list(texts) != ["size probe"]:
            CALLS.append(list(texts))
        return super().embed(texts, progress)


CONFIG = """
[job]
name = "window"
[store]
use = "sqlite"
[embedder]
use = "{embedder}"
{model}
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
[query.retrieve]
use = "dense"
"""


def _folder(tmp_path: Path, n: int = 7) -> Path:
    docs = tmp_path / "docs"
    for i in range(n):
        sections = "".join(
            f"## Part {j}\n\n{'pod node backup restore ' * (3 + (i * j) % 5)}word{i}.\n\n" for j in range(3)
        )
        (docs / f"d{i}").mkdir(parents=True, exist_ok=True)
        (docs / f"d{i}" / "README.md").write_text(f"# Page {i}\n\n{sections}")
    return docs


def _job(
    tmp_path: Path, embedder: str, model: str = "", cache: bool = True, index: str = "index", window: int = 8192
) -> Job:
    registry = build_registry()
    registry.add(Recording)
    path = tmp_path / "job.toml"
    path.write_text(CONFIG.format(embedder=embedder, model=model))
    settings = Settings(
        progress=False, ingest_batch=1, cache=cache, data_dir=str(tmp_path / "data"), embed_window=window
    )
    return Job(load_job(path, registry), tmp_path / index, settings, registry)


def test_one_call_over_every_batch_in_corpus_order(tmp_path: Path) -> None:
    CALLS.clear()
    job = _job(tmp_path, "recording_words")
    report = job.ingest(_folder(tmp_path))
    texts = [c.index_text for c in job.store.chunks()]
    assert len(texts) > 7 and CALLS == [texts]  # seven batches of one document, one call
    assert report.work["embed"] == {"computed": len(texts), "cached": 0}
    CALLS.clear()
    again = _job(tmp_path, "recording_words", index="again")  # another index, the same content cache
    again.ingest(_folder(tmp_path))
    assert CALLS == [] and np.array_equal(again.store.vectors()[1], job.store.vectors()[1])


def test_a_window_bounds_the_call(tmp_path: Path) -> None:
    CALLS.clear()
    job = _job(tmp_path, "recording_words", cache=False, window=5)
    job.ingest(_folder(tmp_path))
    texts = [c.index_text for c in job.store.chunks()]
    assert len(CALLS) > 1 and all(len(call) >= 5 for call in CALLS[:-1])
    assert [t for call in CALLS for t in call] == texts
    _, stored, _ = job.store.vectors()
    assert np.array_equal(stored, job.embedder.embed(texts))


@pytest.mark.slow
@needs("sentence_transformers")
def test_minilm_vectors_equal_one_call_whatever_the_batch(tmp_path: Path) -> None:
    """With one document a batch, 37 of the sample corpus's 177 MiniLM vectors had other
    last bits than one call over them gives."""
    job = _job(tmp_path, "sentence_transformers", 'model = "all-MiniLM-L6-v2"', cache=False)
    job.ingest(Path(__file__).resolve().parents[2] / "examples" / "sample_corpus" / "docs")
    ids, stored, _ = job.store.vectors()
    chunks = job.store.get_chunks(ids)
    whole = np.asarray(job.embedder.embed([chunks[i].index_text for i in ids]), dtype=np.float32)
    assert int((~(np.asarray(stored) == whole).all(axis=1)).sum()) == 0
