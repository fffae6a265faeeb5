"""The conformance kit (`plm.testing`) can fail: each check passes a small, correct stage
written here from the contracts alone, and fails, naming the contract, for a stage broken
in one way. (The built-in stages and the example plugins pass it in their own tests.)"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import plm
import plm.testing
from plm_core.records import StoreProblem


# ---------------------------------------------------------------------- a store
class DictStore(plm.Store):
    """A store in a few dicts, change feed included: what a third party might write first."""

    name = "dict_store"

    def open(self, location: str, create: bool = True) -> None:
        self.docs: dict[str, tuple[plm.Document, str]] = {}  # insertion order: index order
        self.rows: dict[str, list[list[Any]]] = {}  # doc id -> [seq, chunk, vector, model] per chunk
        self.meta: dict[str, str] = {}
        self.places: dict[str, None] = {}  # every document ever stored, in the order first stored
        self.counter, self.position = 0, 0
        self.removed: list[tuple[int, int]] = []  # (position removed at, seq)

    def close(self) -> None:
        pass

    def get_meta(self, key: str) -> str | None:
        return self.meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        self.meta[key] = value

    def version(self) -> plm.CorpusVersion:
        return plm.CorpusVersion("dict", self.counter, str(self.counter))

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        yield

    def _all(self) -> list[list[Any]]:
        return [row for doc_id in self.docs for row in self.rows[doc_id]]

    def _seq(self) -> int:
        self.position += 1
        return self.position

    def doc_fingerprints(self, ids: Sequence[str] | None = None) -> dict[str, str]:
        return {k: fp for k, (_, fp) in self.docs.items() if ids is None or k in ids}

    def doc_paths(self, paths: Sequence[str] | None = None) -> dict[str, str]:
        return {k: d.path or "" for k, (d, _) in self.docs.items() if paths is None or d.path in paths}

    def get_document(self, doc_id: str) -> plm.Document | None:
        return self.docs[doc_id][0] if doc_id in self.docs else None

    def replace_documents(self, documents, chunks, matrix=None, model=None, fingerprints=None) -> None:  # type: ignore[no-untyped-def]
        for i, doc in enumerate(documents):
            self._drop(doc.id)
            self.docs[doc.id] = (doc, fingerprints[i] if fingerprints else "")
            self.places.setdefault(doc.id, None)
            self.rows.setdefault(doc.id, [])
        for i, chunk in enumerate(chunks):
            vector = None if matrix is None else np.asarray(matrix[i], np.float32)
            self.rows[chunk.doc_id].append([self._seq(), chunk, vector, model])
        if matrix is not None and len(chunks):
            self.meta["model"] = model  # the store's model: the last one written
        self.counter += bool(documents)

    def _drop(self, doc_id: str) -> None:
        for row in self.rows.get(doc_id, []):
            self.removed.append((self._seq(), row[0]))
        self.rows[doc_id] = []

    def delete_documents(self, doc_ids: Sequence[str]) -> list[str]:
        gone = [d for d in dict.fromkeys(doc_ids) if d in self.docs]
        for doc_id in gone:
            self._drop(doc_id)
            del self.docs[doc_id], self.rows[doc_id]
        self.counter += bool(gone)
        return gone

    def chunk_ids(self) -> list[str]:
        return [row[1].id for row in self._all()]

    def chunks(self) -> list[plm.Chunk]:
        return [row[1] for row in self._all()]

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, plm.Chunk]:
        return {row[1].id: row[1] for row in self._all() if row[1].id in chunk_ids}

    def chunk_metadata(self) -> list[dict[str, Any]]:
        return [dict(row[1].metadata) for row in self._all()]

    def filter_mask(self, filters: Mapping[str, Any]) -> Any:
        keep = plm.compile_filters(filters)  # None: no condition
        return np.array([keep is None or keep(m) for m in self.chunk_metadata()], dtype=bool)

    def write_vectors(self, chunk_ids, matrix, model, texts=None) -> int:  # type: ignore[no-untyped-def]
        by_id = {row[1].id: row for row in self._all()}
        written = 0
        for i, chunk_id in enumerate(chunk_ids):
            row = by_id.get(chunk_id)
            if row is None or (texts is not None and row[1].index_text != texts[i]):
                continue
            self.removed.append((self._seq(), row[0]))
            row[:] = [self._seq(), row[1], np.asarray(matrix[i], np.float32), model]
            self.meta["model"] = model
            written += 1
        self.counter += bool(written)
        return written

    def chunks_needing_vectors(self, model: str) -> list[plm.Chunk]:
        return [row[1] for row in self._all() if row[2] is None or row[3] != model]

    def vectors(self) -> tuple[list[str], Any, str | None]:
        rows = [row for row in self._all() if row[2] is not None]
        if not rows:
            return [], None, None
        return [r[1].id for r in rows], np.stack([r[2] for r in rows]), rows[0][3]

    def vector_count(self) -> int:
        return sum(row[2] is not None for row in self._all())

    def stats(self) -> dict[str, Any]:
        ids, matrix, model = self.vectors()
        return {
            "documents": len(self.docs),
            "chunks": len(self._all()),
            "vectors": len(ids),
            "model": model,
            "dimension": None if matrix is None else matrix.shape[1],
            "corpus_version": self.counter,
            "bytes": 0,
        }

    def consistency_problems(self) -> list[StoreProblem]:
        problems = []
        n = sum(row[2] is None for row in self._all())
        if n and self.vector_count():
            problems.append(StoreProblem(StoreProblem.MISSING_VECTORS, n, f"{n} chunks have no vector"))
        if (n := len({row[3] for row in self._all() if row[2] is not None})) > 1:
            problems.append(StoreProblem(StoreProblem.MIXED_MODELS, n, f"vectors from {n} models"))
        return problems

    # the change feed
    def feed_position(self) -> int | None:
        return self.position

    def _order(self) -> dict[str, int]:
        # A chunk's key never changes while its seq lives: the document's first place, then its position.
        places = {doc_id: n for n, doc_id in enumerate(self.places)}
        return {row[1].id: places[d] * 10_000 + j for d in self.docs for j, row in enumerate(self.rows[d])}

    def rows_since(self, position: int) -> tuple[list[int], list[str], list[int], list[str]]:
        order = self._order()
        rows = sorted((r for r in self._all() if r[0] > position), key=lambda r: r[0])
        return (
            [r[0] for r in rows],
            [r[1].id for r in rows],
            [order[r[1].id] for r in rows],
            [r[1].index_text for r in rows],
        )

    def removed_since(self, position: int) -> list[int] | None:
        return sorted(seq for at, seq in self.removed if at > position and seq <= position)

    def vectors_since(self, position: int) -> tuple[list[int], Any, str | None]:
        rows = sorted((r for r in self._all() if r[0] > position and r[2] is not None), key=lambda r: r[0])
        if {r[3] for r in rows} - {self.meta.get("model")}:
            raise plm.StoreError("vectors of another model than the store's: half re-embedded")
        return [r[0] for r in rows], np.stack([r[2] for r in rows]) if rows else None, rows[0][3] if rows else None


def _make(cls: type[DictStore]) -> Any:
    def make() -> DictStore:
        store = cls()
        store.open("(memory)")
        return store

    return make


def test_a_store_written_from_the_contract_passes() -> None:
    plm.testing.check_store(_make(DictStore))


class ChunkIdsReversed(DictStore):
    name = "chunk_ids_reversed"

    def chunk_ids(self) -> list[str]:
        return super().chunk_ids()[::-1]


class FilterKeepsAll(DictStore):
    name = "filter_keeps_all"

    def filter_mask(self, filters: Mapping[str, Any]) -> Any:
        return np.ones(len(self.chunk_ids()), dtype=bool)


class VersionStandsStill(DictStore):
    name = "version_stands_still"

    def version(self) -> plm.CorpusVersion:
        return plm.CorpusVersion("dict", 0)


class DeleteEchoes(DictStore):
    name = "delete_echoes"

    def delete_documents(self, doc_ids: Sequence[str]) -> list[str]:
        super().delete_documents(doc_ids)
        return list(doc_ids)


class OrderKeysMove(DictStore):
    name = "order_keys_move"

    def _order(self) -> dict[str, int]:
        return {row[1].id: i for i, row in enumerate(self._all())}


class ForgetsRemovals(DictStore):
    name = "forgets_removals"

    def removed_since(self, position: int) -> list[int] | None:
        return []


class ReplaceMovesToTheEnd(DictStore):
    name = "replace_moves_to_the_end"

    def replace_documents(self, documents, chunks, matrix=None, model=None, fingerprints=None) -> None:  # type: ignore[no-untyped-def]
        for doc in documents:
            self.docs.pop(doc.id, None)
        super().replace_documents(documents, chunks, matrix, model, fingerprints)


class VectorsSinceMixesModels(DictStore):
    name = "vectors_since_mixes_models"

    def vectors_since(self, position: int) -> tuple[list[int], Any, str | None]:  # no model check
        rows = sorted((r for r in self._all() if r[0] > position and r[2] is not None), key=lambda r: r[0])
        return [r[0] for r in rows], np.stack([r[2] for r in rows]) if rows else None, rows[0][3] if rows else None


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (VectorsSinceMixesModels, r"vectors_since\(p\) refuses rows whose vector comes from another model"),
        (ChunkIdsReversed, r"stores contract .*chunk_ids\(\) lists chunks in index order"),
        (FilterKeepsAll, r"filter_mask\(spec\) is a boolean mask .*\n  filter \{'team': 'a'\}"),
        (VersionStandsStill, r"a write moves version\(\) forward"),
        (DeleteEchoes, r"delete_documents\(ids\) returns the ids that were there"),
        (ForgetsRemovals, r"a replica of an earlier state, less removed_since"),
        (OrderKeysMove, r"a chunk's order key never changes"),
        (ReplaceMovesToTheEnd, r"a replaced document keeps its place in index order"),
    ],
)
def test_a_broken_store_fails_naming_the_contract(broken: type[DictStore], message: str) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_store(_make(broken))
    assert "docs/contracts/stores.md" in str(err.value)


# ---------------------------------------------------------------------- a tokenizer
class Words(plm.Tokenizer):
    name = "kit_words"

    class Config(plm.ComponentConfig):
        lower: bool = True

    config: Config

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        return [(t.lower() if self.config.lower else t).split() for t in texts]


def test_a_tokenizer_written_from_the_contract_passes() -> None:
    plm.testing.check_tokenizer(Words(), different=Words(lower=False))


class Counting(Words):
    name = "kit_counting"
    calls = 0

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        Counting.calls += 1
        return [[*tokens, f"call{Counting.calls}"] if tokens else [] for tokens in super().tokenize(texts)]


class Deduplicating(Words):
    name = "kit_dedup"

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        return [list(dict.fromkeys(tokens)) for tokens in super().tokenize(texts)]


class EmptyToken(Words):
    name = "kit_empty_token"

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        return [t.split(" ") for t in texts]


class BatchPosition(Words):
    name = "kit_batch_position"

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        return [[f"{tok}{i}" for tok in tokens] for i, tokens in enumerate(super().tokenize(texts))]


class SetIdentity(Words):
    name = "kit_set_identity"

    @property
    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "stopwords": {"the", "a"}}


class ConstantIdentity(Words):
    name = "kit_constant_identity"

    @property
    def identity(self) -> dict[str, Any]:
        return {"name": self.name}


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (Counting, r"tokenize\(\) is deterministic"),
        (Deduplicating, r"repeats are kept"),
        (EmptyToken, r"(non-empty strings|an empty text has no tokens)"),
        (BatchPosition, r"do not depend on the other texts in the batch"),
        (SetIdentity, r"`identity` is JSON"),
        (ConstantIdentity, r"`identity` changes with settings"),
    ],
)
def test_a_broken_tokenizer_fails_naming_the_contract(broken: type[Words], message: str) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_tokenizer(broken(), different=broken(lower=False))
    assert str(err.value).startswith("tokenizers contract (docs/contracts/tokenizers.md)")


# ---------------------------------------------------------------------- a retriever
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


# ---------------------------------------------------------------------- a fuser
class SumOfScores(plm.Fuser):
    name = "kit_sum"

    def settings_for(self, query: plm.ExpandedQuery, n_chunks: int) -> plm.FusionConfig:
        return plm.FusionConfig(candidates=min(n_chunks, query.depth * 10))

    def fuse(self, rankings: Mapping[str, list[plm.ScoredChunk]], settings: plm.FusionConfig) -> list[plm.ScoredChunk]:
        scores: dict[str, float] = {}
        for hits in rankings.values():
            for hit in hits:
                scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + 1.0 / (1 + hit.rank)
        ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
        return [plm.ScoredChunk(c, s, "fused", r) for r, (c, s) in enumerate(ranked)]


def test_a_fuser_written_from_the_contract_passes() -> None:
    plm.testing.check_fuser(SumOfScores())


class WorstFirst(SumOfScores):
    name = "kit_worst_first"

    def fuse(self, rankings: Mapping[str, list[plm.ScoredChunk]], settings: plm.FusionConfig) -> list[plm.ScoredChunk]:
        hits = list(reversed(super().fuse(rankings, settings)))
        return [plm.ScoredChunk(h.chunk_id, h.score, h.source, r) for r, h in enumerate(hits)]


class Consumes(SumOfScores):
    name = "kit_consumes"

    def fuse(self, rankings: Mapping[str, list[plm.ScoredChunk]], settings: plm.FusionConfig) -> list[plm.ScoredChunk]:
        fused = super().fuse(rankings, settings)
        for hits in rankings.values():
            hits.clear()
        return fused


class RankAsScore(SumOfScores):
    name = "kit_rank_as_score"

    def fuse(self, rankings: Mapping[str, list[plm.ScoredChunk]], settings: plm.FusionConfig) -> list[plm.ScoredChunk]:
        scores: dict[str, float] = {}
        for hits in rankings.values():
            for hit in hits:
                scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + hit.rank  # a later rank counts more: a bug
        ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
        return [plm.ScoredChunk(c, s, "fused", r) for r, (c, s) in enumerate(ranked)]


class EmptyGivesPlaceholder(SumOfScores):
    name = "kit_placeholder"

    def fuse(self, rankings: Mapping[str, list[plm.ScoredChunk]], settings: plm.FusionConfig) -> list[plm.ScoredChunk]:
        return super().fuse(rankings, settings) or [plm.ScoredChunk("none", 0.0, "fused", 0)]


class TopIsNotTheHead(SumOfScores):
    name = "kit_top_not_head"

    def fuse_top(
        self, rankings: Mapping[str, list[plm.ScoredChunk]], settings: plm.FusionConfig, n: int
    ) -> list[plm.ScoredChunk]:
        return self.fuse(rankings, settings)[-n:] if n else []  # the last n: a bug


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (TopIsNotTheHead, r"fuse_top\(rankings, settings, n\) is fuse\(rankings, settings\)\[:n\]"),
        (WorstFirst, r"hits come best first"),
        (Consumes, r"leaves its input rankings as they were"),
        (RankAsScore, r"a chunk first in every source is first"),
        (EmptyGivesPlaceholder, r"empty rankings fuse to no hits|hits are chunks of the corpus"),
    ],
)
def test_a_broken_fuser_fails_naming_the_contract(broken: type[SumOfScores], message: str) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_fuser(broken())
    assert str(err.value).startswith("fusers contract (docs/contracts/fusers.md)")


def test_importing_plm_does_not_load_the_kit() -> None:
    import subprocess
    import sys

    code = "import sys, plm; assert 'plm.testing' not in sys.modules and 'numpy' not in sys.modules; plm.testing"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


class Paragraphs(plm.Chunker):
    name = "test_paragraphs"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:
        out = []
        for doc in data:
            start = 0
            for i, part in enumerate(doc.text.split("\n\n")):
                if part.strip():
                    out.append(plm.Chunk(id=f"{doc.id}#{i}", doc_id=doc.id, text=part, start_char=start))
                start += len(part) + 2
        return out


class WarmParagraphs(Paragraphs):
    name = "test_warm_paragraphs"

    def warm_up(self) -> None:  # setup where DESIGN.md asks for it; the pipeline warms first
        self.split = "\n\n"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:
        assert self.split
        return super().run(data)


def test_a_chunker_written_from_the_contract_passes() -> None:
    plm.testing.check_chunker(Paragraphs())
    plm.testing.check_chunker(WarmParagraphs())
    plm.testing.check_chunker(plm.default_registry().get("markdown_semantic", "chunkers").cls())


class NumberedAcrossTheBatch(Paragraphs):
    name = "test_numbered"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:  # ids from a counter over the batch
        return [replace(c, id=f"{c.doc_id}#{i}") for i, c in enumerate(super().run(data))]


class SameIds(Paragraphs):
    name = "test_same_ids"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:
        return [replace(c, id=c.id.split("#")[1]) for c in super().run(data)]


class Backwards(Paragraphs):
    name = "test_backwards"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:
        return list(reversed(super().run(data)))


class Strings(Paragraphs):
    name = "test_strings"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:
        return [c.text for c in super().run(data)]  # type: ignore[misc]


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (NumberedAcrossTheBatch, "a document.s chunks do not depend on the other documents"),
        (SameIds, "chunk ids are unique"),
        (Backwards, "a document's chunks come together"),
        (Strings, "run returns plm.Chunk records"),
    ],
)
def test_a_broken_chunker_fails_naming_the_contract(broken: type[Paragraphs], message: str) -> None:
    with pytest.raises(AssertionError, match="chunkers contract .docs/contracts/chunkers.md.: " + message):
        plm.testing.check_chunker(broken())


class Shout(plm.Reranker):
    name = "test_shout"

    def run(self, data: plm.Ranking) -> plm.Ranking:
        return plm.rescore(data, [len(h.text) for h in data.hits], self.label)


def test_a_ranking_stage_written_from_the_contract_passes() -> None:
    plm.testing.check_ranking_stage(Shout(label="shout"))
    plm.testing.check_ranking_stage(plm.default_registry().get("collapse", "rankers").cls())


class KeepsRanks(Shout):
    name = "test_keeps_ranks"

    def run(self, data: plm.Ranking) -> plm.Ranking:  # reorders without renumbering
        return replace(data, hits=tuple(reversed(data.hits)))


class Invents(Shout):
    name = "test_invents"

    def run(self, data: plm.Ranking) -> plm.Ranking:
        extra = replace(data.hits[0], chunk_id="new", rank=len(data.hits) + 1) if data.hits else None
        return replace(data, hits=data.hits + ((extra,) if extra else ()))


class ShallowDepth(Shout):
    name = "test_shallow"

    def depth(self, k: int) -> int:
        return 3


@pytest.mark.parametrize(
    ("broken", "message"),
    [(KeepsRanks, "ranks count from 1, in order"), (Invents, "only hits it was given"), (ShallowDepth, "depth")],
)
def test_a_broken_ranking_stage_fails_naming_the_contract(broken: type[Shout], message: str) -> None:
    with pytest.raises(AssertionError, match="rerankers contract .docs/contracts/rerankers.md.: " + message):
        plm.testing.check_ranking_stage(broken(label="broken"))
