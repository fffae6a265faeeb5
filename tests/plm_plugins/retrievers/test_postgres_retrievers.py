"""pgvector, pg_fulltext and pg_hybrid built by real Jobs over a real Postgres (pgserver),
checked against plm's own retrievers over the same stored vectors and texts."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from plm_needs import needs

from plm_core.component import ComponentConfig
from plm_core.config import load_job
from plm_core.errors import ConfigError
from plm_core.interfaces import Embedder
from plm_core.registry import Registry
from plm_core.settings import Settings
from plm_index.job import Job

pytestmark = needs("psycopg", extra="postgres")
from plm_plugins.chunkers.markdown_semantic import MarkdownSemanticChunker  # noqa: E402
from plm_plugins.expanders.embed_query import QueryEmbedder  # noqa: E402
from plm_plugins.retrievers.dense import DenseRetriever  # noqa: E402
from plm_plugins.retrievers.pg_fulltext import PgFulltextRetriever  # noqa: E402
from plm_plugins.retrievers.pg_hybrid import PgHybridRetriever  # noqa: E402
from plm_plugins.retrievers.pgvector import PgvectorRetriever  # noqa: E402
from plm_plugins.stores.postgres import PostgresStore  # noqa: E402
from plm_plugins.stores.sqlite import SQLiteStore  # noqa: E402

WORDS = "pod node backup restore token cluster mirror quota ingress volume secret replica".split()
N_DOCS = 600
DIM = 16


class HashEmbedder(Embedder):
    """A fixed random unit vector per text (seeded by its hash): no model, reproducible."""

    name = "hash_vectors"

    class Config(ComponentConfig):
        pass

    @property
    def model_name(self) -> str:
        return "hash-16"

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        rows = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha1(t.encode()).digest()[:8], "little")
            rows.append(np.random.default_rng(seed).normal(size=DIM))
        m = np.asarray(rows, dtype=np.float32)
        return m / np.linalg.norm(m, axis=1, keepdims=True)


def job_for(dsn: str, folder: Path, retrieve: str) -> Job:
    registry = Registry()
    for cls in (
        PostgresStore,
        SQLiteStore,
        MarkdownSemanticChunker,
        HashEmbedder,
        QueryEmbedder,
        DenseRetriever,
        PgvectorRetriever,
        PgFulltextRetriever,
        PgHybridRetriever,
    ):
        registry.add(cls)
    path = folder / f"job-{abs(hash(retrieve))}.toml"
    path.write_text(
        f'[job]\nname = "pg"\n[store]\nuse = "postgres"\ndsn = "{dsn}"\n[embedder]\nuse = "hash_vectors"\n'
        '[index.chunk]\nuse = "markdown_semantic"\n'
        f'[query.embed]\nuse = "embed_query"\n[query.retrieve]\n{retrieve}\n'
    )
    job = Job(load_job(path, registry), folder / "index", Settings(progress=False, cache=False), registry)
    return job.open()


@pytest.fixture(scope="module")
def loaded(pg_new_database: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A Postgres store of N_DOCS one-chunk documents with hash vectors and metadata, made
    by a real ingest with the ANN retriever in the config (which builds the HNSW index)."""
    dsn, folder = pg_new_database(), tmp_path_factory.mktemp("pg-retrievers")
    rng = np.random.default_rng(7)
    records = [
        {
            "id": f"d{i}",
            "text": " ".join(rng.choice(WORDS, size=6)) + f" item{i}",
            "metadata": {"group": i % 10, "n": i},
        }
        for i in range(N_DOCS)
    ]
    exact = job_for(dsn, folder, 'use = "pgvector"\nexact = true')
    exact.ingest(records[:10])
    assert not hnsw_index(exact)  # an exact-only config never builds one
    exact.close()
    ann = job_for(dsn, folder, 'use = "pgvector"')
    assert not ann.open().searcher.indexes_current(ann.store.version())  # no HNSW index yet: not current
    report = ann.ingest(records)
    assert len(report.added) == N_DOCS - 10 and hnsw_index(ann) == ["chunks_hnsw_16"]
    assert ann.searcher.indexes_current(ann.store.version()) and ann.store.chunk_ids()[:2] == [
        "d0_mdsem_0",
        "d1_mdsem_0",
    ]
    ann.close()
    return dsn, folder


def hnsw_index(job: Job) -> list[str]:
    sql = "SELECT indexname FROM pg_indexes WHERE schemaname = 'plm' AND indexdef LIKE '%hnsw%'"
    return [r[0] for r in job.store.conn.execute(sql)]


def test_approximate_search_uses_the_hnsw_index_and_exact_search_does_not(loaded: tuple[str, Path]) -> None:
    from plm_plugins.retrievers.pg_search import dense_sql

    dsn, folder = loaded
    job = job_for(dsn, folder, 'use = "pgvector"')
    vector = "[" + ",".join(["0.25"] * DIM) + "]"
    plan = lambda exact: " ".join(  # noqa: E731
        r[0]
        for r in job.store.conn.execute(
            "EXPLAIN " + dense_sql(exact, DIM, "TRUE").replace("{s}", "plm"), [vector, vector, 10]
        )
    )
    assert "chunks_hnsw_16" in plan(False) and "chunks_hnsw_16" not in plan(True)


QUERIES = [" ".join(WORDS[i : i + 2]) for i in range(0, 10)] + ["backup restore quota", "secret", "item17 token"]


def ranked(job: Job, text: str, k: int, filters: dict | None = None) -> list[tuple[str, float]]:
    return [(h.chunk_id, h.score) for h in job.retrieve(text, k=k, filters=filters)]


def test_pgvector_exact_equals_dense_on_the_same_vectors(loaded: tuple[str, Path]) -> None:
    dsn, folder = loaded
    dense, exact = job_for(dsn, folder, 'use = "dense"'), job_for(dsn, folder, 'use = "pgvector"\nexact = true')
    for text in QUERIES:
        for filters, rows in ((None, 600), ({"group": 3}, 60), ({"n": {"lt": 40}, "group": {"in": [1, 2]}}, 8)):
            want, got = ranked(dense, text, 10, filters), ranked(exact, text, 10, filters)
            assert len(want) == min(10, rows)
            assert [c for c, _ in got] == [c for c, _ in want], (text, filters)
            assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-5)


def test_pgvector_hnsw_recall_and_k_hits_under_tight_filters(loaded: tuple[str, Path]) -> None:
    dsn, folder = loaded
    exact = job_for(dsn, folder, 'use = "pgvector"\nexact = true')
    ann = job_for(dsn, folder, 'use = "pgvector"\nef_search = 40')
    ann_unguarded = job_for(dsn, folder, 'use = "pgvector"\nexact_below = 0\nef_search = 10')
    recall = [len({c for c, _ in ranked(ann, t, 10)} & {c for c, _ in ranked(exact, t, 10)}) / 10 for t in QUERIES]
    assert np.mean(recall) >= 0.9, recall
    tight = {"n": {"in": [5, 77, 301, 450, 599]}}  # 5 of 600 rows
    for job in (ann, ann_unguarded):  # the guard, and the fallback when HNSW returns too few
        assert sorted(c for c, _ in ranked(job, "pod node", 10, tight)) == sorted(
            f"d{i}_mdsem_0" for i in (5, 77, 301, 450, 599)
        )
        assert len(ranked(job, "pod node", 10, {"group": 4})) == 10  # 60 rows match: k hits


def test_pg_fulltext_matches_stemmed_words_ranks_and_filters(loaded: tuple[str, Path]) -> None:
    dsn, folder = loaded
    job = job_for(dsn, folder, 'use = "pg_fulltext"')
    hits = job.retrieve("backups", k=50)  # english stemming: backups -> backup
    assert hits and all("backup" in h.text.split() for h in hits)
    both = job.retrieve("quota mirror", k=200)
    has = lambda h, w: w in h.text.split()  # noqa: E731
    assert any(has(h, "quota") != has(h, "mirror") for h in both)  # "or": either word is enough
    first_single = next(i for i, h in enumerate(both) if not (has(h, "quota") and has(h, "mirror")))
    assert all(has(h, "quota") and has(h, "mirror") for h in both[:first_single]) and first_single > 0
    assert all(h.metadata["group"] == 2 for h in job.retrieve("quota", k=20, filters={"group": 2}))
    and_job = job_for(dsn, folder, 'use = "pg_fulltext"\nmode = "and"')
    assert all(has(h, "quota") and has(h, "mirror") for h in and_job.retrieve("quota mirror", k=200))
    assert list(job.retrieve("the of and", k=5)) == []  # only stop words: nothing matches, no error


def test_pg_hybrid_is_weighted_rrf_of_the_two_rankings(loaded: tuple[str, Path]) -> None:
    dsn, folder = loaded
    m, k, wd, wk = 30, 60, 0.7, 1.3
    table = f'use = "pg_hybrid"\nexact = true\ncandidates = {m}\nk = {k}\nweights = {{ dense = {wd}, keyword = {wk} }}'
    hybrid = job_for(dsn, folder, table)
    dense = job_for(dsn, folder, 'use = "pgvector"\nexact = true')
    keyword = job_for(dsn, folder, 'use = "pg_fulltext"')
    for text in QUERIES:
        for filters in (None, {"group": {"in": [0, 5]}}):
            fused: dict[str, float] = {}
            for job, w in ((dense, wd), (keyword, wk)):
                for rank, (cid, _) in enumerate(ranked(job, text, m, filters), start=1):
                    fused[cid] = fused.get(cid, 0.0) + w / (k + rank)
            want = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
            got = ranked(hybrid, text, 10, filters)
            assert [c for c, _ in got] == [c for c, _ in want], (text, filters)
            assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-12)


def test_postgres_retrievers_refuse_another_store(tmp_path: Path) -> None:
    registry = Registry()
    for cls in (SQLiteStore, HashEmbedder, PgvectorRetriever, PgHybridRetriever):
        registry.add(cls)
    path = tmp_path / "job.toml"
    path.write_text(
        '[job]\nname = "x"\n[store]\nuse = "sqlite"\n[embedder]\nuse = "hash_vectors"\n'
        '[query.retrieve]\nuse = "pgvector"\n'
    )
    with pytest.raises(ConfigError, match=r'searches inside Postgres: set \[store\] use = "postgres"'):
        Job(load_job(path, registry), tmp_path / "index", Settings(progress=False), registry)


def test_a_model_change_is_refused_not_ranked(loaded: tuple[str, Path], tmp_path: Path) -> None:
    dsn, _ = loaded
    job = job_for(dsn, tmp_path, 'use = "pgvector"')
    job.store.set_meta("model", "another-model")
    try:
        from plm_core.errors import StoreError

        with pytest.raises(StoreError, match="embedded with 'another-model'"):
            job.retrieve("pod", k=3)
    finally:
        job.store.set_meta("model", "hash-16")
