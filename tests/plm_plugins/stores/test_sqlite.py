from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from plm_core.errors import StoreError
from plm_core.records import Chunk, Document
from plm_plugins.stores.sqlite import SQLiteStore


def _store(tmp_path) -> SQLiteStore:
    store = SQLiteStore()
    store.open(tmp_path)
    return store


def _docs():
    docs = [Document(id="a", text="alpha text", title="A", metadata={"v": 1}), Document(id="b", text="beta", title="B")]
    chunks = [
        Chunk(
            id="a_0",
            doc_id="a",
            text="alpha",
            heading_path=("A", "Intro"),
            start_char=0,
            end_char=5,
            stable_id="s1",
            metadata={"v": 1},
            keywords=("alpha",),
            entities={"ORG": ("Acme",)},
            enriched="alpha | Acme\n\nalpha",
        ),
        Chunk(id="a_1", doc_id="a", text="text", start_char=6, end_char=10),
        Chunk(id="b_0", doc_id="b", text="beta"),
    ]
    return docs, chunks


def test_round_trip_keeps_every_field_and_order(tmp_path) -> None:
    store = _store(tmp_path)
    docs, chunks = _docs()
    store.write_batch(docs, chunks)
    assert store.chunks() == chunks
    assert store.get_chunks(["b_0", "a_0"]) == {"b_0": chunks[2], "a_0": chunks[0]}
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_vectors_are_float32_blobs_with_model_and_dim(tmp_path) -> None:
    store = _store(tmp_path)
    docs, chunks = _docs()
    store.write_batch(docs, chunks)
    mat = np.arange(12, dtype=np.float64).reshape(3, 4)
    store.write_vectors([c.id for c in chunks], mat, "tiny-model")
    ids, got, model = store.vectors()
    assert ids == ["a_0", "a_1", "b_0"] and model == "tiny-model"
    assert got.dtype == np.float32 and got.flags["C_CONTIGUOUS"] and np.array_equal(got, mat.astype(np.float32))
    stats = store.stats()
    assert stats["documents"] == 2 and stats["chunks"] == 3 and stats["vectors"] == 3 and stats["dimension"] == 4


def test_failed_batch_leaves_nothing_behind(tmp_path) -> None:
    store = _store(tmp_path)
    docs, chunks = _docs()
    bad = [*chunks, Chunk(id="a_0", doc_id="a", text="duplicate id")]
    with pytest.raises(sqlite3.IntegrityError):
        store.write_batch(docs, bad)
    assert store.stats()["documents"] == 0 and store.chunks() == []


def test_clear_bumps_corpus_version_and_persists(tmp_path) -> None:
    store = _store(tmp_path)
    docs, chunks = _docs()
    store.write_batch(docs, chunks)
    v1 = store.stats()["corpus_version"]
    store.clear()
    assert store.stats()["corpus_version"] == v1 + 1 and store.stats()["chunks"] == 0
    store.write_batch(docs, chunks)
    store.close()
    again = _store(tmp_path)
    assert len(again.chunks()) == 3


def test_truncated_vector_is_detected(tmp_path) -> None:
    store = _store(tmp_path)
    docs, chunks = _docs()
    store.write_batch(docs, chunks)
    store.write_vectors([c.id for c in chunks], np.ones((3, 4)), "m")
    store.db.execute("UPDATE vectors SET vector = substr(vector, 1, 8) WHERE chunk_id = 'a_1'")
    with pytest.raises(StoreError, match="rebuild"):
        store.vectors()


def test_vectors_for_replaced_chunk_texts_are_skipped(tmp_path) -> None:
    store = _store(tmp_path)
    docs, chunks = _docs()
    store.write_batch(docs, chunks)
    texts = [c.index_text for c in chunks]
    texts[1] = "what the chunk held before another process replaced it"
    written = store.write_vectors([c.id for c in chunks], np.ones((3, 4)), "m", texts)
    assert written == 2 and sorted(store.vectors()[0]) == ["a_0", "b_0"]


def test_version_token_is_unique_per_change(tmp_path) -> None:
    store = _store(tmp_path)
    docs, chunks = _docs()
    store.write_batch(docs, chunks)
    v1 = store.version()
    store.replace_documents([], [])  # nothing to store: no new version
    assert store.version() == v1
    store.clear()
    store.db.execute("UPDATE meta SET value = '1' WHERE key = 'corpus_version'")  # as if restored from a backup
    v2 = store.version()
    assert v2 != v1 and v2.token != v1.token and v2.counter == 1 and v1.counter == 1
    assert v2.token.endswith(".1") and v1.token.endswith(".1")


def test_sha256_fingerprints_are_stored_as_32_bytes_and_read_back_as_text(tmp_path) -> None:
    import hashlib

    store = _store(tmp_path)
    docs, chunks = _docs()
    sha = hashlib.sha256(b"a").hexdigest()
    store.replace_documents(docs, chunks, fingerprints=[sha, "not-a-sha"])
    assert store.doc_fingerprints() == {"a": sha, "b": "not-a-sha"}
    assert store.doc_fingerprints(["b", "missing"]) == {"b": "not-a-sha"}  # only those asked for
    kinds = dict(store.db.execute("SELECT id, typeof(fingerprint) || length(fingerprint) FROM documents"))
    assert kinds == {"a": "blob32", "b": "text9"}
    # a store written before (hex text) reads the same, so nothing is re-processed
    store.db.execute("UPDATE documents SET fingerprint = ? WHERE id = 'a'", (sha,))
    assert store.doc_fingerprints() == {"a": sha, "b": "not-a-sha"}
    store.replace_documents(docs[:1], chunks[:2], fingerprints=[sha.upper()])  # not what hexdigest gives: kept
    assert store.doc_fingerprints()["a"] == sha.upper()


@pytest.mark.parametrize("compressor", ["isal", "standard library"])
def test_document_texts_are_kept_compressed_and_whole(tmp_path, monkeypatch, compressor) -> None:
    import zlib

    from plm_plugins.stores import sqlite_columns as module

    if compressor == "isal":
        import platform

        if platform.machine() not in ("x86_64", "AMD64", "aarch64", "arm64"):
            pytest.skip(f"isal is not a dependency on {platform.machine()} (pyproject.toml's marker)")
        assert module._isal_compress is not None, "isal is a dependency on this platform"
    else:  # a platform without the isal wheel
        monkeypatch.setattr(module, "_isal_compress", None)
    store = _store(tmp_path)
    text = "Ünïcode ✓ and a long line. " * 200 + "𝔘 last"
    store.write_batch([Document(id="a", text=text)], [Chunk(id="a_0", doc_id="a", text="a")])
    (blob,) = store.db.execute("SELECT text FROM documents WHERE id = 'a'").fetchone()
    assert isinstance(blob, bytes) and len(blob) < len(text.encode()) // 4
    assert zlib.decompress(blob).decode("utf-8") == text


def test_get_document_reads_back_the_whole_document_by_id(tmp_path) -> None:
    store = _store(tmp_path)
    doc = Document(
        id="team-a/README",
        text="---\nteam: a\n---\n# Ünï ✓\n",
        title="Ünï",
        path="/x/README.md",
        metadata={"team": "a"},
    )
    store.write_batch([doc], [Chunk(id="t_0", doc_id=doc.id, text="x")])
    assert store.get_document("team-a/README") == doc
    assert store.get_document("team-a") is None and store.get_document("README") is None
    store.db.execute("UPDATE documents SET text = 'plain' WHERE id = ?", (doc.id,))  # a store from before compression
    got = store.get_document(doc.id)
    assert got is not None and got.text == "plain"


def test_the_sqlite_store_keeps_the_store_contract(tmp_path) -> None:
    import plm.testing

    plm.testing.check_store(lambda: _store(tmp_path / "store"))  # each call opens the same folder: a reopen


def test_chunk_count_is_kept_by_writes_and_recounted_after_a_writer_that_keeps_none(tmp_path) -> None:
    store = _store(tmp_path)
    statements: list[str] = []
    store.db.set_trace_callback(statements.append)
    docs = [Document(id=f"d{i}", text="x") for i in range(3)]
    chunks = [Chunk(id=f"c{i}{j}", doc_id=f"d{i}", text="pod") for i in range(3) for j in range(2)]
    store.replace_documents(docs, chunks)
    store.replace_documents([docs[0]], chunks[:1])  # d0 now has one chunk
    store.delete_documents(["d2"])
    statements.clear()
    assert store.chunk_count() == 3 == len(store.chunk_ids())
    assert not [s for s in statements if "count(*)" in s]  # read from meta, not counted
    # An older plm writes without keeping the count: the feed moves past it, so it is counted.
    store.db.execute(
        "INSERT INTO chunks(id, doc_id, text, heading_path, keywords, entities, metadata, seq) "
        "VALUES('c-old', 'd1', 'pod', '[]', '[]', '[]', '{}', 999)"
    )
    store.set_meta("feed_position", "999")
    store.db.commit()
    statements.clear()
    assert store.chunk_count() == 4 and [s for s in statements if "count(*)" in s]
    store.replace_documents([Document(id="d5", text="x")], [Chunk(id="c5", doc_id="d5", text="pod")])
    statements.clear()
    assert store.chunk_count() == 5 and not [s for s in statements if "count(*)" in s]
    store.clear()
    assert store.chunk_count() == 0
