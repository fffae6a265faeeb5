"""`plm.testing.check_retriever` and `check_segmented_index` pass a retriever written from the
contract alone and fail, naming the rule, for one broken in one way."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import plm
import plm.testing


class Overlap(plm.Retriever, plm.SavedIndex):
    """Scores a chunk by the query words it holds (as examples/plm-example-search does)."""

    name = "kit_overlap"

    def index(self, snapshot: plm.Snapshot) -> None:
        self.ids = list(snapshot.chunk_ids)
        self.words = [set(t.lower().split()) for t in snapshot.index_texts]

    def save(self, folder: Path) -> None:
        (folder / "words.txt").write_text(
            "\n".join(f"{i}\t{' '.join(sorted(w))}" for i, w in zip(self.ids, self.words, strict=True))
        )

    def open_saved(self, folder: Path, snapshot: plm.Snapshot) -> None:
        lines = [line.split("\t") for line in (folder / "words.txt").read_text().split("\n") if line]
        self.ids, self.words = [a for a, _ in lines], [set(b.split()) for _, b in lines]

    def scores(self, query: plm.ExpandedQuery) -> Any:
        wanted = set(query.text.lower().split())
        return np.array([float(len(wanted & w)) for w in self.words])

    def search(self, query: plm.ExpandedQuery, n: int, allowed: Any = None) -> list[plm.ScoredChunk]:
        return plm.top_n(self.scores(query), n, self.ids, self.label, allowed, drop_zero=True)


def test_a_retriever_written_from_the_contract_passes(tmp_path: Path) -> None:
    plm.testing.check_retriever(Overlap, tmp_path)


class MaskAfterTheCut(Overlap):
    name = "kit_mask_after_cut"

    def search(self, query: plm.ExpandedQuery, n: int, allowed: Any = None) -> list[plm.ScoredChunk]:
        hits = super().search(query, n)
        keep = [h for h in hits if allowed is None or allowed[self.ids.index(h.chunk_id)]]
        return [plm.ScoredChunk(h.chunk_id, h.score, h.source, r) for r, h in enumerate(keep)]


class IgnoresN(Overlap):
    name = "kit_ignores_n"

    def search(self, query: plm.ExpandedQuery, n: int, allowed: Any = None) -> list[plm.ScoredChunk]:
        return super().search(query, len(self.ids), allowed)


class RanksFromOne(Overlap):
    name = "kit_ranks_from_one"

    def search(self, query: plm.ExpandedQuery, n: int, allowed: Any = None) -> list[plm.ScoredChunk]:
        return [plm.ScoredChunk(h.chunk_id, h.score, h.source, h.rank + 1) for h in super().search(query, n, allowed)]


class ShuffledTies(Overlap):
    name = "kit_shuffled_ties"

    def scores(self, query: plm.ExpandedQuery) -> Any:
        return super().scores(query) + np.array([random.random() * 1e-3 for _ in self.ids])


class EmptyCorpusFails(Overlap):
    name = "kit_empty_corpus_fails"

    def search(self, query: plm.ExpandedQuery, n: int, allowed: Any = None) -> list[plm.ScoredChunk]:
        return plm.top_n(self.scores(query) / max(self.scores(query)), n, self.ids, self.label, allowed)


class SavesNothing(Overlap):
    name = "kit_saves_nothing"

    def save(self, folder: Path) -> None:
        (folder / "words.txt").write_text("")


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (MaskAfterTheCut, r"`allowed` is applied before the cut"),
        (IgnoresN, r"search\(q, n\) returns at most n hits"),
        (RanksFromOne, r"ranks are 0, 1, 2"),
        (ShuffledTies, r"(same hits, ties in the same order|same text \(and vector\) tie|first n of a deeper)"),
        (EmptyCorpusFails, r"an empty corpus builds and gives no hits"),
        (SavesNothing, r"saved by build\(\) and opened by load\(\)"),
    ],
)
def test_a_broken_retriever_fails_naming_the_contract(broken: type[Overlap], message: str, tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_retriever(broken, tmp_path)
    assert str(err.value).startswith("retrievers contract (docs/contracts/retrievers.md)")


def test_a_segmented_index_that_merges_the_wrong_rows_fails(tmp_path: Path) -> None:
    from plm_plugins.retrievers.dense import DenseRetriever

    class WrongRowsMerged(DenseRetriever):
        name = "kit_wrong_rows_merged"

        def merge_data(self, parts: list[Any], keep: list[Any]) -> Any:
            every = np.concatenate([np.asarray(p) for p in parts])
            return every[: sum(int(np.sum(k)) for k in keep)]  # the first rows, not the kept ones

    plm.testing.check_segmented_index(DenseRetriever, tmp_path / "right")
    with pytest.raises(AssertionError, match=r"ranks as one built whole .*\n  after (refresh \d|merges)"):
        plm.testing.check_segmented_index(WrongRowsMerged, tmp_path / "wrong")


def test_a_segmented_index_with_per_segment_statistics_fails(tmp_path: Path) -> None:
    from plm_plugins.retrievers.dense import DenseRetriever

    class NormalisedPerSegment(DenseRetriever):
        name = "kit_normalised_per_segment"

        def build_data(self, rows: Any) -> Any:
            matrix = np.asarray(super().build_data(rows))
            return matrix - matrix.mean(axis=0) if len(matrix) else matrix  # a statistic of this segment only

    with pytest.raises(AssertionError, match=r"ranks as one built whole .*\n  after refresh 2"):
        plm.testing.check_segmented_index(NormalisedPerSegment, tmp_path)
