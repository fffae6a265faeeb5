"""The `faiss` ANN retriever against exact `dense`: same top ids (flat), recall (hnsw, ivf,
sq8), filters that still give k hits, its build folder, and a real Job built from TOML."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from plm_needs import needs
from plm_toys import bag_of_words

from plm_core.config import load_job
from plm_core.errors import ConfigError, MissingDependencyError, StaleIndexError, StoreError
from plm_core.records import Chunk, CorpusVersion, Document, EmbeddedQuery
from plm_core.settings import Settings
from plm_index.corpus import CorpusSnapshot
from plm_index.job import Job
from plm_index.plugins import build_registry
from plm_plugins.retrievers.dense import DenseRetriever

pytestmark = needs("faiss", extra="ann")
from plm_plugins.retrievers.faiss import INDEX_FILE, FaissRetriever  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
DIM = 64
V1, V2 = CorpusVersion("s", 1, "a"), CorpusVersion("s", 2, "b")
KINDS: list[dict[str, Any]] = [
    {"index": "flat"},
    {"index": "flat", "quantizer": "sq8"},
    {"index": "hnsw"},
    {"index": "hnsw", "quantizer": "sq8"},
    {"index": "ivf"},
    {"index": "ivf", "quantizer": "sq8"},
]


def _unit(x: Any) -> Any:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _random(rows: int, seed: int = 0) -> Any:
    return _unit(np.random.default_rng(seed).normal(size=(rows, DIM)))


def _clustered(rows: int, queries: int, seed: int = 0) -> tuple[Any, Any]:
    """Points and queries around 40 random centres: neighbourhoods an ANN index can find."""
    rng = np.random.default_rng(seed)
    centres = _unit(rng.normal(size=(40, DIM)))
    points = _unit(centres[rng.integers(0, 40, rows)] + rng.normal(size=(rows, DIM)) * 0.12)
    return points, _unit(centres[rng.integers(0, 40, queries)] + rng.normal(size=(queries, DIM)) * 0.12)


def _snap(matrix: Any, version: CorpusVersion = V1) -> CorpusSnapshot:
    chunks = [Chunk(id=f"c{i}", doc_id=f"d{i // 4}", text=f"t{i}") for i in range(len(matrix))]
    return CorpusSnapshot.of(chunks, matrix, version)


def _faiss(snap: CorpusSnapshot, index_dir: Path | None = None, **config: Any) -> FaissRetriever:
    retriever = FaissRetriever(**{"exact_below": 0, **config})  # exact_below 0: the index answers
    retriever.build(snap, index_dir)
    return retriever


def _graph(retriever: FaissRetriever) -> Any:
    """The faiss index of the retriever's one segment (built whole: one segment)."""
    assert retriever.state is not None
    (segment,) = retriever.state.segments
    return segment.data.index


def _segment_folder(retriever: FaissRetriever, index_dir: Path) -> Path:
    (folder,) = (retriever.index_base(index_dir) / "segments").iterdir()
    return folder


def _dense(snap: CorpusSnapshot) -> DenseRetriever:
    retriever = DenseRetriever()
    retriever.build(snap, None)
    return retriever


def _q(vector: Any, k: int = 10) -> EmbeddedQuery:
    return EmbeddedQuery(text="q", k=k, vector=np.asarray(vector, dtype=np.float32))


def _ids(hits: Sequence[Any]) -> list[str]:
    return [h.chunk_id for h in hits]


def _pairs(hits: Sequence[Any]) -> list[tuple[str, float, int]]:
    return [(h.chunk_id, h.score, h.rank) for h in hits]


def _recall(retriever: Any, exact: Any, queries: Any, n: int = 10, allowed: Any = None) -> float:
    found = [
        len(set(_ids(retriever.search(_q(q), n, allowed))) & set(_ids(exact.search(_q(q), n, allowed)))) / n
        for q in queries
    ]
    return float(np.mean(found))


# ---------------------------------------------------------------------- ranking
def test_flat_gives_dense_top_ids_and_scores() -> None:
    snap = _snap(_random(2000))
    flat, dense = _faiss(snap, index="flat"), _dense(snap)
    faiss = pytest.importorskip("faiss")
    assert (
        type(_graph(flat)).__name__.startswith("IndexFlat") and _graph(flat).metric_type == faiss.METRIC_INNER_PRODUCT
    )
    for q in _random(30, seed=1):
        got, want = flat.search(_q(q), 10), dense.search(_q(q), 10)
        assert _ids(got) == _ids(want)
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-6)
        assert [(h.rank, h.source) for h in got] == [(r, "faiss") for r in range(10)]


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: "+".join(k.values()))
def test_recall_at_10_against_exact(kind: dict[str, Any]) -> None:
    points, queries = _clustered(2000, 40)
    snap = _snap(points)
    retriever, exact = _faiss(snap, **kind), _dense(snap)
    assert _recall(retriever, exact, queries) >= 0.9
    hits = retriever.search(_q(queries[0]), 10)
    # scores are exact inner products (re-scored), best first, whatever the index stores
    want = points[[int(h.chunk_id[1:]) for h in hits]] @ queries[0]
    assert [h.score for h in hits] == pytest.approx(want.tolist(), abs=1e-6)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_recall_measure_can_fail() -> None:
    # A graph too thin to navigate: the same measure as above falls far below 0.9.
    points, queries = _clustered(2000, 40)
    snap = _snap(points)
    weak = _faiss(snap, index="hnsw", hnsw_m=2, ef_construction=1, ef_search=1)
    assert _recall(weak, _dense(snap), queries) < 0.6


def test_factory_strings_and_nlist() -> None:
    assert FaissRetriever().factory(10_000) == "HNSW32"
    assert FaissRetriever(hnsw_m=16, quantizer="sq8").factory(10_000) == "HNSW16,SQ8"
    assert FaissRetriever(index="ivf").factory(1_000_000) == "IVF4000,Flat"
    assert FaissRetriever(index="ivf", quantizer="sq8").factory(2000) == "IVF51,SQ8"  # >= 39 rows per list
    assert FaissRetriever(index="ivf", nlist=500).factory(100) == "IVF100,Flat"  # at most one per row
    assert FaissRetriever(index="flat", quantizer="sq8").factory(5) == "SQ8"
    assert FaissRetriever(index="ivf").nlist(3) == 1


def test_ties_and_unit_scores() -> None:
    matrix = _random(300)
    matrix[[10, 50, 200]] = matrix[7]  # duplicated chunks tie exactly
    snap = _snap(matrix)
    query = _q(matrix[7])
    dense = _ids(_dense(snap).search(query, 4))
    for kind in ("flat", "hnsw"):
        # from the index, or scanned exactly (fewer rows than exact_below): exact ties put the
        # later chunk first, every time, whatever segment each row is in
        assert _ids(_faiss(snap, index=kind).search(query, 4)) == ["c200", "c50", "c10", "c7"]
        assert _ids(_faiss(snap, index=kind, exact_below=1000).search(query, 4)) == ["c200", "c50", "c10", "c7"]
    assert sorted(dense) == ["c10", "c200", "c50", "c7"]
    for exact_below in (0, 1000):
        unit = _faiss(snap, index="flat", score="unit", exact_below=exact_below).search(query, 5)
        cosine = _faiss(snap, index="flat", exact_below=exact_below).search(query, 5)
        assert _ids(unit) == _ids(cosine)
        assert [h.score for h in unit] == pytest.approx([(1 + h.score) / 2 for h in cosine])


def test_small_corpus_and_k_beyond_it_are_exact() -> None:
    snap = _snap(_random(300))
    retriever, dense = _faiss(snap, index="ivf", nprobe=1, exact_below=2000), _dense(snap)
    for q in _random(5, seed=3):
        assert _pairs(retriever.search(_q(q), 10)) == _pairs(dense.search(_q(q), 10))  # fewer rows than exact_below
    everything = _faiss(snap, index="hnsw").search(_q(_random(1, seed=4)[0]), 1000)
    assert len(everything) == 300 and [h.rank for h in everything] == list(range(300))
    assert retriever.search(_q(_random(1)[0]), 0) == []


# ---------------------------------------------------------------------- filters
@pytest.mark.parametrize(  # HNSW builds take seconds: in the full suite only
    "kind",
    [pytest.param(k, marks=pytest.mark.slow) if k["index"] == "hnsw" else k for k in KINDS],
    ids=lambda k: "+".join(k.values()),
)
def test_tight_filter_returns_exactly_the_allowed_rows(kind: dict[str, Any]) -> None:
    snap = _snap(_random(2000))
    allowed = np.zeros(2000, dtype=bool)
    allowed[[3, 400, 999, 1500, 1999]] = True
    for exact_below in (0, 2000):
        retriever = _faiss(snap, exact_below=exact_below, **kind)
        hits = retriever.search(_q(_random(1, seed=5)[0]), 10, allowed)
        assert sorted(_ids(hits)) == ["c1500", "c1999", "c3", "c400", "c999"]
        assert [h.rank for h in hits] == list(range(5))
    assert retriever.search(_q(_random(1)[0]), 10, np.zeros(2000, dtype=bool)) == []


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: "+".join(k.values()))
def test_medium_filter_gives_n_allowed_hits(kind: dict[str, Any]) -> None:
    points, queries = _clustered(2000, 20)
    snap = _snap(points)
    allowed = np.random.default_rng(6).random(2000) < 0.3
    retriever, exact = _faiss(snap, **kind), _dense(snap)
    for q in queries:
        hits = retriever.search(_q(q), 10, allowed)
        assert len(hits) == 10 and all(allowed[int(h.chunk_id[1:])] for h in hits)
    assert _recall(retriever, exact, queries, allowed=allowed) >= 0.9


def test_ann_short_under_a_filter_falls_back_to_exact() -> None:
    points, queries = _clustered(2000, 1)
    snap = _snap(points)
    allowed = np.zeros(2000, dtype=bool)
    allowed[::100] = True  # 20 rows spread over every list
    retriever = _faiss(snap, index="ivf", nprobe=1)
    vector = queries[0]
    assert len(retriever._ann(_graph(retriever), vector, 10, allowed)) < 10  # one list holds too few allowed rows...
    hits = retriever.search(_q(vector), 10, allowed)  # ...so the answer is an exact scan of the 20
    assert _pairs(hits) == _pairs(_dense(snap).search(_q(vector), 10, allowed))


# ---------------------------------------------------------------------- build folder
def test_build_save_load_and_settings(tmp_path: Path) -> None:
    points, queries = _clustered(2000, 5)
    snap = _snap(points)
    built = _faiss(snap, tmp_path, index="hnsw", quantizer="sq8")
    folder = _segment_folder(built, tmp_path)
    assert (folder / INDEX_FILE).is_file() and (folder / "plm_segment.json").is_file()
    assert built.manifest_path(tmp_path, V1).is_file()
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # temp folder renamed away

    loaded = FaissRetriever(index="hnsw", quantizer="sq8", exact_below=0)
    assert loaded.is_current(V1, tmp_path)
    loaded.load(snap, tmp_path)
    assert type(_graph(loaded)).__name__ == "IndexHNSWSQ" and _graph(loaded).ntotal == 2000
    for q in queries:
        assert loaded.search(_q(q), 10) == built.search(_q(q), 10)
    # search-time options share the build; build options and the kind do not
    assert FaissRetriever(index="hnsw", quantizer="sq8", ef_search=200, exact_below=10).is_current(V1, tmp_path)
    others: list[dict[str, Any]] = [{"hnsw_m": 16}, {"ef_construction": 40}, {"quantizer": "none"}, {"index": "ivf"}]
    for other in others:
        changed = FaissRetriever(**{"index": "hnsw", "quantizer": "sq8", **other})
        assert not changed.is_current(V1, tmp_path), other
        with pytest.raises(StaleIndexError):
            changed.load(snap, tmp_path)
    assert not loaded.is_current(V2, tmp_path)
    with pytest.raises(StaleIndexError):
        loaded.load(_snap(points, CorpusVersion("other", 2)), tmp_path)  # another store's
    with pytest.raises(StaleIndexError):
        loaded.load(snap, tmp_path / "nowhere")


def test_exact_vectors_are_memory_mapped(tmp_path: Path) -> None:
    points, queries = _clustered(1000, 5)
    snap = _snap(points)
    built = _faiss(snap, tmp_path, index="hnsw")
    loaded = FaissRetriever(index="hnsw", exact_below=0)
    loaded.load(snap, tmp_path)
    assert loaded.state is not None
    assert isinstance(loaded.state.segments[0].data.vectors, np.memmap)  # the saved vectors, not the store's
    for q in queries:
        assert loaded.search(_q(q), 10) == built.search(_q(q), 10)


def test_new_version_and_counts_are_checked(tmp_path: Path) -> None:
    _faiss(_snap(_random(500)), tmp_path, index="ivf")
    _faiss(_snap(_random(400), V2), tmp_path, index="ivf")
    base = FaissRetriever(index="ivf").index_base(tmp_path)
    assert sorted(p.name for p in (base / "manifests").iterdir()) == sorted(
        p.name for p in (FaissRetriever(index="ivf").manifest_path(tmp_path, v) for v in (V1, V2))
    )
    with pytest.raises(StoreError, match="holds 400 chunks.*has 500"):
        FaissRetriever(index="ivf").load(_snap(_random(500), V2), tmp_path)


@pytest.mark.parametrize("damage", ["truncate", "flip", "remove"])
def test_corrupt_index_is_a_store_error(tmp_path: Path, damage: str) -> None:
    snap = _snap(_random(500))
    folder = _segment_folder(_faiss(snap, tmp_path), tmp_path)
    victim = folder / INDEX_FILE
    data = victim.read_bytes()
    if damage == "truncate":
        victim.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        victim.write_bytes(data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:])
    else:
        victim.unlink()
    with pytest.raises(StoreError, match=r"corrupt.*plm index rebuild") as info:
        FaissRetriever().load(snap, tmp_path)
    assert not isinstance(info.value, StaleIndexError) and INDEX_FILE in str(info.value)
    _faiss(snap, tmp_path)  # a rebuild replaces the damaged build
    FaissRetriever().load(snap, tmp_path)


def test_unreadable_index_is_a_store_error(tmp_path: Path) -> None:
    # A file faiss cannot parse (the checksums were passed): every read mode fails, one clear error.
    retriever = _faiss(_snap(_random(50)), tmp_path)
    folder = _segment_folder(retriever, tmp_path)
    (folder / INDEX_FILE).write_bytes(b"not a faiss index")
    with pytest.raises(ValueError, match=r"faiss cannot read index.faiss"):
        retriever._read(folder)


def test_empty_corpus(tmp_path: Path) -> None:
    snap = CorpusSnapshot.of([], None, V1)
    retriever = _faiss(snap, tmp_path)
    assert retriever.search(_q(np.ones(DIM)), 10) == []
    loaded = FaissRetriever()
    assert loaded.is_current(V1, tmp_path)
    loaded.load(snap, tmp_path)
    assert loaded.state is not None and loaded.state.segments == [] and loaded.search(_q(np.ones(DIM)), 10) == []


def test_errors_name_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = _snap(_random(100))
    with pytest.raises(ConfigError, match="embedder"):
        FaissRetriever().check()
    with pytest.raises(StoreError, match="dimensions"):
        _faiss(snap).search(_q(np.ones(DIM + 1)), 5)
    monkeypatch.setitem(sys.modules, "faiss", None)  # faiss not installed
    with pytest.raises(MissingDependencyError, match=re.escape("pip install 'plm[ann]'")):
        FaissRetriever().build(snap, None)
    with pytest.raises(MissingDependencyError, match="faiss"):
        FaissRetriever(embedder=object()).check()  # `plm config check` finds it too


# ---------------------------------------------------------------------- a real Job
VOCAB = ["pod", "node", "backup", "restore", "token", "cluster", "disk", "quota"]


BagOfWordsEmbedder = bag_of_words(VOCAB)


def _job_config(tmp_path: Path) -> Path:
    # The repository's experiment config, with a toy embedder and no loader or chunker.
    text = (REPO / "configs" / "experiments" / "faiss_hnsw.toml").read_text()
    embedder = text[text.index("[embedder]") : text.index("[index.load]")]
    text = text.replace(embedder, '[embedder]\nuse = "bag_of_words"\n\n')
    text = text.replace("exact_below = 2000", "exact_below = 0")
    path = tmp_path / "faiss.toml"
    path.write_text(text)
    return path


def test_job_from_the_experiment_config(tmp_path: Path) -> None:
    registry = build_registry()
    registry.add(BagOfWordsEmbedder)
    config = load_job(_job_config(tmp_path), registry)
    words = [" ".join(VOCAB[j] for j in range(len(VOCAB)) if (i >> j) & 1) or "none" for i in range(1, 200)]
    docs = [Document(id=f"d{i:03d}", text=t) for i, t in enumerate(words)]
    chunks = [Chunk(id=f"{d.id}_0", doc_id=d.id, text=d.text, metadata={"odd": i % 2}) for i, d in enumerate(docs)]

    def open_job() -> Job:
        job = Job(config, tmp_path / "index", Settings(progress=False), registry)
        job.open()
        return job

    job = open_job()
    embedder = job.embedder
    assert embedder is not None
    job.store.replace_documents(docs, chunks, embedder.embed([c.text for c in chunks]), embedder.model_name)
    job.rebuild_indexes()
    retriever = job.query_stages[-1].retrievers["dense"]
    assert isinstance(retriever, FaissRetriever) and retriever.config.index == "hnsw"
    version = job.store.version()
    assert job.searcher.indexes_current(version)
    assert retriever.manifest_path(job.index_dir, version).is_file()
    ranking, _ = job.search("backup restore", k=5)
    assert ranking.hits[0].text == "backup restore"
    filtered = job.retrieve("backup restore", k=5, filters={"odd": 1})
    assert len(filtered) == 5 and all(h.metadata["odd"] == 1 for h in filtered)
    job.close()

    again = open_job()  # another process: loads the saved build, never rebuilds
    again.searcher.warm()
    loaded = again.query_stages[-1].retrievers["dense"]
    assert loaded.state is not None and loaded.state.n_live == len(chunks)
    assert [h.chunk_id for h in again.search("backup restore", k=5)[0].hits] == [h.chunk_id for h in ranking.hits]
    # the corpus moves: the saved build is stale, the next query rebuilds in memory
    extra = Document(id="zzz", text="quota quota disk")
    again.store.replace_documents(
        [extra], [Chunk(id="zzz_0", doc_id="zzz", text=extra.text)], embedder.embed([extra.text]), "bag-of-words"
    )
    assert not again.searcher.indexes_current(again.store.version())
    assert again.search("quota quota disk", k=1)[0].hits[0].chunk_id == "zzz_0"
    again.close()


def test_experiment_config_is_dense_minilm_with_faiss() -> None:
    registry = build_registry()
    configs = REPO / "configs" / "experiments"
    faiss_raw = load_job(configs / "faiss_hnsw.toml", registry).raw
    dense_raw = load_job(configs / "dense_minilm.toml", registry).raw
    assert faiss_raw["query"]["retrieve"]["retrievers"]["dense"]["use"] == "faiss"
    for raw in (faiss_raw, dense_raw):
        del raw["job"]["name"], raw["job"]["description"], raw["query"]["retrieve"]["retrievers"]["dense"]
    assert faiss_raw == dense_raw  # nothing else changed


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: "+".join(k.values()))
def test_faiss_keeps_the_retriever_and_segmented_index_contracts(kind: dict[str, Any], tmp_path: Path) -> None:
    """Scanned exactly (a small corpus: the default) it is an exact retriever; answered by its
    index (exact_below 0) an approximate one: n hits, exact scores, not always the exact top n
    (at a tie on the cut, the index may return another of the equal chunks)."""
    import plm.testing

    plm.testing.check_retriever(lambda: FaissRetriever(label="ann", **kind), tmp_path / "exact")
    approximate = {**kind, "exact_below": 0}
    plm.testing.check_retriever(lambda: FaissRetriever(label="ann", **approximate), tmp_path / "ann", exact=False)
    plm.testing.check_segmented_index(lambda: FaissRetriever(label="ann", **approximate), tmp_path / "segments")
