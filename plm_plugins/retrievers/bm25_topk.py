"""BM25's exact top k without scoring every posting: block-max MaxScore over row blocks.

Each segment's rows are cut into blocks of `2 ** SHIFT` rows. For a word and a block, the
segment's postings give the word's largest term frequency there and the shortest length of
a row holding it (`_blocks_of`, kept with the segment: it never changes). Under a version's
IDF and average length, bm25s's term-frequency part of that pair bounds the word's part in
every row of the block: the part grows with the term frequency and falls with the length
(method by method, `_TFC` of `_NORM`), and the bound is raised by `SLACK` so the rounding
of the few operations between the two can never put a row's part above it. A block's bound
for a query is its words' bounds added, a repeated word once per occurrence.

The blocks are visited best bound first, a round at a time: a round's rows are scored exactly
as the exhaustive path scores them (the same expressions per posting, each row's parts added
in query order by `_sum_by_row`: the same floats), the n-th best score among the rows scored
so far (of those `allowed`, in the answer's dtype) becomes the threshold, and a block whose
bound (in that dtype) is below it cannot hold a hit, nor a row tied with the n-th: the visit
stops there. Every row that scores at least the final n-th best is then among those scored,
so ranking them (`State.top_of`) gives exactly the hits, ties and their order included, that
ranking every matching row gives; where that ranking declines (ties at a small corpus, fewer
positive scores than asked with zeros kept), the stage falls back to the exhaustive path.

bm25l and bm25+ (a part for rows without the word) and a negative IDF (rank_bm25_okapi's
floor with a negative mean) are not bounded this way: `candidates` returns None and the stage
scores every posting. Deleted rows count in the bounds (bounds stay bounds) and are left out
when scored.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from plm_plugins.retrievers.bm25_impacts import _IDF, _NORM, _TFC, _live_tokens, _okapi_idf, _sum_by_row
from plm_plugins.retrievers.bm25_postings import Postings

if TYPE_CHECKING:
    from plm import State

SHIFT = 7  # blocks of 128 rows
SLACK = 1 + 1e-9  # relative headroom of a bound over every part it bounds (rounding: ~1e-15)
FIRST_BLOCKS = 8  # blocks scored in the first round; each later round takes up to 4x more
UNBOUNDED = ("bm25l", "bm25+")

# Per segment's postings, each word's blocks (`_blocks_of`): weakly keyed, so a segment's go
# with it; at most MAX_WORDS words per segment (the oldest dropped).
_BLOCKS: weakref.WeakKeyDictionary[Postings, dict[str, Any]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
MAX_WORDS = 1 << 16


def _blocks_of(postings: Postings, word: str) -> tuple[Any, Any, Any, Any] | None:
    """A word's blocks in one segment: the blocks (local block numbers, ascending), where
    each block's postings start and end in the segment's arrays (one more than the blocks),
    the largest term frequency and the shortest row length (float64) in each; None where the
    segment lacks the word."""
    import numpy as np

    with _LOCK:
        words = _BLOCKS.setdefault(postings, {})
    if word in words:
        return words[word]
    tid = postings.vocab.get(word)
    out = None
    if tid is not None:
        lo, hi = int(postings.indptr[tid]), int(postings.indptr[tid + 1])
        rows = np.asarray(postings.rows[lo:hi])
        if len(rows):
            block = rows >> SHIFT
            starts = np.flatnonzero(np.concatenate(([True], block[1:] != block[:-1])))
            max_tf = np.maximum.reduceat(np.asarray(postings.tf[lo:hi]), starts).astype(np.float64)
            min_len = np.minimum.reduceat(postings.float_lengths()[rows], starts)
            bounds = np.append(starts, len(rows)).astype(np.int64) + lo
            out = (block[starts].astype(np.int64), bounds, max_tf, min_len)
    with _LOCK:
        if len(words) >= MAX_WORDS:
            words.pop(next(iter(words)))
        words[word] = out
    return out


def _live_df(state: State, word: str, found: list[tuple[int, Any]]) -> int:
    """The live rows holding the word (its document frequency), kept with the version."""
    import numpy as np

    kept: dict[str, int] = state.cached("bm25_live_df", dict)
    if word in kept:
        return kept[word]
    df = 0
    for i, blocks in found:
        lo, hi = int(blocks[1][0]), int(blocks[1][-1])
        dead = state.dead(i)
        df += hi - lo if dead is None else hi - lo - int(np.count_nonzero(dead[state.segments[i].data.rows[lo:hi]]))
    kept[word] = df
    return df


def _ranges(begin: Any, end: Any) -> Any:
    """The indices begin[0]..end[0]-1, begin[1]..end[1]-1, ... in one array."""
    import numpy as np

    lengths = end - begin
    total = int(lengths.sum())
    return np.arange(total, dtype=np.int64) + np.repeat(begin - (np.cumsum(lengths) - lengths), lengths)


def candidates(
    state: State,
    tokens: Sequence[str],
    n: int,
    *,
    method: str,
    k1: float,
    b: float,
    delta: float,
    epsilon: float,
    weight: float,
    dtype: str,
    allowed_rows: Any = None,
) -> tuple[Any, Any] | None:
    """Rows (live, ascending) and their exact float64 BM25 scores, among them every row whose
    score (in `dtype`) is at least the n-th best of the rows `allowed_rows` lets through (a
    boolean mask over the state's rows; None: all); None where this method cannot bound a
    word's part (the stage then scores every posting)."""
    import numpy as np

    if method in UNBOUNDED or n <= 0:
        return None
    empty = np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.float64)
    n_docs = state.n_live
    if not n_docs:
        return empty
    avgdl = _live_tokens(state, weight) / n_docs
    idf_of = _okapi_idf(state, epsilon) if method == "rank_bm25_okapi" else _IDF[method]
    formula = "atire" if method == "rank_bm25_okapi" else method
    tfc, norm = _TFC[formula], _NORM[formula]
    words: dict[str, tuple[float, list[tuple[int, Any]]]] = {}
    for word in dict.fromkeys(tokens):
        found = [(i, bl) for i, seg in enumerate(state.segments) if (bl := _blocks_of(seg.data, word)) is not None]
        if not found or not (df := _live_df(state, word, found)):
            continue
        idf = idf_of(df, n_docs)
        if idf < 0:
            return None
        words[word] = (idf, found)
    query = [w for w in tokens if w in words]  # query order, a repeated word once per occurrence
    if not query:
        return empty
    # Every (segment, query word, block) as one entry, by segment then query order: the parts
    # of a row (in one segment) are then met in query order, as `_sum_by_row` must add them.
    base = np.cumsum([0] + [(seg.n >> SHIFT) + 1 for seg in state.segments]).tolist()
    pieces = sorted(
        ((i, at, words[w][0], blocks) for at, w in enumerate(query) for i, blocks in words[w][1]),
        key=lambda piece: (piece[0], piece[1]),
    )
    counts = [len(p[3][0]) for p in pieces]
    seg_of = np.repeat(np.array([p[0] for p in pieces], dtype=np.int64), counts)
    block = np.concatenate([p[3][0] + base[p[0]] for p in pieces])
    begin = np.concatenate([p[3][1][:-1] for p in pieces])
    end = np.concatenate([p[3][1][1:] for p in pieces])
    idf = np.repeat(np.array([p[2] for p in pieces], dtype=np.float64), counts)
    max_tf = np.concatenate([p[3][2] for p in pieces])
    min_len = np.concatenate([p[3][3] for p in pieces])
    bounds = idf * tfc(max_tf, norm(min_len, avgdl, k1, b), k1, delta) * SLACK
    bound = np.bincount(block, weights=bounds, minlength=base[-1])
    segs = sorted({p[0] for p in pieces})
    cuts = np.searchsorted(seg_of, segs + [len(state.segments)]).tolist()  # each segment's entries
    order = np.flatnonzero(bound > 0)
    order = order[np.argsort(-bound[order], kind="stable")]
    cut = bound[order].astype(dtype)  # what a score in the answer's dtype is compared with
    selected = np.zeros(base[-1], dtype=bool)
    rows_out, values_out, ranked = [], [], []
    done, size, threshold = 0, FIRST_BLOCKS, None
    while done < len(order):
        stop = min(done + size, len(order))
        if threshold is not None:
            stop = done + int(np.searchsorted(-cut[done:stop], -threshold, side="right"))  # bound >= threshold
            if stop == done:
                break
        take = order[done:stop]
        done, size = stop, size * 4
        selected[:] = False
        selected[take] = True
        at, part = [], []
        for s, i in enumerate(segs):
            lo, hi = cuts[s], cuts[s + 1]
            e = np.flatnonzero(selected[block[lo:hi]]) + lo
            if not len(e):
                continue
            data: Postings = state.segments[i].data
            lengths = end[e] - begin[e]
            index = _ranges(begin[e], end[e])
            local = np.asarray(data.rows)[index].astype(np.intp)
            tf = np.asarray(data.tf)[index]
            idfs = np.repeat(idf[e], lengths)
            dead = state.dead(i)
            if dead is not None:
                alive = ~dead[local]
                local, tf, idfs = local[alive], tf[alive], idfs[alive]
            # The exhaustive path's expressions per posting (`BM25Retriever._impacts`).
            part.append(idfs * tfc(tf.astype(np.float64), norm(data.float_lengths()[local], avgdl, k1, b), k1, delta))
            offset = int(state.offsets[i])
            at.append(local + offset if offset else local)
        if not at:
            continue
        rows, values = _sum_by_row(state, np.concatenate(at), np.concatenate(part))
        rows_out.append(rows)
        values_out.append(values)
        ranked.append(values if allowed_rows is None else values[allowed_rows[rows]])
        scores = np.concatenate(ranked).astype(dtype)
        if len(scores) >= n:
            threshold = np.partition(scores, len(scores) - n)[len(scores) - n]
            ranked = [scores[scores >= threshold]]  # only these can be the n-th from now on
    if not rows_out:
        return empty
    rows, values = np.concatenate(rows_out), np.concatenate(values_out)
    by = np.argsort(rows, kind="stable")
    return rows[by], values[by]
