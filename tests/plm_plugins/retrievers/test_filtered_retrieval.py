"""Metadata filters act inside retrieval, before the top-k cut: k hits whenever k chunks
match, and never a chunk that does not match (retrievers, a real Job, the CLI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plm_core.interfaces import Retriever
from plm_core.records import Chunk, EmbeddedQuery, ExpandedQuery, Hit, ScoredChunk
from plm_core.settings import Settings
from plm_index.cli_values import parse_filter_args
from plm_index.corpus import CorpusSnapshot
from plm_index.filters import compile_filters
from plm_index.job import Job
from plm_plugins.retrievers.dense import DenseRetriever

REPO = Path(__file__).resolve().parents[3]
N_CHUNKS = 200


def _build(retriever: Retriever, chunks: list[Chunk], vectors: Any, index_dir: Path) -> Retriever:
    """The one place that knows `build`'s signature (it grew a version argument once)."""
    retriever.build(CorpusSnapshot.of(chunks, vectors), index_dir)
    return retriever


def _mask(rows: list[int]) -> Any:
    mask = np.zeros(N_CHUNKS, dtype=bool)
    mask[rows] = True
    return mask


def _pairs(hits: list[ScoredChunk]) -> list[tuple[str, float]]:
    return [(h.chunk_id, h.score) for h in hits]


# ---------------------------------------------------------------------- retrievers
@pytest.fixture(scope="module")
def bm25(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    pytest.importorskip("bm25s")
    from plm_plugins.retrievers.bm25s import BM25Retriever

    # "alpha" in every 7th chunk, "beta" in every 11th; most chunks score 0 for "alpha beta".
    texts = [
        " ".join(["alpha"] * (i % 7 == 0) + ["beta"] * (i % 11 == 0) + [f"w{i % 13}", f"v{i % 17}", "filler"])
        for i in range(N_CHUNKS)
    ]
    chunks = [Chunk(id=f"c{i:03d}", doc_id=f"d{i}", text=t) for i, t in enumerate(texts)]
    # The POC scoring keeps zero-score chunks: every mask of k chunks yields k hits.
    bm25 = BM25Retriever(label="bm25", tokenizer="whitespace_lower", method="rank_bm25_okapi")
    return _build(bm25, chunks, None, tmp_path_factory.mktemp("bm25"))


@pytest.fixture(scope="module")
def dense(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(N_CHUNKS, 16)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    chunks = [Chunk(id=f"c{i:03d}", doc_id=f"d{i}", text=f"t{i}") for i in range(N_CHUNKS)]
    retriever = DenseRetriever(label="dense")
    return _build(retriever, chunks, matrix, tmp_path_factory.mktemp("dense"))


def _bm25_query() -> ExpandedQuery:
    return ExpandedQuery(text="alpha beta", k=10, original="alpha beta")


def _dense_query() -> EmbeddedQuery:
    vector = np.random.default_rng(1).normal(size=16).astype(np.float32)
    return EmbeddedQuery(text="q", k=10, vector=vector / np.linalg.norm(vector))


def test_bm25_mask_keeping_three_returns_exactly_those_three(bm25: Any) -> None:
    scores = bm25.scores("alpha beta")
    kept = [7, 100, 150]  # 7 has "alpha"; 100 and 150 score 0 for the query
    assert scores[7] > 0 and scores[100] == 0 and scores[150] == 0
    unfiltered = bm25.search(_bm25_query(), 10)
    assert not {"c100", "c150"} & {h.chunk_id for h in unfiltered}  # so the filter must do the work
    hits = bm25.search(_bm25_query(), 10, _mask(kept))
    assert [h.chunk_id for h in hits] == ["c007", "c150", "c100"]  # zeros last, POC tie order
    assert [h.rank for h in hits] == [0, 1, 2]


def test_dense_mask_keeping_three_returns_exactly_those_three(dense: Any) -> None:
    order = np.argsort(dense.scores(_dense_query()))
    kept = order[:3].tolist()  # the three least similar chunks: never in an unfiltered top 10
    hits = dense.search(_dense_query(), 10, _mask(kept))
    assert sorted(h.chunk_id for h in hits) == sorted(f"c{i:03d}" for i in kept)
    assert not {h.chunk_id for h in hits} & {h.chunk_id for h in dense.search(_dense_query(), 10)}


@pytest.mark.parametrize("which", ["bm25", "dense"])
def test_mask_keeping_thirty_gives_the_unfiltered_order_restricted(which: str, request: pytest.FixtureRequest) -> None:
    retriever = request.getfixturevalue(which)
    query = _bm25_query() if which == "bm25" else _dense_query()
    # In bm25: 20 "alpha" chunks and 10 others (mostly zero scores).
    kept = sorted({*range(0, N_CHUNKS, 7)[:20], *range(3, N_CHUNKS, 7)[:10]})
    assert len(kept) == 30
    allowed = _mask(kept)
    hits = retriever.search(query, 10, allowed)
    full = retriever.search(query, N_CHUNKS)
    expected = [h for h in full if allowed[int(h.chunk_id[1:])]][:10]
    assert len(hits) == 10 and _pairs(hits) == _pairs(expected)
    assert [h.rank for h in hits] == list(range(10))
    assert _pairs(retriever.search(query, 10)) != _pairs(hits)  # the mask changed the answer


# ---------------------------------------------------------------------- a real Job
DOCS: dict[str, tuple[str, str]] = {
    # id: (front matter lines, body)
    "s1": ("team: storage\nversion: 1\nupdated: 2024-01-15\ntags: [backup, db]", "Nightly backup of the database."),
    "s2": ("team: storage\nversion: 2\nupdated: 2024-03-10\ntags:\n  - backup", "Backup snapshots are kept a week."),
    "s3": ("team: storage\nversion: 3\nupdated: 2024-05-01T10:00:00\ntags: [replication]", "Replication lag alerts."),
    "s4": ("team: storage\nversion: 4\nupdated: 2024-06-20\ntags: [db]", "Disk quotas per tenant."),
    "r1": ("team: search\nversion: 1\nupdated: 2023-11-01\ntags: [index]", "Backup and replication of the index."),
    "r2": ("team: search\nversion: 2\nupdated: 2024-02-02\ntags: [index, backup]", "Restore the index from backup."),
    "r3": ("team: search\nversion: 3\nupdated: 2024-04-04\ntags: [ranking]", "Tuning the ranking function."),
    "u1": ("team: ui\nversion: 1\nupdated: 2024-05-01\ntags: [frontend]", "A button starts a backup."),
    "u2": ("team: ui\nversion: 2\nupdated: 2024-07-07\ntags: [frontend, a11y]", "Colour contrast rules."),
    "u3": ("team: ui\nversion: 5\nupdated: 2024-08-08", "Keyboard shortcuts."),
    "o1": ("version: two\nupdated: someday", "Backup replication backup replication, replication of every backup."),
    "o2": ("team: ops\nversion: 2.5\nupdated: 2024-05-01\ntags: [backup]", "Backup replication runbooks for on-call."),
}
QUERY = "backup replication"

CONFIG = """
[job]
name = "filtered_{name}"

[store]
use = "sqlite"
{embedder}
[index.load]
use = "markdown_dir"

[index.chunk]
use = "markdown_semantic"

[query.expand]
use = "dictionary"
{embed}
[query.retrieve]
use = "hybrid"
{retrievers}
[query.retrieve.fuser]
use = "rrf"
order = {order}

[query.retrieve.fuser.default]
weights = {{ {weights} }}

[query.retrieve.fuser.expanded]
weights = {{ {weights} }}
"""
RETRIEVERS = {
    "bm25": '\n[query.retrieve.retrievers.bm25]\nuse = "bm25s"\ntokenizer = "whitespace_lower"\n'
    'method = "rank_bm25_okapi"\n',
    "dense": '\n[query.retrieve.retrievers.dense]\nuse = "dense"\n',
}


def _config(tmp: Path, name: str, sources: list[str], model: str | None) -> Path:
    text = CONFIG.format(
        name=name,
        embedder=f'\n[embedder]\nuse = "sentence_transformers"\nmodel = {json.dumps(model)}\n' if model else "",
        embed='\n[query.embed]\nuse = "embed_query"\n' if model else "",
        retrievers="".join(RETRIEVERS[s] for s in sources),
        order=json.dumps(sources),
        weights=", ".join(f"{s} = 1.0" for s in sources),
    )
    path = tmp / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    for doc_id, (front, body) in DOCS.items():
        (folder / f"{doc_id}.md").write_text(
            f"---\ntitle: {doc_id.upper()}\n{front}\n---\n# {doc_id.upper()}\n\n{body}\n"
        )
    return folder


@pytest.fixture(
    scope="module",
    params=[
        "bm25",
        pytest.param("dense", marks=pytest.mark.slow),
        pytest.param("hybrid", marks=pytest.mark.slow),
    ],
)
def job(request: pytest.FixtureRequest, corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    name: str = request.param
    sources = {"bm25": ["bm25"], "dense": ["dense"], "hybrid": ["dense", "bm25"]}[name]
    model = request.getfixturevalue("minilm_path") if "dense" in sources else None
    tmp = tmp_path_factory.mktemp(f"job_{name}")
    config = _config(tmp, name, sources, model)
    built = Job.from_config(config, index_dir=tmp / "index", settings=Settings(progress=False))
    report = built.ingest([corpus])
    assert report.chunks == len(DOCS)  # one chunk per document: hit counts are document counts
    yield built
    built.close()


def _docs(hits: list[Hit]) -> list[str]:
    return [h.doc_id for h in hits]


def _matching(filters: dict[str, Any], job: Any) -> set[str]:
    """The documents whose stored chunk metadata passes `filters` (the test's own oracle)."""
    predicate = compile_filters(filters)
    assert predicate is not None
    return {c.doc_id for c in job.store.chunks() if predicate(c.metadata)}


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"team": "storage"}, {"s1", "s2", "s3", "s4"}),  # s4 has no query word at all
        ({"tags": "backup"}, {"s1", "s2", "r2", "o2"}),  # list contains
        ({"tags": {"in": ["index", "frontend"]}}, {"r1", "r2", "u1", "u2"}),
        ({"version": {"gte": 2, "lt": 4}}, {"s2", "s3", "r2", "r3", "u2", "o2"}),  # "two" is no number
        ({"updated": {"gte": "2024-05-01", "lt": "2024-07-01"}}, {"s3", "s4", "u1", "o2"}),  # s3: a datetime
        ({"team": "storage", "version": {"gte": 3}}, {"s3", "s4"}),
        ({"team": {"ne": "storage"}, "updated": {"lt": "2024-05-01"}}, {"r1", "r2", "r3"}),  # o1: no team
        (parse_filter_args(["updated>=2024-05-01", "updated<2024-07-01"]), {"s3", "s4", "u1", "o2"}),
    ],
)
def test_filtered_job_returns_exactly_k_matching_hits(job: Any, filters: dict[str, Any], expected: set[str]) -> None:
    assert _matching(filters, job) == expected  # the fixture corpus is what the case says
    for k in (3, len(expected), len(DOCS)):
        hits = job.retrieve(QUERY, k=k, filters=filters)
        assert len(hits) == min(k, len(expected)), (k, _docs(hits))
        assert set(_docs(hits)) <= expected
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1))  # hits count from 1
    # Unfiltered, the same query at the same k brings documents the filter keeps out.
    unfiltered = job.retrieve(QUERY, k=len(expected))
    assert set(_docs(unfiltered)) - expected


def test_filter_on_the_loader_path(job: Any, corpus: Path) -> None:
    path = (corpus / "u2.md").as_posix()
    assert _docs(job.retrieve(QUERY, k=5, filters={"path": path})) == ["u2"]
    assert _docs(job.retrieve(QUERY, k=5, filters={"title": {"in": ["U3", "S4"]}})) in (["u3", "s4"], ["s4", "u3"])


def test_no_matching_chunk_gives_no_hits(job: Any) -> None:
    assert job.retrieve(QUERY, k=5, filters={"team": "nobody"}) == []
    assert job.retrieve(QUERY, k=5, filters={"version": {"gt": 100}}) == []


def test_filtered_hits_keep_their_scores_order(job: Any) -> None:
    hits = job.retrieve(QUERY, k=5, filters={"team": {"in": ["storage", "search"]}})
    assert len(hits) == 5 and hits == sorted(hits, key=lambda h: -h.score)
    assert all(h.metadata["team"] in ("storage", "search") for h in hits)


def test_masks_are_cached_per_spec_and_dropped_on_reload(job: Any) -> None:
    corpus = job.searcher.corpus
    job.retrieve(QUERY, k=3, filters={"team": "ui"})
    first = corpus.allowed({"team": {"eq": "ui"}})  # same spec, other spelling: the cached mask
    assert first[0] is corpus.allowed({"team": "ui"})[0]
    assert int(first[1]) == 3 and not first[0].flags.writeable
    job.searcher.version = None  # what a new corpus version does: the next query reloads the rows
    job.retrieve(QUERY, k=3)
    assert corpus.allowed({"team": "ui"})[0] is not first[0]


def test_bad_filters_are_user_errors(job: Any) -> None:
    from plm_core.errors import PlmUserError

    with pytest.raises(PlmUserError, match="'version'.*unknown operator"):
        job.retrieve(QUERY, k=3, filters={"version": {"from": 1}})


def test_cli_query_filter_returns_only_matching_hits(job: Any) -> None:
    if job.config.job.name != "filtered_bm25":
        pytest.skip("one CLI run is enough")
    env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1"}

    def plm(*filters: str, as_json: bool = True) -> subprocess.CompletedProcess[str]:
        args = ["query", QUERY, "-k", "3", *(["--json"] if as_json else [])]
        args += ["--config", str(job.config.path), "--index", str(job.index_dir)]
        for f in filters:
            args += ["--filter", f]
        cmd = [sys.executable, "-m", "plm_index.cli", *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)

    res = plm("team=storage")
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert out["filters"] == {"team": "storage"}
    assert len(out["hits"]) == 3
    assert all(h["doc_id"].startswith("s") and h["metadata"]["team"] == "storage" for h in out["hits"])
    res = plm("version=>2")
    message = " ".join(res.stderr.split())  # rich wraps long lines
    assert res.returncode == 2 and "--filter team=storage" in message and "Traceback" not in message
    # No hit under a filter: the line says so, and names the rule that surprises (a chunk
    # without the field never matches, != included).
    res = plm("team=nobody", as_json=False)
    assert res.returncode == 0, res.stderr[-2000:]
    assert " ".join(res.stdout.split()) == (
        'no match: no chunk matches the filters {"team": "nobody"} '
        "(a chunk without a filtered field never matches, != included)"
    )
