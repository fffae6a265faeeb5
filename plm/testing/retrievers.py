"""The retriever checks: a retriever alone (`check_retriever`) and one kept as segments
(`check_segmented_index`), both on the kit's corpus (`plm.testing.corpus.CHUNKS`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from plm.testing.corpus import CHUNKS, META, QUERIES, Feed, MemorySnapshot, query, snapshot_of
from plm.testing.rules import Rules, checking
from plm_core.interfaces import Retriever
from plm_core.records import Chunk, ScoredChunk


def _hits(rules: Rules, hits: Any, n: int, ids: Sequence[str], what: str) -> list[ScoredChunk]:
    rules.require(isinstance(hits, list), f"search() returns a list of ScoredChunk ({what})", f"got {hits!r}")
    rules.require(all(isinstance(h, ScoredChunk) for h in hits), f"search() returns ScoredChunk items ({what})")
    got = [h.chunk_id for h in hits]
    rules.expect(len(hits) <= n, f"search(q, n) returns at most n hits ({what})", f"n={n}, got {len(hits)}")
    rules.expect(len(set(got)) == len(got), f"a chunk appears once in a ranking ({what})", f"got {got}")
    rules.expect(set(got) <= set(ids), f"hits are chunks of the corpus ({what})", f"got {got}")
    rules.expect([h.rank for h in hits] == list(range(len(hits))), f"ranks are 0, 1, 2, ... ({what})")
    scores = [h.score for h in hits]
    rules.expect(
        all(a >= b for a, b in zip(scores, scores[1:], strict=False)),
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
    with checking("retrievers") as rules:
        _check_retriever(rules, make_retriever, folder, exact)


def _check_retriever(
    rules: Rules, make_retriever: Callable[[], Retriever], folder: Path | str | None, exact: bool
) -> None:
    snap = snapshot_of(CHUNKS)
    retriever = make_retriever()
    rules.require(isinstance(retriever, Retriever), "make_retriever() returns a plm.Retriever")
    for allowed in (None, np.zeros(0, dtype=bool)):
        try:
            retriever.build(snapshot_of([]), None)
            hits: Any = retriever.search(query("pod memory"), 5, allowed)
        except Exception as err:  # noqa: BLE001 - the contract is "no error"
            hits = err
        rules.expect(hits == [], "an empty corpus builds and gives no hits (and no error)", f"got {hits!r}")

    retriever = make_retriever()
    retriever.build(snap, None)
    found = False
    for text in QUERIES:
        with rules.part(f"searching {text!r}"):
            found = _check_query(rules, retriever, snap, text, exact) or found
    rules.expect(found, "a query sharing words with chunks finds some of them", f"queries {QUERIES}")
    with rules.part("searching for tied chunks"):
        _check_ties(rules, retriever)
    if folder is not None:
        with rules.part("saving and loading"):
            _check_saved(rules, make_retriever, retriever, snap, Path(folder))


def _check_query(rules: Rules, retriever: Retriever, snap: MemorySnapshot, text: str, exact: bool) -> bool:
    n_all = len(CHUNKS)
    deep = _hits(rules, retriever.search(query(text), n_all + 5), n_all + 5, snap.chunk_ids, f"{text!r}")
    for n in (0, 1, 3):
        top = _hits(rules, retriever.search(query(text), n), n, snap.chunk_ids, f"{text!r}, n={n}")
        rules.expect(
            _pairs(top) == _pairs(deep[:n]) if exact else len(top) == min(n, len(deep)),
            "search(q, n) is the first n of a deeper search (the top n, best first)"
            if exact
            else "search(q, n) gives n hits when a deeper search finds n",
            f"query {text!r}, n={n}: got {_pairs(top)}, the deeper search starts {_pairs(deep[:n])}",
        )
    again = retriever.search(query(text), n_all + 5)
    rules.expect(_pairs(again) == _pairs(deep), "the same query gives the same hits, ties in the same order")
    by_id = {h.chunk_id: h.score for h in deep}
    for mask in ([i % 2 == 0 for i in range(n_all)], [i in (4, 5) for i in range(n_all)], [False] * n_all):
        allowed = np.array(mask, dtype=bool)
        passing = [h for h in deep if allowed[snap.chunk_ids.index(h.chunk_id)]]
        for n in (1, 2, n_all):
            got = _hits(rules, retriever.search(query(text), n, allowed), n, snap.chunk_ids, "allowed mask")
            rules.expect(
                {h.chunk_id for h in got} <= {c for c, ok in zip(snap.chunk_ids, mask, strict=True) if ok},
                "`allowed` (a boolean mask over rows in index order) lets no other row through",
                f"query {text!r}, allowed rows {[i for i, ok in enumerate(mask) if ok]}: got {_pairs(got)}",
            )
            rules.expect(
                ([h.chunk_id for h in got] == [h.chunk_id for h in passing[:n]] or not exact)
                and len(got) == min(n, len(passing))
                and all(abs(h.score - by_id[h.chunk_id]) <= 1e-6 * max(1.0, abs(h.score)) for h in got),
                "`allowed` is applied before the cut: n hits come back when n allowed rows match, "
                "scored as without the mask",
                f"query {text!r}, n={n}, allowed rows {[i for i, ok in enumerate(mask) if ok]}: got "
                f"{_pairs(got)}, want {_pairs(passing[:n])}",
            )
    return bool(deep)


def _check_ties(rules: Rules, retriever: Retriever) -> None:
    n_all = len(CHUNKS)
    tied = {h.chunk_id: h.score for h in retriever.search(query("pod memory limits"), n_all)}
    if "c4" in tied or "c5" in tied:
        rules.expect(
            "c4" in tied and "c5" in tied and abs(tied["c4"] - tied["c5"]) <= 1e-6 * max(1.0, abs(tied["c4"])),
            "chunks with the same text (and vector) tie: both found, scored equal",
            f"c4 and c5 hold the same text; got {tied}",
        )


def _check_saved(
    rules: Rules, make_retriever: Callable[[], Retriever], built: Retriever, snap: MemorySnapshot, folder: Path
) -> None:
    n_all = len(CHUNKS)
    saved = make_retriever()
    saved.build(snap, folder)
    rules.expect(saved.is_current(snap.version, folder), "is_current() is True for a version just built")
    reader = make_retriever()
    reader.load(snap, folder)
    for text in QUERIES:
        want, got = built.search(query(text), n_all), reader.search(query(text), n_all)
        rules.expect(
            _pairs(got) == _pairs(want),
            "an index saved by build() and opened by load() gives the hits of the one built in memory",
            f"query {text!r}: loaded {_pairs(got)}, built {_pairs(want)}",
        )


def check_segmented_index(make_index: Callable[[], Any], folder: Path | str) -> None:
    """`make_index()` returns a new retriever that is a `plm.SegmentedIndex`; `folder` is an
    empty folder. The corpus changes in steps (adds, edits, deletes); after each `refresh`
    (and after the merges the policy asks for) the index ranks exactly as one built whole."""
    with checking("retrievers") as rules:
        _check_segmented_index(rules, make_index, Path(folder))


def _check_segmented_index(rules: Rules, make_index: Callable[[], Any], folder: Path) -> None:
    from plm_index import segments

    index = make_index()
    rules.require(isinstance(index, segments.SegmentedIndex), "make_index() returns a plm.SegmentedIndex")
    feed = Feed()
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
        _same_as_whole(rules, index, make_index, snap, f"after refresh {step}")
        segments.wait_for_merges()  # the merges the policy asked for, so each run takes the same path
        reader = make_index()
        reader.load(snap, folder)
        _same_as_whole(rules, reader, make_index, snap, f"after refresh {step} and its merges, opened from the folder")
    base = index.stage_base(folder)
    while index.merge_once(base):
        pass
    reader = make_index()
    reader.load(snap, folder)
    rules.expect(
        reader.state is not None and len(reader.state.segments) < len(steps),
        "a merge leaves fewer segments (the steps made one each)",
        f"{len(reader.state.segments) if reader.state else None} segments after {len(steps)} refreshes",
    )
    _same_as_whole(rules, reader, make_index, snap, "after merges, opened from the folder")


def _same_as_whole(rules: Rules, index: Any, make_index: Callable[[], Any], snap: MemorySnapshot, when: str) -> None:
    whole = make_index()
    whole.build(snap, None)
    n = snap.n_chunks + 2
    masks = [None, np.array([m.get("team") == "a" for m in snap.metadata], dtype=bool)]
    for text in QUERIES:
        for allowed in masks:
            got, want = index.search(query(text), n, allowed), whole.search(query(text), n, allowed)
            rules.expect(
                [h.chunk_id for h in got] == [h.chunk_id for h in want]
                and all(
                    abs(a.score - b.score) <= 1e-6 * max(1.0, abs(b.score)) for a, b in zip(got, want, strict=False)
                ),
                "a segmented index ranks as one built whole from the same corpus (same hits, order and scores)",
                f"{when}, query {text!r}, {'filtered' if allowed is not None else 'no filter'}: "
                f"segments {_pairs(got)}, whole {_pairs(want)}",
            )
