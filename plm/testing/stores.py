"""The store check (`check_store`): documents, chunks, vectors, filters, meta, the change
feed, and what survives closing a store and opening it again."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from plm.testing.corpus import CHUNKS, MODEL, embed
from plm.testing.rules import Rules, checking
from plm_core.errors import StoreError
from plm_core.interfaces import Store
from plm_core.records import Chunk, Document, StoreProblem


def _docs(tag: str = "") -> tuple[list[Document], list[Chunk]]:
    docs = [
        Document(id=f"d{i}", text=f"document {i}{tag}", title=f"T{i}", path=f"/kit/d{i}.md", metadata={"n": i})
        for i in range(4)
    ]
    chunks = [
        Chunk(
            id=f"{c.id}{tag}",
            doc_id=c.doc_id,
            text=c.text,
            heading_path=("T", c.doc_id),
            start_char=c.start_char,
            end_char=c.end_char,
            stable_id=f"s-{c.id}",
            metadata=c.metadata,
            keywords=("pod",) if i % 2 else (),
            entities={"ORG": ("acme",)} if i == 0 else {},
            enriched=f"enriched {c.text}" if i % 3 == 0 else None,
        )
        for i, c in enumerate(CHUNKS)
    ]
    return docs, chunks


FILTERS: list[dict[str, Any]] = [
    {"team": "a"},
    {"team": {"ne": "a"}},
    {"n": {"gte": 2, "lt": 5}},
    {"tags": "y"},
    {"tags": {"in": ["x", "z"]}},
    {"when": {"gte": "2024-01-01"}},
    {"team": "b", "n": {"gt": 3}},
    {"missing": 1},
]


def check_store(make_store: Callable[[], Store], reopen: Callable[[Store], Store] | None = None) -> None:
    """`make_store()` opens the store at one location (a folder, a database) and returns it,
    empty the first time: the kit writes, reads, closes it, then calls `make_store()` again
    for the same location and checks that what `get_meta` promises survives a reopen, with
    the documents, chunks and vectors. `reopen(store)`, if given, does that second opening
    instead (the kit has closed `store`; return the store opened again where it was)."""
    from plm_index.filters import compile_filters

    with checking("stores") as rules:
        store = make_store()
        rules.require(isinstance(store, Store), "make_store() returns a plm.Store")
        rules.require(store.chunk_ids() == [] and store.chunks() == [], "a new store holds no chunks")
        rules.expect(store.doc_fingerprints() == {} and store.vector_count() == 0, "a new store holds nothing")
        feed = store.feed_position()
        rules.expect(feed in (None, 0), "feed_position() of a new store is 0 (or None: no change feed)", f"{feed}")
        v0 = store.version()
        docs, chunks = _docs()
        matrix = embed([c.index_text for c in chunks])
        store.replace_documents(docs, chunks, matrix, MODEL, [f"f{i}" for i in range(len(docs))])
        v1 = store.version()
        rules.expect(v1 != v0 and v1.counter > v0.counter, "a write moves version() forward", f"{v0} -> {v1}")
        with rules.part("reading what was written"):
            _check_reads(rules, store, docs, chunks, matrix)
        with rules.part("filters"):
            _check_filters(rules, store, compile_filters)
        with rules.part("edits and deletes"):
            _check_edits(rules, store, docs, compile_filters)
        again: Store | None = None
        with rules.part("close and reopen"):
            again = _check_reopen(rules, store, make_store if reopen is None else functools.partial(reopen, store))
        if again is not None:
            if again.feed_position() is not None:
                with rules.part("vectors of two models"):
                    _check_mixed_models(rules, again)
            again.close()


def _check_reads(rules: Rules, store: Store, docs: list[Document], chunks: list[Chunk], matrix: Any) -> None:
    ids = [c.id for c in chunks]
    rules.expect(store.chunk_ids() == ids, "chunk_ids() lists chunks in index order", f"{store.chunk_ids()}")
    rules.expect(store.chunks() == chunks, "chunks() gives back every field of every chunk, in index order")
    rules.expect(store.chunk_count() == len(ids), "chunk_count() is len(chunk_ids())")
    rules.expect(store.index_texts() == (ids, [c.index_text for c in chunks]), "index_texts() is (ids, index_text)")
    got = store.get_chunks(["c3", "nope", "c0"])
    rules.expect(got == {"c3": chunks[3], "c0": chunks[0]}, "get_chunks(ids) gives the stored ones, absent left out")
    rules.expect(store.chunk_metadata() == [dict(c.metadata) for c in chunks], "chunk_metadata() in index order")
    fps = {d.id: f"f{i}" for i, d in enumerate(docs)}
    rules.expect(store.doc_fingerprints() == fps, "doc_fingerprints() maps each document to its fingerprint")
    rules.expect(store.doc_fingerprints(["d1", "zz"]) == {"d1": "f1"}, "doc_fingerprints(ids) only those stored")
    paths = store.doc_paths()
    rules.expect(paths == {d.id: d.path for d in docs}, "doc_paths() maps each document to its path", f"{paths}")
    some = store.paths_of(["d2", "nope", "d0"])
    rules.expect(some == {"d2": docs[2].path, "d0": docs[0].path}, "paths_of(ids) gives the stored ones", f"{some}")
    if type(store).get_document is not Store.get_document:
        rules.expect(store.get_document("d2") == docs[2], "get_document(id) gives back the whole document")
        rules.expect(store.get_document("nope") is None, "get_document() of an unknown id is None")
    vids, got_matrix, model = store.vectors()
    rules.expect(vids == ids and model == MODEL, "vectors() gives (ids in index order, matrix, model)")
    rules.expect(
        got_matrix is not None and np.asarray(got_matrix).dtype == np.float32 and np.allclose(got_matrix, matrix),
        "vectors() gives back the float32 rows written",
    )
    rules.expect(store.vector_count() == len(ids), "vector_count() counts the stored vectors")
    rules.expect(store.chunks_needing_vectors(MODEL) == [], "no chunk needs a vector when all have one")
    other = {c.id for c in store.chunks_needing_vectors("another-model")}
    rules.expect(other == set(ids), "chunks_needing_vectors(model) lists those with another model's vector")
    rules.expect(store.consistency_problems() == [], "a consistent store has no consistency_problems()")


def _check_edits(rules: Rules, store: Store, docs: list[Document], compile_filters: Callable[[Any], Any]) -> None:
    ids = store.chunk_ids()
    position = store.feed_position()
    before = _feed_state(store) if position is not None else None
    # An edit: d0's chunks replaced (no vectors yet), d0 keeps its place; then vectors.
    new = [Chunk(id="c0-new", doc_id="d0", text="pod memory pending", metadata={"team": "a"})]
    store.replace_documents([docs[0]], new, None, None, ["f0b"])
    ids = ["c0-new", *ids[2:]]
    rules.expect(store.chunk_ids() == ids, "a replaced document keeps its place in index order", f"{store.chunk_ids()}")
    needing = [c.id for c in store.chunks_needing_vectors(MODEL)]
    rules.expect(needing == ["c0-new"], "chunks_needing_vectors(model) lists chunks without one", f"{needing}")
    skipped = store.write_vectors(["c0-new"], embed(["x"]), MODEL, texts=["another text"])
    rules.expect(skipped == 0, "write_vectors(..., texts) skips rows whose chunk holds another text")
    written = store.write_vectors(["c0-new"], embed(["pod memory pending"]), MODEL)
    rules.expect(written == 1 and store.chunks_needing_vectors(MODEL) == [], "write_vectors() stores vectors")
    removed = store.delete_documents(["d1", "zz", "d1"])
    rules.expect(removed == ["d1"], "delete_documents(ids) returns the ids that were there", f"got {removed}")
    ids = [i for i in ids if i not in ("c2", "c3")]
    rules.expect(store.chunk_ids() == ids, "a deleted document's chunks are gone", f"{store.chunk_ids()}")
    rules.expect(store.vectors()[0] == ids, "a deleted document's vectors are gone")
    rules.expect(store.doc_fingerprints() == {"d0": "f0b", "d2": "f2", "d3": "f3"}, "fingerprints follow writes")
    _check_filters(rules, store, compile_filters)
    if position is not None:
        _check_feed(rules, store, position, before)
    with store.snapshot():
        rules.expect(store.chunk_ids() == ids, "reads inside snapshot() see the committed state")
    store.set_meta("plm-testing", "1")
    rules.expect(store.get_meta("plm-testing") == "1", "get_meta() reads what set_meta() wrote")
    rules.expect(store.get_meta("plm-testing-unset") is None, "get_meta() of an unset key is None")
    stats = store.stats()
    for key in ("documents", "chunks", "vectors", "model", "dimension", "corpus_version", "bytes"):
        rules.expect(key in stats, f"stats() has {key!r}", f"got {sorted(stats)}")
    rules.expect(stats["documents"] == 3 and stats["chunks"] == len(ids), "stats() counts documents and chunks")
    rules.expect(store.consistency_problems() == [], "a consistent store has no consistency_problems()")


def _state(store: Store) -> dict[str, Any]:
    """What a reopened store must give back as it was."""
    ids = store.doc_fingerprints()
    return {
        "get_meta('plm-testing')": store.get_meta("plm-testing"),
        "version()": store.version(),
        "doc_fingerprints()": ids,
        "doc_paths()": store.doc_paths(),
        "chunks()": store.chunks(),
        "chunk_metadata()": store.chunk_metadata(),
        "feed_position()": store.feed_position(),
        "rows_since(0)": store.rows_since(0) if store.feed_position() is not None else None,
        "documents": {i: store.get_document(i) for i in ids}
        if type(store).get_document is not Store.get_document
        else None,
    }


def _check_reopen(rules: Rules, store: Store, again: Callable[[], Store]) -> Store:
    before = _state(store)
    vids, matrix, model = store.vectors()
    store.close()
    reopened = again()
    rules.require(isinstance(reopened, Store), "the store opened again is a plm.Store", repr(type(reopened)))
    after = _state(reopened)
    rules.expect(
        after["get_meta('plm-testing')"] == "1",
        "get_meta() reads what set_meta() wrote, also after close() and a reopen of the same location",
        "make_store() again (or reopen) must open where the first store was",
    )
    lost = [key for key, value in before.items() if after[key] != value]
    rules.expect(
        not lost,
        "documents, chunks, vectors and the change feed survive close() and a reopen, as they were",
        f"changed by the reopen: {lost}",
    )
    vids2, matrix2, model2 = reopened.vectors()
    rules.expect(
        vids2 == vids and model2 == model and matrix2 is not None and np.allclose(matrix2, matrix),
        "vectors() after a reopen gives the ids, rows and model stored before it",
    )
    return reopened


def _check_mixed_models(rules: Rules, store: Store) -> None:
    """A refresh reads only the rows past its position, so those rows carry the model check."""
    position = store.feed_position() or 0
    for doc, model in (("d8", "another-model"), ("d9", MODEL)):  # the store's model ends as MODEL
        chunk = Chunk(id=f"c-{doc}", doc_id=doc, text="pod restarts")
        store.replace_documents([Document(id=doc, text=chunk.text)], [chunk], embed([chunk.text]), model, [doc])
    kinds = {p.kind for p in store.consistency_problems()}
    rules.expect(StoreProblem.MIXED_MODELS in kinds, "consistency_problems() names vectors of two models")
    try:
        store.vectors_since(position)
    except StoreError:
        return
    rules.expect(False, "vectors_since(p) refuses rows whose vector comes from another model than the store's")


def _check_filters(rules: Rules, store: Store, compile_filters: Callable[[Any], Any]) -> None:
    metadata = store.chunk_metadata()
    for spec in FILTERS:
        mask = np.asarray(store.filter_mask(spec))
        want = [bool(compile_filters(spec)(m)) for m in metadata]
        rules.expect(
            mask.dtype == bool and mask.tolist() == want,
            "filter_mask(spec) is a boolean mask over rows in index order, as plm.compile_filters(spec) decides",
            f"filter {spec}: got {mask.tolist()}, want {want}",
        )


def _feed_state(store: Store) -> dict[int, tuple[str, int, str]]:
    seqs, ids, keys, texts = store.rows_since(0)
    return {s: (i, k, t) for s, i, k, t in zip(seqs, ids, keys, texts, strict=True)}


def _check_feed(rules: Rules, store: Store, position: int, before: Mapping[int, Any] | None) -> None:
    now = store.feed_position()
    rules.expect(now is not None and now > position, "writes move feed_position() forward", f"{position} -> {now}")
    state = _feed_state(store)
    by_key = [i for i, _, _ in sorted(state.values(), key=lambda r: r[1])]
    rules.expect(by_key == store.chunk_ids(), "rows_since(0)'s order keys sort into index order", f"{by_key}")
    texts = dict(zip(*store.index_texts(), strict=True))
    rules.expect(all(texts[i] == t for i, _, t in state.values()), "rows_since() gives each chunk's index_text")
    removed = store.removed_since(position)
    if removed is not None and before is not None:
        replica = {s: r for s, r in before.items() if s not in set(removed)}
        seqs, ids, keys, txts = store.rows_since(position)
        replica.update({s: (i, k, t) for s, i, k, t in zip(seqs, ids, keys, txts, strict=True)})
        rules.expect(
            {s: (r[0], r[2]) for s, r in replica.items()} == {s: (r[0], r[2]) for s, r in state.items()},
            "a replica of an earlier state, less removed_since(p), plus rows_since(p), is the state now",
            f"replica {sorted(replica.items())}\n  now {sorted(state.items())}",
        )
        rules.expect(
            replica == state,
            "a chunk's order key never changes while its seq lives (a segment keeps the key it was built with)",
            f"earlier {sorted(before.items())}\n  now {sorted(state.items())}",
        )
    vseqs, matrix, model = store.vectors_since(0)
    ids_by_seq = {s: r[0] for s, r in state.items()}
    _, stored, _ = store.vectors()
    rows = {i: n for n, i in enumerate(store.chunk_ids())}
    rules.expect(
        model == MODEL
        and sorted(vseqs) == sorted(state)
        and all(np.allclose(matrix[n], stored[rows[ids_by_seq[s]]]) for n, s in enumerate(vseqs)),
        "vectors_since(0) gives every stored vector with its chunk's seq",
    )
