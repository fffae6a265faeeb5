"""Conformance checks for plm plugins: prove a stage keeps its family's contract with one call.

    import plm.testing

    def test_my_tokenizer_keeps_the_contract():
        plm.testing.check_tokenizer(MyTokenizer())

    def test_my_retriever_keeps_the_contract(tmp_path):
        plm.testing.check_retriever(MyRetriever, tmp_path)

- `check_store(make_store)`: documents, chunks, vectors, filters, meta and the change feed;
  `make_store()` returns a new, open, empty store.
- `check_tokenizer(tokenizer, different=None)`: deterministic, one token list per text,
  repeats kept, a JSON `identity` that a fresh instance with the same config shares (and
  `different`, the tokenizer with settings that change its tokens, does not).
- `check_retriever(make_retriever, folder=None, exact=True)`: n hits best first, the
  `allowed` mask applied before the cut, ties scored equal and ordered the same every time,
  an empty corpus, and a saved build that opens to the same hits (`exact=False`: an ANN
  search, whose n hits need not be the exact top n).
- `check_fuser(fuser, sources=("dense", "bm25"))`: one ranking, best first, from the sources' rankings; deterministic;
  one empty source keeps the other's order; no sources, no hits.
- `check_segmented_index(make_index, folder)`: an index kept by `refresh` (segments,
  deletions, merges) ranks as one built whole from the same corpus, at every step.
- `check_chunker(chunker, documents=None)`: chunks of the documents given, ids unique, each
  document's chunks together and in reading order, the same every time, and the same
  whether its documents come together or one by one (a sync retries a failed batch so).
- `check_ranking_stage(stage, ranking=None)`: a reranker or other stage after retrieval
  returns a `Ranking` of the same query, only hits it was given, each once, ranked from 1;
  the same every time; an empty ranking stays empty; `depth(k)` at least k.
- `check_query_generator(generator, documents=None)`: queries for documents of the corpus,
  the same every time, each span it says it copied found in its source, and none found
  verbatim anywhere in the corpus once those spans and copies are cut (`MARKDOWN_DOCS`:
  the default corpus, with headings, links and prose).

Each raises AssertionError naming the contract broken and its page (docs/contracts/).
The checks build their indexes from `MemorySnapshot`, a snapshot with a change feed held in
memory (the `plm.Snapshot` protocol, nothing more). This module is not loaded by `import
plm`; it loads the index runtime when a check runs.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from plm_core.errors import StoreError
from plm_core.evaluation import QueryGenerator
from plm_core.interfaces import Chunker, Fuser, RankingStage, Retriever, Store, Tokenizer
from plm_core.records import (
    Chunk,
    CorpusVersion,
    Document,
    EmbeddedQuery,
    ExpandedQuery,
    FusionConfig,
    Hit,
    Ranking,
    ScoredChunk,
    StoreProblem,
    SyntheticQuery,
)

__all__ = [
    "CHUNKS",
    "MARKDOWN_DOCS",
    "MemorySnapshot",
    "check_chunker",
    "check_fuser",
    "check_query_generator",
    "check_ranking_stage",
    "check_retriever",
    "check_segmented_index",
    "check_store",
    "check_tokenizer",
    "embed",
    "query",
]


def _expect(ok: Any, family: str, rule: str, detail: str = "") -> None:
    """Fail with the contract broken, where it is written down, and what was seen."""
    if not ok:
        page = f"docs/contracts/{family}.md"
        raise AssertionError(f"{family} contract ({page}): {rule}" + (f"\n  {detail}" if detail else ""))


# ---------------------------------------------------------------------- the corpus
VOCAB = "pod node memory pending ready deployment replica service traffic cpu autoscaler limits".split()
TEXTS = [
    "the pod is pending because the node has no memory",
    "the node is ready and the pod runs",
    "a deployment manages replica sets of the pod",
    "the service routes traffic to the pod on the node",
    "pod memory limits",
    "pod memory limits",  # the same text as the row before: a tie
    "configure the autoscaler for cpu",
    "",
]
META: list[dict[str, Any]] = [
    {"team": "a", "n": 1, "tags": ["x", "y"]},
    {"team": "b", "n": 2},
    {"team": "a", "n": 3, "when": "2024-05-01"},
    {"team": "b", "n": 4, "tags": ["y"]},
    {"team": "a", "n": 5},
    {"team": "b", "n": 6},
    {"n": 7},
    {"team": "a"},
]
CHUNKS = [
    Chunk(id=f"c{i}", doc_id=f"d{i // 2}", text=t, start_char=0, end_char=len(t), metadata=META[i])
    for i, t in enumerate(TEXTS)
]
QUERIES = ["pod memory", "node", "deployment replica", "nothing matches this"]
MODEL = "plm-testing-bag-of-words"


def embed(texts: Sequence[str]) -> Any:
    """Bag-of-words vectors over the checks' vocabulary, L2-normalised (float32): equal texts
    give equal vectors, texts sharing words give close ones."""
    rows = np.array([[t.lower().split().count(w) for w in VOCAB] for t in texts], dtype=np.float32) + 1e-3
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def query(text: str, k: int = 10) -> EmbeddedQuery:
    """A query with its text and its vector, so lexical and dense retrievers both read it."""
    return EmbeddedQuery(text=text, original=text, k=k, vector=embed([text])[0], model=MODEL)


class MemorySnapshot:
    """One state of a corpus held in memory, with a change feed (`plm.Snapshot`): rows are
    (seq, order key, chunk, vector); `removed` is (position removed at, seq)."""

    def __init__(self, rows: Sequence[tuple[int, int, Chunk, Any]], removed: Sequence[tuple[int, int]], position: int):
        self._rows = sorted(rows, key=lambda r: r[1])  # index order
        self._removed = list(removed)
        self.position = position
        self.version = CorpusVersion("plm-testing", position, f"n{position}")
        self.chunks = [r[2] for r in self._rows]
        self.chunk_ids: Sequence[str] = [c.id for c in self.chunks]
        self.index_texts = [c.index_text for c in self.chunks]
        self.metadata = [dict(c.metadata) for c in self.chunks]
        self.n_chunks = len(self.chunks)
        dim = len(VOCAB)
        self.vectors = np.array([r[3] for r in self._rows], dtype=np.float32).reshape(-1, dim)
        self.vectors_model: str | None = MODEL
        self.model: str | None = None
        self.location = "(memory)"

    @property
    def empty(self) -> bool:
        return self.n_chunks == 0

    def _since(self, position: int) -> list[tuple[int, int, Chunk, Any]]:
        return sorted((r for r in self._rows if r[0] > position), key=lambda r: r[0])

    def rows_since(self, position: int) -> tuple[list[int], list[str], list[int], list[str]]:
        rows = self._since(position)
        return [r[0] for r in rows], [r[2].id for r in rows], [r[1] for r in rows], [r[2].index_text for r in rows]

    def removed_since(self, position: int) -> list[int] | None:
        return sorted(seq for at, seq in self._removed if at > position and seq <= position)

    def vectors_since(self, position: int) -> tuple[list[int], Any, str | None]:
        rows = self._since(position)
        return [r[0] for r in rows], np.array([r[3] for r in rows], np.float32).reshape(-1, len(VOCAB)), MODEL


class _Feed:
    """A corpus changing over time, as a store's change feed records it."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[int, int, Chunk, Any]] = {}
        self.removed: list[tuple[int, int]] = []
        self.position = 0

    def add(self, chunk: Chunk, order: int) -> None:
        self.remove(chunk.id)
        self.position += 1
        self.rows[chunk.id] = (self.position, order, chunk, embed([chunk.index_text])[0])

    def remove(self, chunk_id: str) -> None:
        if chunk_id in self.rows:
            self.position += 1
            self.removed.append((self.position, self.rows.pop(chunk_id)[0]))

    def snapshot(self) -> MemorySnapshot:
        return MemorySnapshot(list(self.rows.values()), self.removed, self.position)


def snapshot_of(chunks: Sequence[Chunk]) -> MemorySnapshot:
    feed = _Feed()
    for i, chunk in enumerate(chunks):
        feed.add(chunk, i)
    return feed.snapshot()


# ---------------------------------------------------------------------- retrievers
def _hits(family: str, hits: Any, n: int, ids: Sequence[str], what: str) -> list[ScoredChunk]:
    _expect(isinstance(hits, list), family, f"search() returns a list of ScoredChunk ({what})", f"got {hits!r}")
    got = [h.chunk_id for h in hits]
    _expect(all(isinstance(h, ScoredChunk) for h in hits), family, f"search() returns ScoredChunk items ({what})")
    _expect(len(hits) <= n, family, f"search(q, n) returns at most n hits ({what})", f"n={n}, got {len(hits)}")
    _expect(len(set(got)) == len(got), family, f"a chunk appears once in a ranking ({what})", f"got {got}")
    _expect(set(got) <= set(ids), family, f"hits are chunks of the corpus ({what})", f"got {got}")
    _expect([h.rank for h in hits] == list(range(len(hits))), family, f"ranks are 0, 1, 2, ... ({what})")
    scores = [h.score for h in hits]
    _expect(
        all(a >= b for a, b in zip(scores, scores[1:], strict=False)),
        family,
        f"hits come best first ({what})",
        f"{scores}",
    )
    return hits


def _pairs(hits: Sequence[ScoredChunk]) -> list[tuple[str, float]]:
    return [(h.chunk_id, round(float(h.score), 6)) for h in hits]


def check_retriever(
    make_retriever: Callable[[], Retriever], folder: Path | str | None = None, exact: bool = True
) -> None:
    """`make_retriever()` returns a new, unbuilt retriever; with `folder` (an empty folder)
    a build is also saved there and opened by another instance. `exact=False` for an
    approximate search (an ANN graph): its n hits need not be the exact top n, only as many
    (the `allowed` mask included), scored as a deeper search scores them."""
    family = "retrievers"
    snap = snapshot_of(CHUNKS)
    retriever = make_retriever()
    _expect(isinstance(retriever, Retriever), family, "make_retriever() returns a plm.Retriever")
    for allowed in (None, np.zeros(0, dtype=bool)):
        try:
            retriever.build(snapshot_of([]), None)
            hits: Any = retriever.search(query("pod memory"), 5, allowed)
        except Exception as err:  # noqa: BLE001 - the contract is "no error"
            hits = err
        _expect(hits == [], family, "an empty corpus builds and gives no hits (and no error)", f"got {hits!r}")

    retriever = make_retriever()
    retriever.build(snap, None)
    n_all = len(CHUNKS)
    found = False
    for text in QUERIES:
        deep = _hits(family, retriever.search(query(text), n_all + 5), n_all + 5, snap.chunk_ids, f"{text!r}")
        found = found or bool(deep)
        for n in (0, 1, 3):
            top = _hits(family, retriever.search(query(text), n), n, snap.chunk_ids, f"{text!r}, n={n}")
            _expect(
                _pairs(top) == _pairs(deep[:n]) if exact else len(top) == min(n, len(deep)),
                family,
                "search(q, n) is the first n of a deeper search (the top n, best first)"
                if exact
                else "search(q, n) gives n hits when a deeper search finds n",
                f"query {text!r}, n={n}: got {_pairs(top)}, the deeper search starts {_pairs(deep[:n])}",
            )
        again = retriever.search(query(text), n_all + 5)
        _expect(_pairs(again) == _pairs(deep), family, "the same query gives the same hits, ties in the same order")
        by_id = {h.chunk_id: h.score for h in deep}
        for mask in ([i % 2 == 0 for i in range(n_all)], [i in (4, 5) for i in range(n_all)], [False] * n_all):
            allowed = np.array(mask, dtype=bool)
            passing = [h for h in deep if allowed[snap.chunk_ids.index(h.chunk_id)]]
            for n in (1, 2, n_all):
                got = _hits(family, retriever.search(query(text), n, allowed), n, snap.chunk_ids, "allowed mask")
                _expect(
                    {h.chunk_id for h in got} <= {c for c, ok in zip(snap.chunk_ids, mask, strict=True) if ok},
                    family,
                    "`allowed` (a boolean mask over rows in index order) lets no other row through",
                    f"query {text!r}, allowed rows {[i for i, ok in enumerate(mask) if ok]}: got {_pairs(got)}",
                )
                _expect(
                    ([h.chunk_id for h in got] == [h.chunk_id for h in passing[:n]] or not exact)
                    and len(got) == min(n, len(passing))
                    and all(abs(h.score - by_id[h.chunk_id]) <= 1e-6 * max(1.0, abs(h.score)) for h in got),
                    family,
                    "`allowed` is applied before the cut: n hits come back when n allowed rows match, "
                    "scored as without the mask",
                    f"query {text!r}, n={n}, allowed rows {[i for i, ok in enumerate(mask) if ok]}: got "
                    f"{_pairs(got)}, want {_pairs(passing[:n])}",
                )
    _expect(found, family, "a query sharing words with chunks finds some of them", f"queries {QUERIES}")
    tied = {h.chunk_id: h.score for h in retriever.search(query("pod memory limits"), n_all)}
    if "c4" in tied or "c5" in tied:
        _expect(
            "c4" in tied and "c5" in tied and abs(tied["c4"] - tied["c5"]) <= 1e-6 * max(1.0, abs(tied["c4"])),
            family,
            "chunks with the same text (and vector) tie: both found, scored equal",
            f"c4 and c5 hold the same text; got {tied}",
        )
    if folder is not None:
        saved = make_retriever()
        saved.build(snap, Path(folder))
        _expect(saved.is_current(snap.version, Path(folder)), family, "is_current() is True for a version just built")
        reader = make_retriever()
        reader.load(snap, Path(folder))
        for text in QUERIES:
            want, got = retriever.search(query(text), n_all), reader.search(query(text), n_all)
            _expect(
                _pairs(got) == _pairs(want),
                family,
                "an index saved by build() and opened by load() gives the hits of the one built in memory",
                f"query {text!r}: loaded {_pairs(got)}, built {_pairs(want)}",
            )


def check_segmented_index(make_index: Callable[[], Any], folder: Path | str) -> None:
    """`make_index()` returns a new retriever that is a `plm.SegmentedIndex`; `folder` is an
    empty folder. The corpus changes in steps (adds, edits, deletes); after each `refresh`
    (and after the merges the policy asks for) the index ranks exactly as one built whole."""
    from plm_index import segments

    family = "retrievers"
    folder = Path(folder)
    index = make_index()
    _expect(isinstance(index, segments.SegmentedIndex), family, "make_index() returns a plm.SegmentedIndex")
    feed = _Feed()
    edited = Chunk(id="c0", doc_id="d0", text="the pod on the node has memory limits", metadata=META[0])
    steps: list[list[tuple[str, Any]]] = [
        [("add", i) for i in range(3)],
        [("add", 3), ("add", 4)],
        [("remove", "c1"), ("add", 5)],
        [("add", 6), ("edit", edited)],
        [("add", 7), ("remove", "c2")],
        [("remove", "c0"), ("remove", "c3"), ("remove", "c4")],
    ]
    for step, changes in enumerate(steps, 1):
        for kind, what in changes:
            if kind == "add":
                feed.add(CHUNKS[what], what)
            elif kind == "edit":  # a new text: a new seq, the same place in index order
                feed.add(what, 0)
            else:
                feed.remove(what)
        snap = feed.snapshot()
        index.refresh(snap, folder)
        _same_as_whole(family, index, make_index, snap, f"after refresh {step}")
        segments.wait_for_merges()  # the merges the policy asked for, so each run takes the same path
        reader = make_index()
        reader.load(snap, folder)
        _same_as_whole(family, reader, make_index, snap, f"after refresh {step} and its merges, opened from the folder")
    base = index.stage_base(folder)
    while index.merge_once(base):
        pass
    reader = make_index()
    reader.load(snap, folder)
    _expect(
        reader.state is not None and len(reader.state.segments) < len(steps),
        family,
        "a merge leaves fewer segments (the steps made one each)",
        f"{len(reader.state.segments) if reader.state else None} segments after {len(steps)} refreshes",
    )
    _same_as_whole(family, reader, make_index, snap, "after merges, opened from the folder")


def _same_as_whole(family: str, index: Any, make_index: Callable[[], Any], snap: MemorySnapshot, when: str) -> None:
    whole = make_index()
    whole.build(snap, None)
    n = snap.n_chunks + 2
    masks = [None, np.array([m.get("team") == "a" for m in snap.metadata], dtype=bool)]
    for text in QUERIES:
        for allowed in masks:
            got, want = index.search(query(text), n, allowed), whole.search(query(text), n, allowed)
            _expect(
                [h.chunk_id for h in got] == [h.chunk_id for h in want]
                and all(
                    abs(a.score - b.score) <= 1e-6 * max(1.0, abs(b.score)) for a, b in zip(got, want, strict=False)
                ),
                family,
                "a segmented index ranks as one built whole from the same corpus (same hits, order and scores)",
                f"{when}, query {text!r}, {'filtered' if allowed is not None else 'no filter'}: "
                f"segments {_pairs(got)}, whole {_pairs(want)}",
            )


# ---------------------------------------------------------------------- fusers
def check_fuser(fuser: Fuser, sources: Sequence[str] = ("dense", "bm25")) -> None:
    """`fuser` configured for retrievers labelled `sources` (two of them)."""
    family = "fusers"
    a, b = sources
    fuser.check_sources(list(sources))
    settings = fuser.settings_for(ExpandedQuery(text="q", k=3), 10)
    _expect(isinstance(settings, FusionConfig), family, "settings_for() returns a plm.FusionConfig")
    _expect(0 <= settings.candidates <= 10, family, "settings_for(q, n_chunks) asks for 0..n_chunks candidates")

    def ranking(source: str, ids: list[str], scores: list[float]) -> list[ScoredChunk]:
        return [ScoredChunk(c, s, source, r) for r, (c, s) in enumerate(zip(ids, scores, strict=True))]

    first = ranking(a, ["x0", "x1", "x2", "x3"], [0.9, 0.8, 0.7, 0.6])
    second = ranking(b, ["x0", "x4", "x2"], [12.0, 7.5, 3.0])
    given = {a: list(first), b: list(second)}
    fused = _hits(family, fuser.fuse(given, settings), 10**6, ["x0", "x1", "x2", "x3", "x4"], "fuse()")
    _expect(given == {a: first, b: second}, family, "fuse() leaves its input rankings as they were")
    _expect(fused, family, "fuse() of non-empty rankings gives hits", f"got {fused!r}")
    _expect(fused[0].chunk_id == "x0", family, "a chunk first in every source is first", f"got {_pairs(fused)}")
    again = fuser.fuse({a: list(first), b: list(second)}, settings)
    _expect(_pairs(again) == _pairs(fused), family, "fusing the same rankings twice gives the same ranking")
    for n in (0, 2, len(fused) + 1):
        top = fuser.fuse_top({a: list(first), b: list(second)}, settings, n)
        _expect(
            [(h.chunk_id, h.score, h.rank) for h in top] == [(h.chunk_id, h.score, h.rank) for h in fused[:n]],
            family,
            "fuse_top(rankings, settings, n) is fuse(rankings, settings)[:n]",
            f"n={n}: got {_pairs(top)}, fuse() gave {_pairs(fused[:n])}",
        )
    alone = fuser.fuse({a: list(first), b: []}, settings)
    _expect(
        [h.chunk_id for h in alone] == [h.chunk_id for h in first],
        family,
        "with one source empty, the fused ranking keeps the other's order",
        f"got {[h.chunk_id for h in alone]}, the source ranked {[h.chunk_id for h in first]}",
    )
    none = fuser.fuse({a: [], b: []}, settings)
    _expect(none == [], family, "empty rankings fuse to no hits", f"got {none!r}")


# ---------------------------------------------------------------------- tokenizers
SAMPLE = ["The pod is Pending", "kube-proxy routes traffic; CPU at 95%", "", "Ünïcode café naïve", "pod pod"]


def check_tokenizer(tokenizer: Tokenizer, different: Tokenizer | None = None) -> None:
    """`different`, if given, is the same tokenizer with other settings that change its
    tokens: its `identity` must differ (a changed tokenizer rebuilds the index)."""
    family = "tokenizers"
    got = tokenizer.tokenize(SAMPLE)
    _expect(
        isinstance(got, list) and len(got) == len(SAMPLE),
        family,
        "tokenize(texts) returns one token list per text",
        f"{len(SAMPLE)} texts gave {got!r}",
    )
    _expect(
        all(isinstance(t, list) and all(isinstance(x, str) and x for x in t) for t in got),
        family,
        "each text's tokens are a list of non-empty strings",
        f"got {got!r}",
    )
    _expect(got[2] == [], family, "an empty text has no tokens", f"got {got[2]!r}")
    _expect(any(got), family, "plain words give tokens", f"{SAMPLE} gave {got!r}")
    _expect(tokenizer.tokenize(SAMPLE) == got, family, "tokenize() is deterministic: the same texts, the same tokens")
    alone = [tokenizer.tokenize([t])[0] for t in SAMPLE]
    _expect(alone == got, family, "a text's tokens do not depend on the other texts in the batch", f"{alone} vs {got}")
    _expect(tokenizer.run(list(SAMPLE)) == got, family, "run(texts) is tokenize(texts)")
    for text, tokens in zip(SAMPLE, got, strict=True):
        twice = Counter(tokenizer.tokenize([f"{text} {text}"])[0])
        _expect(
            twice == Counter({t: 2 * c for t, c in Counter(tokens).items()}),
            family,
            "repeats are kept: a text said twice gives each token twice (BM25 counts them)",
            f"{text!r} gave {tokens}; said twice it gave {dict(twice)}",
        )
    identity = tokenizer.identity
    _expect(isinstance(identity, dict), family, "`identity` is a dict", f"got {identity!r}")
    try:
        json.dumps(identity, sort_keys=True)
    except (TypeError, ValueError) as err:
        _expect(False, family, "`identity` is JSON (it goes into the index's build settings)", f"{err}")
    fresh = type(tokenizer)(tokenizer.config)
    _expect(
        fresh.identity == identity and fresh.tokenize(SAMPLE) == got,
        family,
        "a new instance with the same config has the same identity and tokens",
        f"identity {identity} vs {fresh.identity}",
    )
    if different is not None:
        _expect(
            different.identity != identity,
            family,
            "`identity` changes with settings that change the tokens",
            f"both {identity}",
        )


# ---------------------------------------------------------------------- stores
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


def check_store(make_store: Callable[[], Store]) -> None:
    """`make_store()` returns a new store, open and empty."""
    from plm_index.filters import compile_filters

    family = "stores"
    store = make_store()
    _expect(isinstance(store, Store), family, "make_store() returns a plm.Store")
    _expect(store.chunk_ids() == [] and store.chunks() == [], family, "a new store holds no chunks")
    _expect(store.doc_fingerprints() == {} and store.vector_count() == 0, family, "a new store holds nothing")
    feed = store.feed_position()
    _expect(feed in (None, 0), family, "feed_position() of a new store is 0 (or None: no change feed)", f"{feed}")
    v0 = store.version()
    docs, chunks = _docs()
    matrix = embed([c.index_text for c in chunks])
    store.replace_documents(docs, chunks, matrix, MODEL, [f"f{i}" for i in range(len(docs))])
    v1 = store.version()
    _expect(v1 != v0 and v1.counter > v0.counter, family, "a write moves version() forward", f"{v0} -> {v1}")
    ids = [c.id for c in chunks]
    _expect(store.chunk_ids() == ids, family, "chunk_ids() lists chunks in index order", f"{store.chunk_ids()}")
    _expect(store.chunks() == chunks, family, "chunks() gives back every field of every chunk, in index order")
    _expect(store.chunk_count() == len(ids), family, "chunk_count() is len(chunk_ids())")
    _expect(store.index_texts() == (ids, [c.index_text for c in chunks]), family, "index_texts() is (ids, index_text)")
    got = store.get_chunks(["c3", "nope", "c0"])
    _expect(got == {"c3": chunks[3], "c0": chunks[0]}, family, "get_chunks(ids) gives the stored ones, absent left out")
    _expect(store.chunk_metadata() == [dict(c.metadata) for c in chunks], family, "chunk_metadata() in index order")
    fps = {d.id: f"f{i}" for i, d in enumerate(docs)}
    _expect(store.doc_fingerprints() == fps, family, "doc_fingerprints() maps each document to its fingerprint")
    _expect(store.doc_fingerprints(["d1", "zz"]) == {"d1": "f1"}, family, "doc_fingerprints(ids) only those stored")
    paths = store.doc_paths()
    _expect(paths == {d.id: d.path for d in docs}, family, "doc_paths() maps each document to its path", f"{paths}")
    some = store.paths_of(["d2", "nope", "d0"])
    _expect(some == {"d2": docs[2].path, "d0": docs[0].path}, family, "paths_of(ids) gives the stored ones", f"{some}")
    if type(store).get_document is not Store.get_document:
        _expect(store.get_document("d2") == docs[2], family, "get_document(id) gives back the whole document")
        _expect(store.get_document("nope") is None, family, "get_document() of an unknown id is None")
    vids, got_matrix, model = store.vectors()
    _expect(vids == ids and model == MODEL, family, "vectors() gives (ids in index order, matrix, model)")
    _expect(
        got_matrix is not None and np.asarray(got_matrix).dtype == np.float32 and np.allclose(got_matrix, matrix),
        family,
        "vectors() gives back the float32 rows written",
    )
    _expect(store.vector_count() == len(ids), family, "vector_count() counts the stored vectors")
    _expect(store.chunks_needing_vectors(MODEL) == [], family, "no chunk needs a vector when all have one")
    other = {c.id for c in store.chunks_needing_vectors("another-model")}
    _expect(other == set(ids), family, "chunks_needing_vectors(model) lists those with another model's vector")
    _expect(store.consistency_problems() == [], family, "a consistent store has no consistency_problems()")
    _check_filters(family, store, compile_filters)
    position = store.feed_position()
    before = _feed_state(store) if position is not None else None

    # An edit: d0's chunks replaced (no vectors yet), d0 keeps its place; then vectors.
    new = [Chunk(id="c0-new", doc_id="d0", text="pod memory pending", metadata={"team": "a"})]
    store.replace_documents([docs[0]], new, None, None, ["f0b"])
    ids = ["c0-new", *ids[2:]]
    _expect(
        store.chunk_ids() == ids, family, "a replaced document keeps its place in index order", f"{store.chunk_ids()}"
    )
    needing = [c.id for c in store.chunks_needing_vectors(MODEL)]
    _expect(needing == ["c0-new"], family, "chunks_needing_vectors(model) lists chunks without one", f"{needing}")
    skipped = store.write_vectors(["c0-new"], embed(["x"]), MODEL, texts=["another text"])
    _expect(skipped == 0, family, "write_vectors(..., texts) skips rows whose chunk holds another text")
    written = store.write_vectors(["c0-new"], embed(["pod memory pending"]), MODEL)
    _expect(written == 1 and store.chunks_needing_vectors(MODEL) == [], family, "write_vectors() stores vectors")
    removed = store.delete_documents(["d1", "zz", "d1"])
    _expect(removed == ["d1"], family, "delete_documents(ids) returns the ids that were there", f"got {removed}")
    ids = [i for i in ids if i not in ("c2", "c3")]
    _expect(store.chunk_ids() == ids, family, "a deleted document's chunks are gone", f"{store.chunk_ids()}")
    _expect(store.vectors()[0] == ids, family, "a deleted document's vectors are gone")
    _expect(store.doc_fingerprints() == {"d0": "f0b", "d2": "f2", "d3": "f3"}, family, "fingerprints follow writes")
    _check_filters(family, store, compile_filters)
    if position is not None:
        _check_feed(family, store, position, before)
    with store.snapshot():
        _expect(store.chunk_ids() == ids, family, "reads inside snapshot() see the committed state")
    store.set_meta("plm-testing", "1")
    _expect(store.get_meta("plm-testing") == "1", family, "get_meta() reads what set_meta() wrote")
    _expect(store.get_meta("plm-testing-unset") is None, family, "get_meta() of an unset key is None")
    stats = store.stats()
    for key in ("documents", "chunks", "vectors", "model", "dimension", "corpus_version", "bytes"):
        _expect(key in stats, family, f"stats() has {key!r}", f"got {sorted(stats)}")
    _expect(stats["documents"] == 3 and stats["chunks"] == len(ids), family, "stats() counts documents and chunks")
    _expect(store.consistency_problems() == [], family, "a consistent store has no consistency_problems()")
    if position is not None:
        _check_mixed_models(family, store)


def _check_mixed_models(family: str, store: Store) -> None:
    """A refresh reads only the rows past its position, so those rows carry the model check."""
    position = store.feed_position()
    for doc, model in (("d8", "another-model"), ("d9", MODEL)):  # the store's model ends as MODEL
        chunk = Chunk(id=f"c-{doc}", doc_id=doc, text="pod restarts")
        store.replace_documents([Document(id=doc, text=chunk.text)], [chunk], embed([chunk.text]), model, [doc])
    kinds = {p.kind for p in store.consistency_problems()}
    _expect(StoreProblem.MIXED_MODELS in kinds, family, "consistency_problems() names vectors of two models")
    try:
        store.vectors_since(position)
    except StoreError:
        return
    _expect(False, family, "vectors_since(p) refuses rows whose vector comes from another model than the store's")


def _check_filters(family: str, store: Store, compile_filters: Callable[[Any], Any]) -> None:
    metadata = store.chunk_metadata()
    for spec in FILTERS:
        mask = np.asarray(store.filter_mask(spec))
        want = [bool(compile_filters(spec)(m)) for m in metadata]
        _expect(
            mask.dtype == bool and mask.tolist() == want,
            family,
            "filter_mask(spec) is a boolean mask over rows in index order, as plm.compile_filters(spec) decides",
            f"filter {spec}: got {mask.tolist()}, want {want}",
        )


def _feed_state(store: Store) -> dict[int, tuple[str, int, str]]:
    seqs, ids, keys, texts = store.rows_since(0)
    return {s: (i, k, t) for s, i, k, t in zip(seqs, ids, keys, texts, strict=True)}


def _check_feed(family: str, store: Store, position: int, before: Mapping[int, Any] | None) -> None:
    now = store.feed_position()
    _expect(now is not None and now > position, family, "writes move feed_position() forward", f"{position} -> {now}")
    state = _feed_state(store)
    by_key = [i for i, _, _ in sorted(state.values(), key=lambda r: r[1])]
    _expect(by_key == store.chunk_ids(), family, "rows_since(0)'s order keys sort into index order", f"{by_key}")
    texts = dict(zip(*store.index_texts(), strict=True))
    _expect(all(texts[i] == t for i, _, t in state.values()), family, "rows_since() gives each chunk's index_text")
    removed = store.removed_since(position)
    if removed is not None and before is not None:
        replica = {s: r for s, r in before.items() if s not in set(removed)}
        seqs, ids, keys, txts = store.rows_since(position)
        replica.update({s: (i, k, t) for s, i, k, t in zip(seqs, ids, keys, txts, strict=True)})
        _expect(
            {s: (r[0], r[2]) for s, r in replica.items()} == {s: (r[0], r[2]) for s, r in state.items()},
            family,
            "a replica of an earlier state, less removed_since(p), plus rows_since(p), is the state now",
            f"replica {sorted(replica.items())}\n  now {sorted(state.items())}",
        )
        _expect(
            replica == state,
            family,
            "a chunk's order key never changes while its seq lives (a segment keeps the key it was built with)",
            f"earlier {sorted(before.items())}\n  now {sorted(state.items())}",
        )
    vseqs, matrix, model = store.vectors_since(0)
    ids_by_seq = {s: r[0] for s, r in state.items()}
    _, stored, _ = store.vectors()
    rows = {i: n for n, i in enumerate(store.chunk_ids())}
    _expect(
        model == MODEL
        and sorted(vseqs) == sorted(state)
        and all(np.allclose(matrix[n], stored[rows[ids_by_seq[s]]]) for n, s in enumerate(vseqs)),
        family,
        "vectors_since(0) gives every stored vector with its chunk's seq",
    )


# A small Markdown corpus for query generators: titles, headings at several levels, prose
# with sentences long enough to be queries, links between the pages (site paths and
# relative ones), a heading two pages share, front matter and a code block.
MARKDOWN_DOCS = (
    Document(
        id="concepts_pods",
        title="Pods",
        text="---\ntitle: Pods\n---\n# Pods\n\nA pod is the smallest deployable unit of computing that you can "
        "create and manage in the cluster. Pods hold one or more containers that share storage and network "
        "resources. Each pod is scheduled onto a node by the scheduler, which weighs resource requests.\n\n"
        "## Pod lifecycle and restart policy\n\nA pod moves through pending, running and succeeded phases "
        "while its containers start and stop. You can read about [how services expose pods](/docs/concepts/"
        "services/) to clients outside the cluster when they need a stable address.\n\n## Overview\n\n"
        "```\nkubectl get pods --all-namespaces\n```\n",
    ),
    Document(
        id="concepts_services",
        title="Services and stable network addresses",
        text="# Services and stable network addresses\n\nA service gives a set of pods one stable virtual "
        "address and a DNS name, and balances connections across them. Clients talk to the service, not to "
        "pods, which come and go as deployments roll out new versions. Selectors decide which pods a "
        "service sends traffic to.\n\n## Overview\n\nEvery workload in the [pod documentation](../pods/) "
        "can be reached through a service once labels match its selector in the namespace.\n",
    ),
    Document(
        id="concepts_storage",
        title="Volumes keep data across container restarts",
        text="# Volumes keep data across container restarts\n\nOn-disk files in a container are lost when "
        "the container crashes or is stopped by the kubelet. A volume outlives the containers of a pod, and "
        "persistent volumes outlive the pod itself. Storage classes describe the kinds of storage a cluster "
        "offers to claims made by workloads.\n\n### Mounting a volume read only\n\nMount a volume read "
        "only when the containers in the [pod](/docs/concepts/pods/) should never change its files.\n",
    ),
)


def check_query_generator(generator: QueryGenerator, documents: Sequence[Document] | None = None) -> None:
    """The query generator contract: queries judged relevant to documents of the corpus, the
    same every time, every copied span (`SyntheticQuery.remove`) found verbatim in the
    document it names as its source, and no query found verbatim anywhere once the spans
    and copies are cut (`plm_core.synthetic.rewrite`, what `plm eval --synthetic` indexes)."""
    from plm_core.synthetic import leaks, rewrite

    family = "query_generators"
    docs = list(documents if documents is not None else MARKDOWN_DOCS)
    first = generator.generate(docs)
    _expect(isinstance(first, list), family, "generate returns a list", repr(type(first)))
    _expect(first, family, "a generator makes at least one query from its test corpus")
    _expect(all(isinstance(q, SyntheticQuery) for q in first), family, "generate returns SyntheticQuery records")
    _expect(first == generator.generate(docs), family, "the same documents give the same queries")
    by_id = {d.id: d for d in docs}
    for q in first:
        _expect(q.doc_id in by_id, family, "a query is judged relevant to a document of the corpus", q.doc_id)
        _expect(any(c.isalnum() for c in q.text), family, "a query has words", repr(q))
        source = by_id.get(q.source_doc or q.doc_id)
        _expect(source is not None, family, "source_doc names a document of the corpus", q.source_doc)
        for span in q.remove:
            assert source is not None
            _expect(
                span in source.text or span in source.title,
                family,
                "each span in `remove` is verbatim in its source document, so cutting it removes the copy",
                f"{span!r} not in {source.id!r}",
            )
    queries = [(f"q{i}", q) for i, q in enumerate(first)]
    rewritten, _ = rewrite(docs, first)
    bad = leaks(queries, rewritten)
    _expect(not bad, family, "no query is found verbatim in the corpus it is evaluated on", str(bad[:3]))


def check_chunker(chunker: Chunker, documents: Sequence[Document] | None = None) -> None:
    """The chunker contract on `documents` (default `MARKDOWN_DOCS`, Markdown with headings)."""
    family = "chunkers"
    docs = list(documents if documents is not None else MARKDOWN_DOCS)
    chunker.ensure_warm()  # as the pipeline does before `run`: setup may live in warm_up
    _expect(chunker.run([]) == [], family, "no documents give no chunks")
    first = chunker.run(docs)
    _expect(isinstance(first, list), family, "run returns a list", repr(type(first)))
    _expect(first, family, "the test documents give at least one chunk")
    bad = next((c for c in first if not isinstance(c, Chunk)), None)
    _expect(bad is None, family, "run returns plm.Chunk records", repr(type(bad)))
    order = {d.id: i for i, d in enumerate(docs)}
    ids = [c.id for c in first]
    _expect(len(set(ids)) == len(ids), family, "chunk ids are unique", str([i for i in ids if ids.count(i) > 1][:3]))
    for c in first:
        _expect(c.doc_id in order, family, "each chunk's doc_id names one of the documents given", repr(c.doc_id))
        _expect(c.text.strip(), family, "a chunk has text", repr(c.id))
    seen = [order[c.doc_id] for c in first]
    _expect(seen == sorted(seen), family, "a document's chunks come together, documents in the order given")
    for doc in docs:
        starts = [c.start_char for c in first if c.doc_id == doc.id]
        _expect(starts == sorted(starts), family, "a document's chunks come in reading order (start_char)", doc.id)
    _expect(first == chunker.run(docs), family, "the same documents give the same chunks")
    alone = [c for d in docs for c in chunker.run([d])]
    _expect(
        alone == first,
        family,
        "a document's chunks do not depend on the other documents of the batch (a sync retries one by one)",
    )


def check_ranking_stage(stage: RankingStage, ranking: Ranking | None = None) -> None:
    """The contract of a stage after retrieval (`plm.Reranker`, `plm.RankingStage`) on
    `ranking` (default: CHUNKS' first six as hits of one query, best first)."""
    family = "rerankers" if stage.family == "rerankers" else "rankers"
    if ranking is None:
        hits = tuple(
            Hit(c.id, c.doc_id, 1.0 - i / 10, i + 1, c.text, metadata={**c.metadata, "title": c.doc_id})
            for i, c in enumerate(CHUNKS[:6])
        )
        ranking = Ranking(query=query("pod memory"), hits=hits, fusion=FusionConfig(candidates=len(hits)))
    stage.ensure_warm()  # as the pipeline does before `run`
    for k in (1, 5, 50):
        _expect(stage.depth(k) >= k, family, "depth(k) is at least k", f"depth({k}) = {stage.depth(k)}")
    out = stage.run(ranking)
    _expect(isinstance(out, Ranking), family, "run returns a plm.Ranking", repr(type(out)))
    _expect(out.query == ranking.query, family, "the ranking keeps its query")
    given = {h.chunk_id for h in ranking.hits}
    ids = [h.chunk_id for h in out.hits]
    _expect(set(ids) <= given, family, "only hits it was given", str(sorted(set(ids) - given)[:3]))
    _expect(len(set(ids)) == len(ids), family, "each hit once")
    _expect([h.rank for h in out.hits] == list(range(1, len(ids) + 1)), family, "ranks count from 1, in order")
    _expect(out == stage.run(ranking), family, "the same ranking gives the same answer")
    empty = stage.run(Ranking(query=ranking.query, hits=(), fusion=ranking.fusion))
    _expect(isinstance(empty, Ranking) and not empty.hits, family, "an empty ranking stays empty")
