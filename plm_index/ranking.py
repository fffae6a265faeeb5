"""Ranking helpers every retriever, fuser and reranker may use (re-exported by `plm`): `top_n`
turns a full score vector into ranked candidates (equal scores: the later row first);
`fused_ranking` ranks a fuser's scores; `rescore` reorders a ranking's top hits by a
stage's own scores and renumbers them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from plm_core.records import Ranking, ScoredChunk, SourceScore
from plm_index.columns import take_ids


def source_score(rank: int, score: float) -> SourceScore:
    """A `Hit.sources` entry."""
    return {"rank": int(rank), "score": float(score)}


def below_title(heading_path: tuple[str, ...], title: Any) -> tuple[str, ...]:
    """A hit's heading path without a first heading that repeats the document's title (a
    Markdown file's `# Title` is both): the title is shown once, beside the path. The
    stored chunk keeps its whole path (an enricher or a chunk id may depend on it)."""
    if heading_path and isinstance(title, str) and " ".join(heading_path[0].split()) == " ".join(title.split()):
        return heading_path[1:]
    return heading_path


def top_n(
    scores: Any, n: int, chunk_ids: Sequence[str], source: str, allowed: Any = None, drop_zero: bool = False
) -> list[ScoredChunk]:
    """The n best rows of `scores`, best first, 0-based ranks; `allowed` masks rows out.

    A full `argsort(scores)[::-1]`, the order `poc_parity` needs: among exactly equal scores
    (duplicate chunks, BM25 zeros) it puts the LAST row first, which argpartition or bm25s's
    own top-k would not reproduce. Masked rows are removed before the cut, so they never appear and
    n hits come back whenever n allowed rows exist.
    """
    import numpy as np

    if len(scores) > FULL_SORT_UP_TO:
        order = _top_rows(np, scores, max(0, n), allowed, drop_zero)
    else:
        order = np.argsort(scores)[::-1]
        if allowed is not None:
            order = order[np.asarray(allowed, dtype=bool)[order]]
        if drop_zero:
            order = order[scores[order] > 0]
        order = order[: max(0, n)]
    return scored_chunks(take_ids(chunk_ids, order), scores[order].tolist(), source)


def fused_ranking(scores: Mapping[str, float], n: int | None = None) -> list[ScoredChunk]:
    """A fuser's ranking of chunk id -> fused score: best first, equal scores in the mapping's
    order (Python's sort is stable, also reversed), 0-based ranks, source "fused"; the first n
    only (None: all), made without the rest."""
    ranked = sorted(scores.items(), key=lambda item: item[1], reverse=True)
    if n is not None:
        ranked = ranked[: max(0, n)]
    return scored_chunks([cid for cid, _ in ranked], [score for _, score in ranked], "fused")


# Up to this many rows a full argsort (that exact tie order; about 3 ms at 50k). Above
# it, sorting a million scores per query took 35 ms of a 40 ms query (bench/bench_scale.py),
# so `_top_rows` selects the same rows in linear time.
FULL_SORT_UP_TO = 50_000


def _top_rows(np: Any, scores: Any, n: int, allowed: Any, drop_zero: bool) -> Any:
    """The n best rows by score, best first, equal scores last row first: what the full
    argsort gives where its sort keeps equal scores in row order, in O(rows)."""
    keep = None if allowed is None else np.asarray(allowed, dtype=bool)
    if drop_zero:
        keep = scores > 0 if keep is None else keep & (scores > 0)
    # Only the rows that may be returned take part (few, for a BM25 query's non-zero rows).
    rows = None if keep is None else np.flatnonzero(keep)
    values = scores if rows is None else scores[rows]
    n = min(n, len(values))
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    kth = np.partition(values, len(values) - n)[len(values) - n]  # the n-th best score
    above, ties = np.flatnonzero(values > kth), np.flatnonzero(values == kth)[::-1]
    if rows is not None:
        above, ties = rows[above], rows[ties]
    top = np.concatenate([above, ties[: n - len(above)]])  # among equals, the last rows first
    return top[np.lexsort((-top, -scores[top]))]


def top_n_sparse(
    positions: Any,
    values: Any,
    n_rows: int,
    n: int,
    chunk_ids: Sequence[str],
    source: str,
    allowed: Any = None,
    drop_zero: bool = False,
    keys: Callable[[Any], Any] | None = None,
) -> list[ScoredChunk] | None:
    """`top_n` of a score vector of `n_rows` rows that is zero except at `positions`
    (distinct) where it holds `values`: the same hits in the same order, found among those
    rows alone (a BM25 query's matching rows, not the whole corpus). None where the answer
    needs the full vector: fewer than n positive scores with zeros kept, or equal scores
    among the hits of a vector small enough for the full sort, whose order among equals is
    its own.

    `keys`: where `positions` are not places in the vector's order but rows of something
    else, the order keys of some of them (`keys(positions[i])`): equal scores are ordered
    by (key, position), as the places would order them. `allowed` is then not taken."""
    import numpy as np

    n = max(0, n)
    if keys is not None and allowed is not None:
        raise ValueError("an allowed mask needs positions in the vector's order, not keyed rows")
    if allowed is not None:
        keep = np.asarray(allowed, dtype=bool)[positions]
        positions, values = positions[keep], values[keep]
    m = len(values)
    k = min(n, m)
    if k == 0:
        return [] if n == 0 or drop_zero else None
    top = np.flatnonzero(values >= np.partition(values, m - k)[m - k]) if m > k else np.arange(m)
    top = top[values[top] > 0]  # zeros and negatives rank below every positive score
    if len(top) < n:  # fewer than n positive scores, all of them in `top`
        if not drop_zero:
            return None
        k = len(top)
    tied = len(top) > k  # more rows than k at the k-th best score
    if keys is None:
        top = top[np.lexsort((-positions[top], -values[top]))][:k]  # best first, equal scores last row first
    else:
        top = top[np.lexsort((-positions[top], -keys(positions[top]), -values[top]))][:k]
    return ranked_rows(chunk_ids, positions[top], values[top].tolist(), n_rows, tied, source)


def scored_chunks(ids: Iterable[str], scores: Iterable[float], source: str) -> list[ScoredChunk]:
    """A ScoredChunk per id with its score, ranks 0, 1, ... in order: a stage's ranked
    candidates, made without the frozen dataclass's per-field `object.__setattr__` (half the
    time of `ScoredChunk(...)`, a tenth of a BM25 answer's); equal objects."""
    new, out = object.__new__, []
    for rank, (chunk_id, score) in enumerate(zip(ids, scores, strict=True)):
        hit = new(ScoredChunk)
        hit.__dict__.update(chunk_id=chunk_id, score=score, source=source, rank=rank)
        out.append(hit)
    return out


def ranked_rows(
    chunk_ids: Sequence[str], rows: Any, scores: list[float], n_rows: int, tied: bool, source: str
) -> list[ScoredChunk] | None:
    """The hits of rows already ranked (best first, equal scores the later first) with their
    scores; None where a vector of at most FULL_SORT_UP_TO rows has equal scores among them or
    more rows tied at the last (`tied`): its full sort orders equals its own way."""
    if n_rows <= FULL_SORT_UP_TO and (tied or any(a == b for a, b in zip(scores, scores[1:], strict=False))):
        return None
    return scored_chunks(take_ids(chunk_ids, rows), scores, source)


BEFORE = "fused"  # the `Hit.sources` key for a hit's rank and score before a stage rescored it


def rescore(ranking: Ranking, scores: Sequence[float], source: str) -> Ranking:
    """A reranker's result: the first len(scores) hits reordered by these scores (best
    first; equal scores keep their order), the rest after them in their order, ranks
    renumbered from 1. Each hit keeps its rank and score before (`Hit.sources["fused"]`);
    the rescored ones also record this stage's (`sources[source]`)."""
    head, tail = ranking.hits[: len(scores)], ranking.hits[len(scores) :]
    order = sorted(range(len(head)), key=lambda i: scores[i], reverse=True)  # stable: ties keep their order
    moved = [(head[i], float(scores[i]), True) for i in order] + [(hit, hit.score, False) for hit in tail]
    hits = []
    for rank, (hit, score, own) in enumerate(moved, start=1):
        sources = dict(hit.sources)
        sources.setdefault(BEFORE, source_score(hit.rank, hit.score))
        if own:
            sources[source] = source_score(rank, score)
        hits.append(dataclasses.replace(hit, rank=rank, score=score, sources=sources))
    return Ranking(query=ranking.query, hits=tuple(hits), fusion=ranking.fusion)
