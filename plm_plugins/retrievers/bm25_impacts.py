"""BM25's query-time arithmetic over a version's segments: each query word's impacts (its
live rows and their score parts) under the corpus-wide IDF and average length, kept per
version (`Impacts`), bm25s's formulas (`_IDF`, `_NORM`, `_TFC`), rank_bm25's Okapi IDF, and
the per-row sums of a query's parts (`_sum_by_row`), or the C kernel that sums and ranks them
in one call (`compiled`), reading a long list's postings where its segments keep them
(`_postings_of`) and their blocks for block-max (`_with_blocks`)."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from plm_plugins.retrievers.bm25_postings import Postings, weighted

if TYPE_CHECKING:
    from plm.indexes import State


class Impacts:
    """A version's word impacts (`BM25Retriever._impacts`: each word's live rows, their parts,
    the bm25l/bm25+ constant, and the arrays' addresses for the C kernel),
    kept with its state as its queries meet the words, most recently used first, up to
    MAX_IMPACTS postings: a word is scored once per version, as Lucene and PISA keep impacts
    per segment, not once per query. Its arrays are read-only, shared by every query. The C
    kernel's words (`BM25Retriever._kernel_words`) are kept in another: impacts, or a long
    list's postings (`_postings_of`, which count no postings here: they are the segments')."""

    MAX_IMPACTS = 1 << 22  # postings (16 bytes each: 64 MiB)
    MAX_WORDS = 1 << 16  # words, those in no live row included

    def __init__(self) -> None:
        self._words: OrderedDict[str, Any] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, terms: list[str]) -> dict[str, Any]:
        with self._lock:
            out = {}
            for term in terms:
                if term in self._words:
                    self._words.move_to_end(term)
                    out[term] = self._words[term]
            return out

    def add(self, words: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            for term, hit in words.items():
                if hit is not None:
                    self._size += _size(hit) - _size(self._words.get(term))
                self._words[term] = hit
                self._words.move_to_end(term)
            while (self._size > self.MAX_IMPACTS or len(self._words) > self.MAX_WORDS) and len(self._words) > 1:
                _, hit = self._words.popitem(last=False)
                self._size -= _size(hit)
            return words


def _size(hit: Any) -> int:
    """A kept word's postings: its impacts' (made read-only as they are kept); 0 for none, or
    for its postings' slices (`_postings_of`)."""
    if hit is None or isinstance(hit[0], float):
        return 0
    hit[0].flags.writeable = hit[1].flags.writeable = False
    return len(hit[0])


def _segment_arrays(state: State) -> list[tuple[Any, ...]]:
    """Per segment what a query reads, looked up once per state (a query word visits every
    segment: attribute lookups there cost as much as the arithmetic)."""
    out = []
    for i, seg in enumerate(state.segments):
        p: Postings = seg.data
        out.append((p.vocab, p.indptr, p.rows, p.tf, int(state.offsets[i]), state.dead(i)))
    return out


def _postings(segments: list[tuple[Any, ...]], term: str) -> tuple[Any, Any] | None:
    """A word's live postings in every segment: global rows (ascending) and term
    frequencies; None when no live row holds it."""
    import numpy as np

    rows, tfs = [], []
    for vocab, indptr, posting_rows, posting_tf, offset, dead in segments:
        tid = vocab.get(term)
        if tid is None:
            continue
        lo, hi = indptr[tid], indptr[tid + 1]
        found, tf = posting_rows[lo:hi], posting_tf[lo:hi]
        if dead is not None:
            alive = ~dead[found]
            found, tf = found[alive], tf[alive]
        if len(found):
            rows.append(found + offset if offset else found)
            tfs.append(tf)
    if len(rows) < 2:
        return (rows[0], tfs[0]) if rows else None
    return np.concatenate(rows), np.concatenate(tfs)


def _slices(state: State) -> list[tuple[Any, ...]]:
    """Per segment what the C kernel reads of a word's postings (`_postings_of`): its
    vocabulary and word starts, the addresses of its rows (int32) and term frequencies (int32,
    or float64 with a heading weight), its first global row, its deleted rows' mask, its
    lengths and row count, and the arrays themselves (kept alive with the version). The
    lengths are the int32 token counts where there is no heading weight (half the bytes read
    at random), else the weighted float64 ones. Empty where a segment's arrays are of other
    types (the kernel then reads kept impacts)."""
    import numpy as np

    out = []
    for i, seg in enumerate(state.segments):
        p: Postings = seg.data
        rows, tf = np.asarray(p.rows), np.asarray(p.tf)
        if rows.dtype != np.int32 or tf.dtype not in (np.int32, np.float64) or not rows.flags.c_contiguous:
            return []
        lengths, dead = np.asarray(p.dl), state.dead(i)
        if p.hl is not None or lengths.dtype != np.int32 or not lengths.flags.c_contiguous:
            lengths = p.float_lengths()
        address = (rows.ctypes.data, tf.ctypes.data, tf.dtype == np.float64, tf.itemsize)
        dead_at = 0 if dead is None else dead.ctypes.data
        where = (int(state.offsets[i]), dead_at, lengths.ctypes.data, seg.n, lengths.dtype == np.int32, i)
        out.append((p.vocab, p.indptr, rows, dead, address, where, (tf, lengths)))
    return out


def _postings_of(state: State, term: str, idf_of: Any) -> tuple[Any, ...] | None:
    """A word's postings as the C kernel scores them: (its IDF over the live rows, how many
    live rows hold it, a slice per segment holding it, as `_bm25_kernel.c` reads them); None
    where no live row holds it or the segments' arrays are of other types."""
    import numpy as np

    segments = state.cached("bm25_slices", lambda: _slices(state))
    if not segments:
        return None
    slices, live = [], 0
    for vocab, indptr, rows, dead, (rows_at, tf_at, floats, tf_size), where in (s[:6] for s in segments):
        tid = vocab.get(term)
        if tid is None:
            continue
        lo, hi = int(indptr[tid]), int(indptr[tid + 1])
        live += hi - lo - (int(np.count_nonzero(dead[rows[lo:hi]])) if dead is not None else 0)
        if hi > lo:
            slices.append((rows_at + 4 * lo, tf_at + tf_size * lo, floats, hi - lo, *where))
    return (float(idf_of(live, state.n_live)), live, tuple(slices), segments) if live else None


def _with_blocks(state: State, term: str, hit: tuple[Any, ...]) -> tuple[Any, ...]:
    """A word's postings (`_postings_of`) with its blocks in each segment (`_blocks_of`), for
    the C kernel's block-max."""
    blocks, arrays = [], []
    for x in hit[2]:
        found = _blocks_of(state.segments[x[9]].data, term)
        arrays.append(found)
        blocks.append((*(a.ctypes.data for a in found), len(found[0])))
    return (*hit[:4], tuple(blocks), arrays)


def _blocks_of(postings: Postings, term: str) -> tuple[Any, Any, Any, Any]:
    """The word's blocks of BLOCK_ROWS rows in one segment, kept with it (a segment never
    changes): each block holding the word (ascending), where its postings start (and the end),
    their largest term frequency and the shortest length of a row holding it (float64, as
    scored)."""
    import numpy as np

    kept = postings.word_blocks
    with _LOCK:
        if (known := kept.get(term)) is not None:
            kept.move_to_end(term)
            return known  # type: ignore[no-any-return]
    tid = postings.vocab[term]
    lo, hi = int(postings.indptr[tid]), int(postings.indptr[tid + 1])
    rows = np.asarray(postings.rows[lo:hi])
    block = rows // BLOCK_ROWS
    starts = np.flatnonzero(np.concatenate(([True], block[1:] != block[:-1]))) if len(rows) else np.zeros(0, np.intp)
    tf = np.asarray(postings.tf[lo:hi], dtype=np.float64)
    found = (
        np.ascontiguousarray(block[starts], dtype=np.int32),
        np.append(starts, len(rows)).astype(np.int64),
        np.maximum.reduceat(tf, starts) if len(rows) else np.zeros(0),
        np.minimum.reduceat(postings.float_lengths()[rows], starts) if len(rows) else np.zeros(0),
    )
    with _LOCK:
        if term not in kept:
            kept[term] = found
            postings.blocks_kept += len(found[0])
        while postings.blocks_kept > MAX_BLOCKS and len(kept) > 1:
            postings.blocks_kept -= len(kept.popitem(last=False)[1][0])
    return found


def _norms(state: State, rows: list[Any], at: Any, formula: str, avgdl: float, k1: float, b: float) -> Any:
    """The length part (`_NORM`) of the rows `at` (the words' `rows`, each ascending, joined),
    element for element what every row's holds. A version's first words compute it for their
    rows alone (a write's new version at a million: no pass over every row before its first
    answer); once that has covered as many rows as the version has, every row's is computed
    and kept, and read from then on."""
    import numpy as np

    kept = state.cached(f"bm25_norms {formula} {k1!r} {b!r}", lambda: {"rows": 0, "norms": None})
    if kept["norms"] is None:
        kept["rows"] += len(at)
        if kept["rows"] <= state.total:
            return _NORM[formula](np.concatenate([_lengths_of(state, r) for r in rows]), avgdl, k1, b)
        kept["norms"] = _NORM[formula](_lengths(state), avgdl, k1, b)
    return kept["norms"][at]


def _lengths(state: State) -> Any:
    """Each row's length as the scoring reads it (segments concatenated), float64: each
    segment's made once, so a new version (a write) only joins them."""
    import numpy as np

    return np.concatenate([np.zeros(0)] + [seg.data.float_lengths() for seg in state.segments])


def _lengths_of(state: State, rows: Any) -> Any:
    """`_lengths(state)[rows]` without joining every segment's: each segment's part of the
    rows read where it lies."""
    import numpy as np

    out = np.empty(len(rows), dtype=np.float64)
    for i, at, local in state.by_segment(rows):
        out[at] = state.segments[i].data.float_lengths()[local]
    return out


def _sum_by_row(state: State, at: Any, part: Any) -> tuple[Any, Any]:
    """The rows in `at` whose parts do not sum to 0 (ascending) and their sums, each row's
    parts added in the order given (np.add.at adds one at a time, in order), into a zeroed
    buffer of at least the state's size, zeroed again where used and kept for the next query
    (one per query running at once), of this version or the next: no array of the corpus's
    size is made per query, nor per write (a new buffer's pages fault in as it is first
    written: 5 ms at a million). A row left out scores 0, as a row no query word reaches."""
    import numpy as np

    buffer = _buffer(state.total)
    sums = buffer[: state.total]
    np.add.at(sums, at, part)
    if len(at) < state.total * SORTED_BELOW:
        # Few parts for the rows: their rows sorted (0.9 ms for 93k parts) rather than every
        # row scanned (2.4 ms at a million rows, most of it branching over the scattered rows).
        rows = np.sort(at)
        rows = rows[np.concatenate(([True], rows[1:] != rows[:-1]))] if len(rows) else rows
        values = sums[rows]
        sums[rows] = 0.0
        kept = values != 0
        rows, values = rows[kept], values[kept]
    else:
        rows = np.flatnonzero(sums != 0)
        values = sums[rows]
        sums[rows] = 0.0  # (a -0.0 left behind adds as 0.0 does)
    _give_back(buffer)  # not reached (the buffer dropped) if anything above raised
    return rows, values


def _buffer(total: int) -> Any:
    """A zeroed float64 buffer of at least `total` rows, this query's alone until given back."""
    import numpy as np

    try:
        buffer = _BUFFERS.pop()  # list.pop and append are atomic: a buffer is one query's at a time
    except IndexError:
        buffer = np.zeros(0, dtype=np.float64)
    if len(buffer) < total:
        buffer = np.zeros(total + total // 8 + 1024, dtype=np.float64)  # room for writes
    return buffer


def _give_back(buffer: Any) -> None:
    """A buffer zeroed again where used, kept for the next query."""
    if len(_BUFFERS) < _KEEP_BUFFERS:
        _BUFFERS.append(buffer)


def compiled() -> Any:
    """The C kernel's `top_sums` (`_bm25_kernel.c`: a query's parts, from kept impacts or
    scored from postings, summed per row and its top n picked and ordered in one call, by
    block-max for many postings, without the GIL), or None where the package was built
    without a C compiler: the NumPy path then answers, the same hits."""
    return _TOP_SUMS


try:
    from plm_plugins.retrievers._bm25_kernel import top_sums as _TOP_SUMS
except ImportError:  # built without a C compiler (setup.py: optional)
    _TOP_SUMS = None


# The C kernel reads a word in at least this many live rows from its postings, a shorter one
# from its kept impacts (BENCHMARKS.md 41).
RAW_FROM = 16_384

# The C kernel's block-max (`_with_blocks`): rows a block, a query's postings from which it is
# taken, and the words' blocks each segment keeps, most recently used first (28 bytes each:
# 112 MiB; a million rows hold 15,625 blocks).
BLOCK_ROWS = 64
BLOCKS_FROM = 1 << 17
MAX_BLOCKS = 1 << 22
_LOCK = threading.Lock()

# `_sum_by_row` finds the rows by sorting the parts when they are fewer than this many per row.
SORTED_BELOW = 0.125

# Zeroed score buffers for `_sum_by_row`, shared by every BM25 index of the process.
_BUFFERS: list[Any] = []
_KEEP_BUFFERS = 8


def _live_tokens(state: State, weight: float = 1.0) -> float:
    """Tokens in the live rows (for the average length), kept with the state; with a heading
    weight, the weighted total of the integer totals (the same whatever the segments)."""

    def count() -> float:
        total = heading = 0
        for seg, dead in zip(state.segments, state.deleted, strict=True):
            data: Postings = seg.data
            total += data.tokens - (int(data.dl[dead].sum()) if len(dead) else 0)
            if data.hl is not None:
                heading += data.heading_tokens - (int(data.hl[dead].sum()) if len(dead) else 0)
        return total if weight == 1.0 else weighted(float(total), float(heading), weight)

    return state.cached("bm25_tokens", count)


def _okapi_idf(state: State, epsilon: float) -> Any:
    """rank_bm25.BM25Okapi's IDF over the live rows: log((N - df + 0.5) / (df + 0.5)), and
    for negative ones epsilon x the mean IDF. The mean is summed one word at a time in the
    order rank_bm25 first met the words (chunks in the store's index order, each chunk's
    words in order of appearance): another order can round the floor one ulp apart, and
    with it every stop word's score (a sync's new segment, or an edited chunk, holds words
    out of that order)."""
    import numpy as np

    def floor_of() -> float:
        df: dict[str, int] = {}
        firsts: dict[str, tuple[int, int]] = {}  # word -> (order key, position) where first met
        for i, seg in enumerate(state.segments):
            postings: Postings = seg.data
            counts = np.diff(np.asarray(postings.indptr))
            term = np.repeat(np.arange(len(counts)), counts)
            rows, first = np.asarray(postings.rows), np.asarray(postings.first)
            dead = state.dead(i)
            if dead is not None:
                alive = ~dead[rows]
                term, rows, first = term[alive], rows[alive], first[alive]
            if not len(term):
                continue
            order = np.asarray(seg.order)[rows]
            at = np.lexsort((first, order, term))  # by word, then where in the corpus
            starts = at[np.r_[True, term[at][1:] != term[at][:-1]]]  # each word's first posting
            n_of = np.bincount(term, minlength=len(counts))
            words = list(postings.vocab)
            for t, key, pos in zip(term[starts].tolist(), order[starts].tolist(), first[starts].tolist(), strict=True):
                word = words[t]
                df[word] = df.get(word, 0) + int(n_of[t])
                if word not in firsts or (key, pos) < firsts[word]:
                    firsts[word] = (key, pos)
        n_docs = state.n_live
        idf_sum = 0.0
        for word in sorted(df, key=firsts.__getitem__):  # sequential: Python 3.12+ sum() compensates rounding
            f = df[word]
            idf_sum += math.log(n_docs - f + 0.5) - math.log(f + 0.5)
        return epsilon * (idf_sum / len(df)) if df else 0.0

    floor = state.cached(f"okapi_floor{epsilon}", floor_of)

    def idf(df: int, n_docs: int) -> float:
        value = math.log(n_docs - df + 0.5) - math.log(df + 0.5)
        return floor if value < 0 else value

    return idf


def formula_of(method: str) -> str:
    """The formula whose length norm and term-frequency part a method scores with (`_NORM`,
    `_TFC`): its own, and ATIRE's for rank_bm25's Okapi."""
    return "atire" if method == "rank_bm25_okapi" else method


def idf_of(state: State, method: str, epsilon: float) -> Any:
    """The method's IDF of a word in df of n live rows: bm25s's formula, or rank_bm25's Okapi
    one with its floor over this version's words."""
    return _okapi_idf(state, epsilon) if method == "rank_bm25_okapi" else _IDF[method]


def _idf_robertson(df: int, n: int) -> float:
    inner = (n - df + 0.5) / (df + 0.5)
    return math.log(max(inner, 1))


# bm25s's formulas (bm25s.scoring), the same expressions in the same order: the same floats.
_IDF: dict[str, Any] = {
    "robertson": _idf_robertson,
    "lucene": lambda df, n: math.log(1 + (n - df + 0.5) / (df + 0.5)),
    "atire": lambda df, n: math.log(n / df),
    "bm25l": lambda df, n: math.log((n + 1) / (df + 0.5)),
    "bm25+": lambda df, n: math.log((n + 1) / df),
}
# bm25s's term-frequency parts, split where bm25s's expression has a part that depends on the
# row's length alone (`_NORM`, computed once per row and version): the same expressions, in
# the same order, so the same floats.
_NORM: dict[str, Any] = {
    "robertson": lambda dl, avg, k1, b: k1 * ((1 - b) + b * dl / avg),
    "lucene": lambda dl, avg, k1, b: k1 * ((1 - b) + b * dl / avg),
    "atire": lambda dl, avg, k1, b: k1 * (1 - b + b * dl / avg),
    "bm25l": lambda dl, avg, k1, b: 1 - b + b * dl / avg,
    "bm25+": lambda dl, avg, k1, b: k1 * (1 - b + b * dl / avg),
}
_TFC: dict[str, Any] = {
    "robertson": lambda tf, norm, k1, delta: tf / (norm + tf),
    "lucene": lambda tf, norm, k1, delta: tf / (norm + tf),
    "atire": lambda tf, norm, k1, delta: (tf * (k1 + 1)) / (tf + norm),
    "bm25l": lambda tf, norm, k1, delta: ((k1 + 1) * (tf / norm + delta)) / (k1 + tf / norm + delta),
    "bm25+": lambda tf, norm, k1, delta: ((k1 + 1) * tf) / (norm + tf) + delta,
}
