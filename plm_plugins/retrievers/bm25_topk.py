"""BM25's exact top k without scoring every posting: MaxScore over the query's words.

Each segment keeps, per word, its postings' largest term frequency and the shortest length of
a row holding it (`_stats_of`, kept with the segment: it never changes). Under a version's IDF
and average length, bm25s's term-frequency part of that pair bounds the word's part in every
row (the part grows with the term frequency and falls with the length, method by method:
`_TFC` of `_NORM`), raised by `SLACK` so the rounding of the few operations between the two
can never put a row's part above it: the word's bound.

A query first scores the rows of its word of largest bound: their n-th best score (of the
rows `allowed`, in the answer's dtype) is a threshold no hit falls below. The words of smallest
bounds whose bounds (each occurrence of a repeated word) add up to less than it cannot make a
hit, nor a row tied with the n-th, on their own: the candidates are the rows of the other
words (the essential ones), and only those are scored. A candidate's score reads each query
word's part where it holds the word (found by binary search in that word's postings, the
non-essential words' long lists never scored whole) and adds them in query order, a part per
occurrence, with the exhaustive path's expressions (`BM25Retriever._impacts`, `_sum_by_row`):
the same floats. Every row scoring at least the final n-th best is a candidate, so ranking them
(`State.top_of`) gives exactly the hits, ties and their order included, of ranking every row
with a query word; where that ranking declines (ties at a small corpus, fewer positive scores
than asked with zeros kept), the stage falls back to the exhaustive path.

bm25l and bm25+ (a part for rows without the word) and a negative IDF (rank_bm25_okapi's floor
with a negative mean) are not bounded this way: `candidates` returns None and the stage scores
every posting. Deleted rows count in the bounds (a bound stays a bound) and are never
candidates.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from plm_plugins.retrievers.bm25_impacts import _NORM, _TFC, _live_tokens, formula_of, idf_of
from plm_plugins.retrievers.bm25_postings import Postings

if TYPE_CHECKING:
    from plm.indexes import State

SLACK = 1 + 1e-9  # relative headroom of a bound over every part it bounds (rounding: ~1e-15)
UNBOUNDED = ("bm25l", "bm25+")
# `top_k = "auto"` prunes when one of the query's words holds at least this many postings: with
# shorter lists the exhaustive path's few NumPy calls over kept impacts cost less than MaxScore's
# (bench/bench_bm25_topk.py; at a million, 10,000 to 20,000 was even, from 20,000 MaxScore won).
AUTO_FROM = 20_000
SKEW = 4  # see worth_pruning

# Each segment's postings keep each word's (start, end, largest tf, shortest length) met by a
# query (`Postings.word_bounds`), at most MAX_WORDS of them (the oldest dropped).
_LOCK = threading.Lock()
MAX_WORDS = 1 << 18
_UNSEEN = object()


def _stats_of(postings: Postings, word: str) -> tuple[int, int, float, float] | None:
    """A word's postings in one segment (start and end in its arrays), their largest term
    frequency and the shortest length (as scored: float64) of a row holding it; None where
    the segment lacks the word."""
    import numpy as np

    words = postings.word_bounds
    if (known := words.get(word, _UNSEEN)) is not _UNSEEN:
        return known  # type: ignore[no-any-return]
    tid = postings.vocab.get(word)
    out = None
    if tid is not None:
        lo, hi = int(postings.indptr[tid]), int(postings.indptr[tid + 1])
        if hi > lo:
            rows = np.asarray(postings.rows[lo:hi])
            max_tf = float(np.asarray(postings.tf[lo:hi]).max())
            out = (lo, hi, max_tf, float(postings.float_lengths()[rows].min()))
    with _LOCK:
        if len(words) >= MAX_WORDS:
            words.pop(next(iter(words)))
        words[word] = out
    return out


def worth_pruning(state: State, tokens: Sequence[str]) -> bool:
    """Whether `auto` takes MaxScore for these words where the C kernel is not built: one of
    them is in AUTO_FROM chunks or more (deleted rows included), beside another in at most
    1/SKEW as many. The rarer words then find the top k and the common word's long list is
    searched only where its bound can still lift a row. Words of similar list lengths are all
    essential: MaxScore scores every posting then, and its bookkeeping made a flat
    vocabulary's queries at a million 1.6x slower at the median, 2.6x at p95 (BENCHMARKS.md
    39); one word alone is the same case."""
    lengths = []
    for word in dict.fromkeys(tokens):
        total = 0
        for seg in state.segments:
            postings: Postings = seg.data
            if (tid := postings.vocab.get(word)) is not None:  # (no bounds made for a query not pruned)
                total += int(postings.indptr[tid + 1]) - int(postings.indptr[tid])
        if total:
            lengths.append(total)
    return bool(lengths) and max(lengths) >= AUTO_FROM and min(lengths) * SKEW <= max(lengths)


def _live_df(state: State, word: str, found: list[tuple[int, tuple[int, int, float, float]]]) -> int:
    """The live rows holding the word (its document frequency), kept with the version."""
    import numpy as np

    kept: dict[str, int] = state.cached("bm25_live_df", dict)
    if word in kept:
        return kept[word]
    df = 0
    for i, (lo, hi, _, _) in found:
        dead = state.dead(i)
        df += hi - lo if dead is None else hi - lo - int(np.count_nonzero(dead[state.segments[i].data.rows[lo:hi]]))
    kept[word] = df
    return df


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
    impacts: Callable[[list[str]], dict[str, Any]] | None = None,
) -> tuple[Any, Any] | None:
    """Rows (live, ascending) and their exact float64 BM25 scores, among them every row whose
    score (in `dtype`) is at least the n-th best of the rows `allowed_rows` lets through (a
    boolean mask over the state's rows; None: all); None where this method cannot bound a
    word's part (the stage then scores every posting). `impacts`: the stage's kept impacts of
    words (`BM25Retriever._word_impacts`: live rows, parts), read for the words whose rows are
    candidates; without it their parts are found as the others' are."""
    import numpy as np

    if method in UNBOUNDED or n <= 0:
        return None
    empty = np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.float64)
    n_docs = state.n_live
    if not n_docs:
        return empty
    avgdl = _live_tokens(state, weight) / n_docs
    idf_for = idf_of(state, method, epsilon)
    formula = formula_of(method)
    tfc, norm = _TFC[formula], _NORM[formula]
    words: dict[str, tuple[float, list[tuple[int, tuple[int, int, float, float]]]]] = {}
    bounds: dict[str, float] = {}
    for word in dict.fromkeys(tokens):
        found = [(i, st) for i, seg in enumerate(state.segments) if (st := _stats_of(seg.data, word)) is not None]
        if not found or not (df := _live_df(state, word, found)):
            continue
        idf = idf_for(df, n_docs)
        if idf < 0:
            return None
        words[word] = (idf, found)
        bounds[word] = max(idf * tfc(st[2], norm(st[3], avgdl, k1, b), k1, delta) for _, st in found) * SLACK
    query = [w for w in tokens if w in words]  # query order, a repeated word once per occurrence
    if not query:
        return empty

    def rows_of(word: str) -> Any:
        """The word's live rows (global, ascending)."""
        out = []
        for i, (lo, hi, _, _) in words[word][1]:
            local = np.asarray(state.segments[i].data.rows[lo:hi]).astype(np.intp)
            dead = state.dead(i)
            if dead is not None:
                local = local[~dead[local]]
            offset = int(state.offsets[i])
            out.append(local + offset if offset else local)
        return out[0] if len(out) == 1 else np.concatenate(out)

    def parts_of(word: str, rows: Any) -> Any:
        """The word's part in each of these rows (global, ascending, live; 0.0 where a row
        lacks the word), found by binary search in its postings, with the exhaustive path's
        expression per posting (`BM25Retriever._impacts`)."""
        idf, found = words[word]
        part = np.zeros(len(rows), dtype=np.float64)
        cuts = np.searchsorted(rows, state.offsets).tolist()
        for i, (lo, hi, _, _) in found:
            a, z = cuts[i], cuts[i + 1]
            if a == z:
                continue
            data: Postings = state.segments[i].data
            local = rows[a:z] - int(state.offsets[i])
            postings = data.rows[lo:hi]
            # Needles of the postings' own dtype: others make NumPy copy the whole list first.
            at = np.searchsorted(postings, local.astype(postings.dtype, copy=False)) + lo
            np.minimum(at, hi - 1, out=at)
            hit = np.flatnonzero(data.rows[at] == local)
            tf = np.asarray(data.tf)[at[hit]].astype(np.float64)
            part[a + hit] = idf * tfc(tf, norm(data.float_lengths()[local[hit]], avgdl, k1, b), k1, delta)
        return part

    def added(parts: dict[str, Any]) -> Any:
        """Each row's parts added in query order, a part per occurrence: the exhaustive path's
        floats (`_sum_by_row`; 0.0 where a row lacks a word, and x + 0.0 is x)."""
        total = parts[query[0]]
        for word in query[1:]:
            total = total + parts[word]
        return total

    def nth(rows: Any, values: Any) -> Any:
        """The n-th best of these values (float64) among the rows allowed; None if fewer."""
        kept = values if allowed_rows is None else values[allowed_rows[rows]]
        kept = kept[kept > 0]
        return np.partition(kept, len(kept) - n)[len(kept) - n] if len(kept) >= n else None

    def below(value: float, threshold: Any) -> bool:
        """Whether a bound is below the threshold, both in the answer's dtype: a row under it
        neither makes a hit nor ties with the n-th (rounding to dtype keeps order)."""
        return bool(np.array(value).astype(dtype) < np.array(threshold).astype(dtype))

    def own(word: str) -> tuple[Any, Any]:
        """The word's live rows and its part in each: its kept impacts where given."""
        if impacts is not None:
            hit = impacts([word])[word]
            return hit[0], hit[1]
        rows = rows_of(word)
        return rows, parts_of(word, rows)

    def placed(word: str, rows: Any) -> Any:
        """The word's part in each of these rows, a superset of its own rows."""
        own_rows, own_parts = own(word)
        part = np.zeros(len(rows), dtype=np.float64)
        part[np.searchsorted(rows, own_rows)] = own_parts
        return part

    # The threshold: the n-th best exact score among the rows of the word of largest bound.
    by_bound = sorted(dict.fromkeys(query), key=lambda w: -bounds[w])
    first, first_parts = own(by_bound[0])
    threshold = nth(first, added({w: first_parts if w == by_bound[0] else parts_of(w, first) for w in by_bound}))
    occurrences = {w: query.count(w) for w in by_bound}
    essential, rest = by_bound, 0.0
    if threshold is not None:
        for cut in range(len(by_bound), 0, -1):  # smallest bounds first
            word = by_bound[cut - 1]
            if not below(rest + bounds[word] * occurrences[word], threshold):
                essential = by_bound[:cut]  # `rest` bounds a row holding none of these
                break
            rest += bounds[word] * occurrences[word]
    if len(essential) == 1:
        rows, part = own(essential[0])
        parts = {essential[0]: part}
    else:
        rows = _union([own(w)[0] for w in essential])
        parts = {w: placed(w, rows) for w in essential}
    if rest and threshold is not None:
        # A candidate whose essential parts and the others' bounds stay below the threshold is
        # out before the others' lists are searched for it. Partial sums (any order) are lower
        # bounds of scores up to rounding: SLACK covers that both ways.
        partial = sum(parts[w] * occurrences[w] for w in essential)
        better = nth(rows, partial / SLACK)
        if better is not None and better > threshold:
            threshold = better
        bound = (partial + rest) * SLACK
        keep = np.flatnonzero(bound.astype(dtype) >= np.array(threshold).astype(dtype))
        rows = rows[keep]
        parts = {w: part[keep] for w, part in parts.items()}
    for word in by_bound[len(essential) :]:
        parts[word] = parts_of(word, rows)
    values = added(parts)
    keep = values != 0  # as `_sum_by_row` leaves out a row whose parts add up to 0
    return rows[keep], values[keep]


def _union(parts: list[Any]) -> Any:
    """The distinct values of ascending arrays, ascending (a sort: np.unique hashes ints, slower)."""
    import numpy as np

    rows = np.concatenate(parts)
    rows.sort()
    return rows[np.concatenate(([True], rows[1:] != rows[:-1]))] if len(rows) else rows
