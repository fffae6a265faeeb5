"""`top_k = "maxscore"` (plm_plugins/retrievers/bm25_topk.py) returns exactly the exhaustive
path's hits: the same chunks, the very same scores (==) and the same order among equal scores,
over several segments, with deleted chunks, with a filter, for every method it prunes (and
falls back to exhaustive for the others). The exhaustive path is itself checked against a
whole build and a word-by-word reference in test_bm25_segments_exact.py."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from plm_needs import needs

from plm_core.records import Chunk, Document, ExpandedQuery
from plm_index import ranking, segments
from plm_index.corpus import CorpusSnapshot

pytestmark = needs("bm25s", extra="bm25")
from plm_plugins.retrievers import bm25_topk  # noqa: E402
from plm_plugins.retrievers.bm25s import BM25Retriever  # noqa: E402

VOCAB = [f"w{i}" for i in range(400)]
WEIGHTS = [1 / (i + 1) for i in range(len(VOCAB))]  # Zipf: a few words in most chunks, many rare ones
CONFIGS = {
    "lucene": {"method": "lucene"},
    "lucene32": {"method": "lucene", "dtype": "float32", "drop_zero_scores": False},
    "okapi": {"method": "rank_bm25_okapi"},
    "robertson": {"method": "robertson"},
    "atire": {"method": "atire", "k1": 1.2, "b": 0.5},
    "lucene_h": {"method": "lucene", "heading_weight": 1.5},
    "bm25l": {"method": "bm25l"},  # not bounded: scored exhaustively either way
}


def _pair(label: str, **extra: Any) -> tuple[BM25Retriever, BM25Retriever]:
    settings = {"tokenizer": "whitespace_lower", **CONFIGS[label], **extra}
    return (
        BM25Retriever(label=label, top_k="exhaustive", **settings),
        BM25Retriever(label=label, top_k="maxscore", **settings),
    )


def _text(rng: random.Random) -> str:
    body = " ".join(rng.choices(VOCAB, WEIGHTS, k=rng.randint(0, 30)))
    if rng.random() < 0.3:
        body = "# " + " ".join(rng.choices(VOCAB, WEIGHTS, k=rng.randint(1, 4))) + "\n\n" + body
    return body


def _queries(rng: random.Random, count: int) -> list[str]:
    out = []
    for _ in range(count):  # common words with a rarer one or two: what MaxScore prunes
        words = rng.choices(VOCAB[:8], k=rng.randint(1, 3)) + rng.choices(VOCAB, WEIGHTS, k=rng.randint(0, 3))
        rng.shuffle(words)
        out.append(" ".join(words))
    return out + ["w0", "w0 w0 w1", "w1 w399", "w399 nowhere", "nowhere", ""]


def _same(exhaustive: BM25Retriever, pruned: BM25Retriever, queries: list[str], allowed: Any = None) -> int:
    """Asserts the hits agree for every query and k; returns how many answers were compared."""
    checked = 0
    for text in queries:
        for n in (1, 3, 10, 40):
            want = exhaustive.search(ExpandedQuery(text=text, k=n), n, allowed)
            got = pruned.search(ExpandedQuery(text=text, k=n), n, allowed)
            assert got == want, (pruned.label, text, n, allowed is not None)
            checked += 1
    return checked


def _pruned_rows(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(candidates scored, rows holding a query word) of each pruned query, recorded."""
    seen: list[tuple[int, int]] = []
    real = bm25_topk.candidates

    def recording(state: Any, tokens: Any, n: int, **kwargs: Any) -> Any:
        out = real(state, tokens, n, **kwargs)
        if out is not None:
            seen.append((len(out[0]), _matching_rows(state, tokens)))
        return out

    monkeypatch.setattr("plm_plugins.retrievers.bm25s.candidates", recording)
    return seen


def _matching_rows(state: Any, tokens: Any) -> int:
    """How many live rows hold a query word."""
    rows = set()
    for word in set(tokens):
        for i, seg in enumerate(state.segments):
            if (stats := bm25_topk._stats_of(seg.data, word)) is not None:
                local = np.asarray(seg.data.rows[stats[0] : stats[1]])
                dead = state.dead(i)
                if dead is not None:
                    local = local[~dead[local]]
                rows.update((local + int(state.offsets[i])).tolist())
    return len(rows)


def _sync(store: Any, rng: random.Random, live: set[str], counter: list[int]) -> None:
    if live and rng.random() < 0.4:
        gone = rng.sample(sorted(live), min(len(live), rng.randint(1, 6)))
        store.delete_documents(gone)
        live.difference_update(gone)
    ids = [f"d{counter[0] + i}" for i in range(rng.randint(10, 40))]
    counter[0] += len(ids)
    if live and rng.random() < 0.5:
        ids += rng.sample(sorted(live), min(len(live), rng.randint(1, 5)))  # edited: new chunks
    docs, chunks = [], []
    for doc_id in ids:
        texts = [_text(rng) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            texts += [texts[0]] * rng.randint(1, 3)  # duplicates: equal scores, ordered by index order
        chunks += [
            Chunk(id=f"{doc_id}#{counter[0]}.{j}", doc_id=doc_id, text=t, metadata={"even": j % 2 == 0})
            for j, t in enumerate(texts)
        ]
        docs.append(Document(id=doc_id, text=" ".join(texts)))
    store.replace_documents(docs, chunks, None, None, ["x"] * len(docs))
    live.update(ids)


@pytest.mark.parametrize("full_sort_up_to", [ranking.FULL_SORT_UP_TO, 0], ids=["small", "large-tie-order"])
def test_maxscore_ranks_as_exhaustive_over_segments_deletions_and_filters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, full_sort_up_to: int
) -> None:
    """`large-tie-order`: ranked among the candidates as past 50k rows (a million-chunk index),
    where equal scores are ordered by the rows' order keys rather than by a full argsort
    (below it, ties make the ranking fall back to exhaustive, which this also covers)."""
    from plm_plugins.stores.sqlite import SQLiteStore

    monkeypatch.setattr(ranking, "FULL_SORT_UP_TO", full_sort_up_to)
    monkeypatch.setattr(segments.merge, "MERGE_FACTOR", 3)
    monkeypatch.setattr(segments.merge, "FLOOR_ROWS", 4)
    seen = _pruned_rows(monkeypatch)
    store = SQLiteStore(SQLiteStore.Config())
    store.open(tmp_path / "store")
    rng, live, counter = random.Random(7), set(), [0]
    index_dir = tmp_path / "index"
    pairs = {label: _pair(label) for label in CONFIGS}
    queries = _queries(random.Random(13), 30)
    checked = deleted = 0
    for step in range(12):
        _sync(store, rng, live, counter)
        with store.snapshot():
            snap = CorpusSnapshot(store, index_dir, None)
            for exhaustive, pruned in pairs.values():
                exhaustive.refresh(snap, index_dir)
                pruned.load(snap, index_dir)
        if step % 4 != 3:
            continue
        segments.wait_for_merges()
        with store.snapshot():
            even = store.filter_mask({"even": True})
            for exhaustive, pruned in pairs.values():
                checked += _same(exhaustive, pruned, queries)
                checked += _same(exhaustive, pruned, queries, even)
                assert exhaustive.state is not None
                deleted += sum(len(d) for d in exhaustive.state.deleted)
    lucene = pairs["lucene"][0].state
    assert lucene is not None and len(lucene.segments) > 1 and deleted
    assert checked == 3 * len(CONFIGS) * 2 * len(queries) * 4
    # MaxScore pruned: most answers scored fewer rows than hold a query word
    assert sum(c < m for c, m in seen) > len(seen) // 2, seen[:20]


def test_ties_cut_by_k_keep_the_exhaustive_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many chunks with the very same text (the same score): k cuts through them, and the
    pruned path keeps exactly the exhaustive path's members and order of the tied group."""
    monkeypatch.setattr(ranking, "FULL_SORT_UP_TO", 0)
    rng = random.Random(3)
    texts = [_text(rng) for _ in range(300)]
    texts += ["w0 w1 w2 w250"] * 25 + ["w0 w250"] * 12 + ["w250 w0 w0 w7"] * 7  # three tied groups
    rng.shuffle(texts)
    chunks = [Chunk(id=f"c{i}", doc_id=f"d{i // 3}", text=t) for i, t in enumerate(texts)]
    for label in ("lucene", "lucene32", "okapi"):
        exhaustive, pruned = _pair(label)
        exhaustive.build(CorpusSnapshot.of(chunks), tmp_path / label)
        pruned.load(CorpusSnapshot.of(chunks), tmp_path / label)
        queries = ["w0 w250", "w250", "w0 w1 w250", "w250 w0 w0", "w2 w250 w7"]
        _same(exhaustive, pruned, queries)
        for n in (5, 24, 26, 40):
            hits = pruned.search(ExpandedQuery(text="w250 w0", k=n), n)
            assert len({h.score for h in hits}) < len(hits)  # ties among the hits, really


def test_a_bound_below_a_part_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison can fail: bounds cut to a third leave hits out, and the checks see it."""
    monkeypatch.setattr(ranking, "FULL_SORT_UP_TO", 0)
    rng = random.Random(5)
    chunks = [Chunk(id=f"c{i}", doc_id=f"d{i}", text=_text(rng)) for i in range(800)]
    exhaustive, pruned = _pair("lucene")
    exhaustive.build(CorpusSnapshot.of(chunks), tmp_path)
    pruned.load(CorpusSnapshot.of(chunks), tmp_path)
    queries = _queries(random.Random(1), 40)
    _same(exhaustive, pruned, queries)
    monkeypatch.setattr(bm25_topk, "SLACK", 1 / 3)
    pruned.load(CorpusSnapshot.of(chunks), tmp_path)
    with pytest.raises(AssertionError):
        _same(exhaustive, pruned, queries)


def test_auto_prunes_only_queries_with_many_postings_beside_few(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`auto` takes MaxScore for a word in AUTO_FROM chunks or more beside one in a quarter as
    many or fewer; words of similar lengths, or one word alone, are scored exhaustively. (The
    NumPy path's rule: with the C kernel built, `auto` leaves the choice to it, below.)"""
    monkeypatch.setattr("plm_plugins.retrievers.bm25s.compiled", lambda: None)
    seen = _pruned_rows(monkeypatch)
    rng = random.Random(9)
    chunks = [Chunk(id=f"c{i}", doc_id=f"d{i}", text=_text(rng)) for i in range(500)]
    holding = {w: sum(w in c.text.split() for c in chunks) for w in VOCAB}
    common = max(VOCAB, key=holding.__getitem__)
    rare = next(w for w in reversed(VOCAB) if 0 < holding[w] * 4 <= holding[common])
    alike = next(w for w in VOCAB if w != common and holding[w] * 4 > holding[common])
    exhaustive = BM25Retriever(tokenizer="whitespace_lower", top_k="exhaustive")
    auto = BM25Retriever(tokenizer="whitespace_lower")  # auto: the default
    exhaustive.build(CorpusSnapshot.of(chunks), tmp_path)
    auto.load(CorpusSnapshot.of(chunks), tmp_path)
    _same(exhaustive, auto, [f"{common} {rare}"])
    assert not seen  # no list reaches AUTO_FROM
    monkeypatch.setattr("plm_plugins.retrievers.bm25_topk.AUTO_FROM", holding[common])
    monkeypatch.setattr("plm_plugins.retrievers.bm25s.AUTO_FROM", 100)
    _same(exhaustive, auto, [f"{common} {alike}", common])
    assert not seen  # similar lengths, one word: nothing to skip
    _same(exhaustive, auto, [f"{common} {rare}", f"{rare} {alike} {common}"])
    assert len(seen) == 8  # two queries, four k each


@pytest.mark.parametrize("label", ["lucene", "lucene32", "okapi", "robertson", "atire", "lucene_h"])
def test_the_c_kernels_block_max_skips_blocks_and_ranks_as_exhaustive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, label: str
) -> None:
    """With `auto`, a query of BLOCKS_FROM postings or more goes to the C kernel's block-max
    (`_bm25_kernel.c`): blocks of rows whose bound (each word's part at its largest tf and
    shortest length there) cannot reach the n-th best are skipped; hits, scores and the order
    of equal scores are the exhaustive path's, with and without a filter. A kernel that never
    took block-max would pass the comparison: how many queries it answered is counted too."""
    from plm_plugins.retrievers import bm25_impacts, bm25s

    kernel = bm25_impacts.compiled()
    if kernel is None:  # (.ci/run checks that it is built)
        pytest.skip("BM25's C kernel is not built here (setup.py: no C compiler or Python headers)")
    by_blocks: list[bool] = []

    def counting(*args: Any) -> Any:
        out = kernel(*args)
        by_blocks.append(out[1])
        return out

    monkeypatch.setattr(bm25s, "compiled", lambda: counting)
    monkeypatch.setattr(bm25_impacts, "BLOCKS_FROM", 20_000)  # a query with w0 (in every chunk)
    monkeypatch.setattr(bm25_impacts, "BLOCK_ROWS", 16)
    rng = random.Random(13)
    filler, rare, medium = [f"f{i}" for i in range(50)], [f"r{i}" for i in range(30)], [f"m{i}" for i in range(10)]
    texts = []
    for i in range(20_000):  # w0 in every chunk, w1 in most; an r-word in a few long chunks,
        words = ["w0"] * rng.randint(1, 2) + ["w1"] * (rng.random() < 0.8)  # an m-word in short ones
        if rng.random() < 0.1:
            words += rng.sample(rare, rng.randint(1, 3)) + rng.choices(filler, k=rng.randint(15, 40))
        elif rng.random() < 0.15:
            words += [rng.choice(medium)] * rng.randint(1, 3)
        else:
            words += rng.choices(filler, k=rng.randint(0, 12))
        if i % 500 == 0:
            words = ["w0", "w1", "r7", "m3"]  # equal texts: equal scores, cut by k
        rng.shuffle(words)
        texts.append(("# " + " ".join(words[:2]) + "\n\n" if i % 7 == 0 else "") + " ".join(words))
    chunks = [Chunk(id=f"c{i}", doc_id=f"d{i}", text=t) for i, t in enumerate(texts)]
    settings = {"tokenizer": "whitespace_lower", **CONFIGS[label]}
    exhaustive = BM25Retriever(label=label, top_k="exhaustive", **settings)
    auto = BM25Retriever(label=label, **settings)
    exhaustive.build(CorpusSnapshot.of(chunks), tmp_path)
    auto.load(CorpusSnapshot.of(chunks), tmp_path)
    queries = [f"w0 {m} {r}" for m, r in zip(medium, rare, strict=False)] + [f"{r} w1 w0 {r}" for r in rare[10:20]]
    queries += [f"w0 {m} {' '.join(rng.sample(rare, 3))} w1" for m in medium]  # rows of 2-3 r-words beat an m-row
    queries += ["r7 m3 w0 w1", "w0 w1", "r7 m3"]
    allowed = np.array([i % 3 != 0 for i in range(len(chunks))])
    _same(exhaustive, auto, queries)
    _same(exhaustive, auto, queries, allowed)
    assert sum(by_blocks) >= (len(queries) - 1) * 4  # every query with w0, at each k ...
    assert not all(by_blocks)  # ... and "r7 m3" (few postings) scored whole


def _dataset_pair(chunks: list[Chunk], folder: Path, **settings: Any) -> tuple[BM25Retriever, BM25Retriever]:
    exhaustive = BM25Retriever(top_k="exhaustive", **settings)
    pruned = BM25Retriever(top_k="maxscore", **settings)
    exhaustive.build(CorpusSnapshot.of(chunks), folder)
    pruned.load(CorpusSnapshot.of(chunks), folder)
    return exhaustive, pruned


def _same_top(exhaustive: BM25Retriever, pruned: BM25Retriever, queries: list[str]) -> None:
    for text in queries:
        for n in (10, 100):
            want = exhaustive.search(ExpandedQuery(text=text, k=n), n)
            assert pruned.search(ExpandedQuery(text=text, k=n), n) == want, (text, n)


@pytest.mark.dataset
def test_maxscore_equals_exhaustive_on_scifact(datasets_dir: Path, tmp_path: Path) -> None:
    root = datasets_dir / "scifact"
    if not (root / "corpus.jsonl").is_file():
        pytest.skip(f"SciFact not found at {root}")
    chunks = []
    for line in (root / "corpus.jsonl").open():
        rec = json.loads(line)
        chunks.append(Chunk(id=rec["_id"], doc_id=rec["_id"], text=f"{rec.get('title') or ''} {rec['text']}".strip()))
    queries = [json.loads(line)["text"] for line in (root / "queries.jsonl").open()]
    for settings in ({"dtype": "float32"}, {"dtype": "float64"}):
        _same_top(*_dataset_pair(chunks, tmp_path / settings["dtype"], **settings), queries)


@pytest.mark.dataset
def test_maxscore_equals_exhaustive_on_poc_needle(poc_needle: Path, tmp_path: Path) -> None:
    chunks = []
    for line in (poc_needle / "corpus.jsonl").open():
        rec = json.loads(line)
        chunks.append(Chunk(id=rec["_id"], doc_id=rec["_id"], text=f"{rec.get('title') or ''}\n\n{rec['text']}"))
    queries = [
        json.loads(line)["text"] for path in sorted((poc_needle / "queries").glob("*.jsonl")) for line in path.open()
    ]
    assert len(queries) == 120
    _same_top(*_dataset_pair(chunks, tmp_path / "stem"), queries)
    okapi = {"tokenizer": "whitespace_lower", "method": "rank_bm25_okapi"}  # the POC's scoring
    _same_top(*_dataset_pair(chunks, tmp_path / "okapi", **okapi), queries)


def test_union_of_ascending_rows() -> None:
    """`_union`: the distinct rows of several ascending arrays, ascending."""
    parts = [np.array([1, 4, 9]), np.array([0, 4, 10]), np.array([], dtype=np.int64)]
    assert bm25_topk._union(parts).tolist() == [0, 1, 4, 9, 10]


def test_queries_at_once_rank_as_one_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads share a segment's word bounds (evicted often here) and the version's kept impacts."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(bm25_topk, "MAX_WORDS", 8)
    rng = random.Random(4)
    chunks = [Chunk(id=f"c{i}", doc_id=f"d{i}", text=_text(rng)) for i in range(600)]
    exhaustive, pruned = _pair("lucene")
    exhaustive.build(CorpusSnapshot.of(chunks), tmp_path)
    pruned.load(CorpusSnapshot.of(chunks), tmp_path)
    queries = _queries(random.Random(8), 60) * 3
    alone = [exhaustive.search(ExpandedQuery(text=q, k=10), 10) for q in queries]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda q: pruned.search(ExpandedQuery(text=q, k=10), 10), queries))
    assert together == alone
