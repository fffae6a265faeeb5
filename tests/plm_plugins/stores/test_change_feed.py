"""The change feed of both stores: a replica of an earlier state, brought forward with
`removed_since` and `rows_since` (and `vectors_since`), equals the final state after any
sequence of replaces, deletes, vector writes and clears; order keys sort into index order;
positions only move forward; a store from before the feed is numbered on open; a reader
inside `snapshot()` sees one state.
"""

from __future__ import annotations

import random
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plm_core.records import Chunk, Document
from plm_plugins.stores.sqlite import SQLiteStore

DIM = 4


def _open(kind: str, where: str) -> Any:
    if kind == "sqlite":
        store = SQLiteStore()
        store.open(where)
        return store
    from plm_plugins.stores.postgres import PostgresStore

    pg = PostgresStore(PostgresStore.Config(dsn=where))
    pg.open("/nonexistent-folder-is-not-used")
    return pg


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(store kind, where): an index folder, or the DSN of a new database."""
    if request.param == "sqlite":
        return "sqlite", str(tmp_path)
    pytest.importorskip("psycopg")
    return "postgres", request.getfixturevalue("pg_dsn")


def _document(doc_id: str, n_chunks: int, rng: random.Random) -> tuple[Document, list[Chunk]]:
    version = uuid.uuid4().hex[:6]  # chunk ids change with every version, as a chunker's do
    chunks = [
        Chunk(
            id=f"{doc_id}_{version}_{j}",
            doc_id=doc_id,
            text=f"text {doc_id} {version} {j}",
            enriched=f"enriched {doc_id} {version} {j}" if rng.random() < 0.5 else None,
        )
        for j in range(n_chunks)
    ]
    return Document(id=doc_id, text=f"document {doc_id} {version}"), chunks


def _vectors(n: int, rng: random.Random) -> np.ndarray:
    return np.array([rng.random() for _ in range(n * DIM)], dtype=np.float32).reshape(n, DIM)


def _state(store: Any) -> dict[int, tuple[str, str, int]]:
    seqs, ids, keys, texts = store.rows_since(0)
    return {s: (i, t, k) for s, i, k, t in zip(seqs, ids, keys, texts, strict=True)}


def _vector_state(store: Any) -> dict[int, tuple[float, ...]]:
    seqs, matrix, _ = store.vectors_since(0)
    return {s: tuple(matrix[n].tolist()) for n, s in enumerate(seqs)}


def _operate(store: Any, rng: random.Random, doc_ids: list[str]) -> str:
    """One random write; returns what it was."""
    stored = sorted(store.doc_fingerprints())
    roll = rng.random()
    if roll < 0.5 or not stored:  # add or replace documents, with or without vectors
        picked = rng.sample(doc_ids, rng.randint(1, 3))
        docs, chunks = [], []
        for doc_id in picked:
            doc, its = _document(doc_id, rng.randint(0, 3), rng)
            docs.append(doc)
            chunks.extend(its)
        with_vectors = rng.random() < 0.5
        store.replace_documents(
            docs, chunks, _vectors(len(chunks), rng) if with_vectors else None, "m" if with_vectors else None
        )
        return "replace"
    if roll < 0.7:  # delete documents, some of them absent
        store.delete_documents(rng.sample(stored, min(len(stored), rng.randint(1, 2))) + ["absent"])
        return "delete"
    if roll < 0.97:  # (re)write vectors of some chunks, one of them with a stale text
        ids, texts = store.index_texts()
        if not ids:
            return "nothing"
        rows = rng.sample(range(len(ids)), min(len(ids), rng.randint(1, 4)))
        expected = [texts[i] if n else "a text the chunk no longer holds" for n, i in enumerate(rows)]
        store.write_vectors([ids[i] for i in rows], _vectors(len(rows), rng), "m", expected)
        return "vectors"
    store.clear()
    return "clear"


@pytest.mark.parametrize("seed", [0, 1])
def test_applying_the_feed_to_an_earlier_state_gives_the_final_state(location: tuple[str, str], seed: int) -> None:
    store = _open(*location)
    rng = random.Random(seed)
    doc_ids = [f"d{i}" for i in range(8)]
    assert store.feed_position() == 0 and store.rows_since(0) == ([], [], [], [])
    assert store.removed_since(0) == [] and store.vectors_since(0) == ([], None, None)
    checkpoints: list[tuple[int, dict[int, Any], dict[int, Any]]] = [(0, {}, {})]
    ever: dict[int, str] = {}  # every seq seen live -> its chunk id
    dead: set[int] = set()
    kinds = set()
    for _ in range(60):
        before, version = store.feed_position(), store.version()
        kinds.add(_operate(store, rng, doc_ids))
        position = store.feed_position()
        # Positions only move forward, and move exactly when the corpus changes.
        assert position >= before and (position > before) == (store.version() != version)
        state = _state(store)
        assert all(0 < seq <= position for seq in state)
        for seq, (chunk_id, _, _) in state.items():
            assert ever.setdefault(seq, chunk_id) == chunk_id  # a seq is never given to another chunk
        dead |= set(checkpoints[-1][1]) - set(state)
        assert not dead & set(state)  # a removed seq never comes back
        # Sorting by order key is index order; the texts are what a lexical index reads.
        assert [state[s][0] for s in sorted(state, key=lambda s: state[s][2])] == store.chunk_ids()
        assert len({k for _, _, k in state.values()}) == len(state)
        assert dict(zip(*store.index_texts(), strict=True)) == {i: t for i, t, _ in state.values()}
        assert sorted(state[s][0] for s in _vector_state(store)) == sorted(store.vectors()[0])
        checkpoints.append((position, state, _vector_state(store)))
    assert {"replace", "delete", "vectors"} <= kinds

    final, final_vectors = _state(store), _vector_state(store)
    for position, earlier, earlier_vectors in checkpoints:
        removed = store.removed_since(position)
        assert removed is not None and removed == sorted(removed) and all(s <= position for s in removed)
        assert set(earlier) - set(final) <= set(removed)  # every row gone since is reported
        seqs, ids, keys, texts = store.rows_since(position)
        assert seqs == sorted(seqs) and all(s > position for s in seqs)
        replica = {s: row for s, row in earlier.items() if s not in removed}
        replica.update({s: (i, t, k) for s, i, k, t in zip(seqs, ids, keys, texts, strict=True)})
        assert replica == final
        vector_seqs, matrix, model = store.vectors_since(position)
        vectors = {s: row for s, row in earlier_vectors.items() if s not in removed}
        vectors.update({s: tuple(matrix[n].tolist()) for n, s in enumerate(vector_seqs)})
        assert vectors == final_vectors and (model == "m" or not vector_seqs)
    assert store.removed_since(store.feed_position() + 1) is None  # a position this store never reached


def test_write_vectors_gives_the_chunk_a_new_seq_and_reports_the_old_one(location: tuple[str, str]) -> None:
    store = _open(*location)
    rng = random.Random(3)
    doc, chunks = _document("a", 2, rng)
    store.replace_documents([doc], chunks)
    assert store.feed_position() == 2 and store.rows_since(0)[0] == [1, 2]
    assert store.vectors_since(0) == ([], None, None)
    matrix = _vectors(1, rng)
    assert store.write_vectors([chunks[1].id], matrix, "m") == 1
    assert store.feed_position() == 3 and store.removed_since(2) == [2]
    assert store.rows_since(2)[:2] == ([3], [chunks[1].id])
    seqs, got, model = store.vectors_since(0)
    assert seqs == [3] and model == "m" and np.array_equal(got, matrix)
    assert store.delete_documents(["a"]) == ["a"]
    assert store.feed_position() == 4 and store.removed_since(3) == [1, 3] and store.removed_since(2) == [1, 2]
    assert store.rows_since(0) == ([], [], [], [])


def test_a_reader_inside_a_snapshot_does_not_see_a_later_write(location: tuple[str, str]) -> None:
    writer = _open(*location)
    rng = random.Random(4)
    writer.replace_documents(*[[x] if isinstance(x, Document) else x for x in _document("a", 2, rng)])
    reader = _open(*location)
    with reader.snapshot():
        version, position = reader.version(), reader.feed_position()
        rows, vectors = reader.rows_since(0), reader.vectors_since(0)
        doc, chunks = _document("a", 3, rng)
        writer.replace_documents([doc], chunks, _vectors(3, rng), "m")
        writer.replace_documents(*[[x] if isinstance(x, Document) else x for x in _document("b", 1, rng)])
        assert reader.version() == version and reader.feed_position() == position == 2
        assert reader.rows_since(0) == rows and reader.rows_since(position) == ([], [], [], [])
        assert reader.removed_since(position) == [] and reader.vectors_since(0) == vectors == ([], None, None)
    assert reader.feed_position() == writer.feed_position() == 6
    assert reader.removed_since(position) == [1, 2] and len(reader.rows_since(position)[0]) == 4
    assert reader.vectors_since(position)[0] == [3, 4, 5]


def test_clear_reports_every_chunk_as_removed(location: tuple[str, str]) -> None:
    store = _open(*location)
    rng = random.Random(5)
    doc, chunks = _document("a", 3, rng)
    store.replace_documents([doc], chunks)
    store.clear()
    assert store.feed_position() == 4 and store.removed_since(3) == [1, 2, 3] and store.rows_since(0)[0] == []
    store.replace_documents([doc], chunks)
    assert store.rows_since(4)[0] == [5, 6, 7]  # seqs are never reused
    store.replace_documents(*[[x] if isinstance(x, Document) else x for x in _document("a", 2, rng)])
    assert store.feed_position() == 9 and store.rows_since(7)[0] == [8, 9]
    # `at` is the position the removing transaction reached, whatever it added before.
    connection = store.db if location[0] == "sqlite" else store.conn
    removed = connection.execute("SELECT seq, at FROM removed ORDER BY seq").fetchall()
    assert [tuple(r) for r in removed] == [(1, 4), (2, 4), (3, 4), (5, 9), (6, 9), (7, 9)]


# ---------------------------------------------------------------------------- migration

# The SQLite layout before the change feed: no `chunks.seq`, no `removed` table.
OLD_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    row INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, title TEXT, path TEXT,
    text TEXT NOT NULL, metadata TEXT NOT NULL, fingerprint TEXT);
CREATE TABLE IF NOT EXISTS chunks (
    row INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, stable_id TEXT, doc_id TEXT NOT NULL
        REFERENCES documents(id) ON DELETE CASCADE,
    text TEXT NOT NULL, enriched TEXT, heading_path TEXT NOT NULL, start_char INTEGER,
    end_char INTEGER, keywords TEXT NOT NULL, entities TEXT NOT NULL, metadata TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id);
CREATE TABLE IF NOT EXISTS vectors (
    chunk_id TEXT PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    model TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL);
"""

# The Postgres layout before the change feed (schema `plm`).
OLD_PG_SCHEMA = """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE SCHEMA IF NOT EXISTS plm;
CREATE TABLE IF NOT EXISTS plm.meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS plm.documents (
    row bigserial PRIMARY KEY, id text UNIQUE NOT NULL, title text, path text,
    text text NOT NULL, metadata jsonb NOT NULL, fingerprint text);
CREATE TABLE IF NOT EXISTS plm.chunks (
    row bigserial PRIMARY KEY, id text UNIQUE NOT NULL, stable_id text,
    doc_id text NOT NULL REFERENCES plm.documents(id) ON DELETE CASCADE,
    text text NOT NULL, enriched text, heading_path jsonb NOT NULL, start_char integer,
    end_char integer, keywords jsonb NOT NULL, entities jsonb NOT NULL, metadata jsonb NOT NULL,
    model text, embedding vector,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, coalesce(enriched, text))) STORED);
CREATE INDEX IF NOT EXISTS chunks_doc ON plm.chunks (doc_id);
CREATE INDEX IF NOT EXISTS chunks_tsv ON plm.chunks USING gin (tsv);
CREATE INDEX IF NOT EXISTS chunks_meta ON plm.chunks USING gin (metadata jsonb_path_ops);
"""

# Rows written as an older plm would: document b stored first, then a; a's chunks stored
# after b's, b's second chunk last (so chunk rows are not index order).
OLD_DOCS = [("b", "B"), ("a", "A")]
OLD_CHUNKS = [
    ("b_0", "b", "beta zero"),
    ("a_0", "a", "alpha zero"),
    ("a_1", "a", "alpha one"),
    ("b_1", "b", "beta one"),
]
INDEX_ORDER = ["b_0", "b_1", "a_0", "a_1"]


def _old_sqlite_store(folder: Path) -> None:
    folder.mkdir(exist_ok=True)
    db = sqlite3.connect(folder / "plm.sqlite")
    db.executescript(OLD_SQLITE_SCHEMA)
    db.executemany("INSERT INTO meta VALUES(?, ?)", [("store_uid", "old-uid"), ("corpus_version", "7")])
    db.executemany(
        "INSERT INTO documents(id, title, text, metadata, fingerprint) VALUES(?,?,x'',?,?)",
        [(d, t, "{}", f"fp-{d}") for d, t in OLD_DOCS],
    )
    db.executemany(
        "INSERT INTO chunks(id, doc_id, text, heading_path, keywords, entities, metadata) "
        "VALUES(?,?,?,'[]','[]','{}','{}')",
        OLD_CHUNKS,
    )
    db.execute("INSERT INTO meta VALUES('model', 'm')")
    db.execute("INSERT INTO vectors VALUES('a_1', 'm', 4, ?)", (np.arange(4, dtype=np.float32).tobytes(),))
    db.commit()
    db.close()


def _old_pg_store(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(OLD_PG_SCHEMA)
        for key, value in [
            ("store_uid", "old-uid"),
            ("corpus_version", "7"),
            ("fulltext_config", "english"),
            ("schema_version", "before-the-feed"),
            ("model", "m"),
        ]:
            conn.execute("INSERT INTO plm.meta VALUES (%s, %s)", (key, value))
        for doc_id, title in OLD_DOCS:
            conn.execute(
                "INSERT INTO plm.documents (id, title, text, metadata, fingerprint) VALUES (%s, %s, '', '{}', %s)",
                (doc_id, title, f"fp-{doc_id}"),
            )
        for chunk_id, doc_id, text in OLD_CHUNKS:
            conn.execute(
                "INSERT INTO plm.chunks (id, doc_id, text, heading_path, keywords, entities, metadata, model, "
                "embedding) "
                "VALUES (%s, %s, %s, '[]', '[]', '{}', '{}', %s, %s::vector)",
                (
                    chunk_id,
                    doc_id,
                    text,
                    "m" if chunk_id == "a_1" else None,
                    "[0,1,2,3]" if chunk_id == "a_1" else None,
                ),
            )


def test_a_store_from_before_the_feed_is_numbered_in_index_order_on_open(
    location: tuple[str, str], tmp_path: Path
) -> None:
    kind, where = location
    if kind == "sqlite":
        _old_sqlite_store(Path(where))
    else:
        _old_pg_store(where)
    store = _open(kind, where)
    # Nothing is lost: documents, chunks, vectors and the version are as they were.
    assert store.chunk_ids() == INDEX_ORDER and store.doc_fingerprints() == {"b": "fp-b", "a": "fp-a"}
    assert {c.id: c.text for c in store.chunks()} == {c: t for c, _, t in OLD_CHUNKS}
    assert store.version().store_id == "old-uid" and store.version().counter == 7
    ids, matrix, model = store.vectors()
    assert ids == ["a_1"] and model == "m" and matrix.tolist() == [[0.0, 1.0, 2.0, 3.0]]
    # The feed starts at n: chunks numbered 1..n in index order, nothing known before n.
    seqs, chunk_ids, keys, texts = store.rows_since(0)
    assert seqs == [1, 2, 3, 4] and chunk_ids == INDEX_ORDER and keys == sorted(keys)
    assert texts == ["beta zero", "beta one", "alpha zero", "alpha one"]
    assert store.feed_position() == 4 and store.removed_since(4) == [] and store.removed_since(3) is None
    assert store.vectors_since(0)[0] == [4]
    # It goes on like any other store's.
    store.replace_documents([Document(id="b", text="new b")], [Chunk(id="b_new", doc_id="b", text="beta new")])
    assert store.feed_position() == 5 and store.removed_since(4) == [1, 2]
    assert store.rows_since(4)[:2] == ([5], ["b_new"]) and store.chunk_ids() == ["b_new", "a_0", "a_1"]
    store.close()
    again = _open(kind, where)  # opening it again changes nothing
    assert again.feed_position() == 5 and again.rows_since(0)[0] == [3, 4, 5]
