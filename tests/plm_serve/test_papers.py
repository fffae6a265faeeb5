"""The papers use case: configs/papers.toml over examples/papers/papers.json (41 invented
papers). The loader test needs no model; the search tests load MiniLM (packaged, offline)
once for the module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plm_core.settings import Settings
from plm_index.job import Job

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "papers.toml"
PAPERS = REPO / "examples" / "papers" / "papers.json"
RECORDS = json.loads(PAPERS.read_text())
BY_ID = {p["paper_id"]: p for p in RECORDS}

# A query in other words than the paper's, and the paper it is about.
TOPICS = [
    ("keeping learned row count estimators accurate when tables change", "db-001"),
    ("which genes make bacteria in sewage resistant to antibiotics", "bio-006"),
    ("Cas9 cutting the genome at the wrong place", "bio-001"),
    ("when does combining BM25 and dense rankings improve results", "ir-002"),
    ("do translation systems follow gender stereotypes for jobs", "nlp-006"),
    ("how far do bees fly to find flowers", "bio-008"),
]


def new_job(tmp: Path, overrides: list[str] | None = None) -> Job:
    """The shipped config over an index (and content cache) of this test's own."""
    settings = Settings(progress=False, offline=True, data_dir=str(tmp / "data"))
    return Job.from_config(CONFIG, overrides or [], index_dir=tmp / "index", settings=settings)


def test_sample_papers_are_well_formed() -> None:
    assert len(RECORDS) >= 40 and len(BY_ID) == len(RECORDS)
    assert len({p["bibtex_key"] for p in RECORDS}) == len(RECORDS)
    for p in RECORDS:
        assert {"paper_id", "title", "abstract", "authors", "year", "bibtex_key"} <= set(p), p["paper_id"]
        assert isinstance(p["authors"], list) and p["authors"] and isinstance(p["year"], int)


def test_json_records_reads_papers_as_configured(tmp_path: Path) -> None:
    """paper_id is the id, title + abstract the text, every other field metadata."""
    loader = new_job(tmp_path).loader
    assert loader is not None
    docs, failures = loader.load(str(PAPERS))
    assert failures == [] and [d.id for d in docs] == list(BY_ID)
    doc = docs[0]
    paper = BY_ID[doc.id]
    assert doc.title == paper["title"]
    assert doc.text == f"{paper['title']}\n\n{paper['abstract']}"
    assert dict(doc.metadata) == {k: v for k, v in paper.items() if k not in ("paper_id", "title", "abstract")}
    assert {"authors", "year", "bibtex_key", "venue", "doi"} <= set(doc.metadata)


@pytest.fixture(scope="module")
def papers_job(tmp_path_factory: pytest.TempPathFactory) -> Job:
    job = new_job(tmp_path_factory.mktemp("papers"))
    report = job.ingest([PAPERS])
    assert report.failed == [] and report.documents == len(RECORDS)
    return job


@pytest.mark.slow
def test_one_chunk_per_paper(papers_job: Job) -> None:
    stats = papers_job.store.stats()
    assert stats["documents"] == stats["chunks"] == stats["vectors"] == len(RECORDS)
    assert stats["model"] == "all-MiniLM-L6-v2"


@pytest.mark.slow
@pytest.mark.parametrize(("query", "paper_id"), TOPICS)
def test_a_topic_finds_its_paper_first(papers_job: Job, query: str, paper_id: str) -> None:
    hits = papers_job.retrieve(query, k=5)
    assert [h.doc_id for h in hits][0] == paper_id, [(h.doc_id, round(h.score, 3)) for h in hits]


@pytest.mark.slow
def test_hits_carry_the_paper_fields(papers_job: Job) -> None:
    hits = papers_job.retrieve("Cas9 cutting the genome at the wrong place", k=10)
    assert len(hits) == 10 and len({h.doc_id for h in hits}) == 10  # one hit per paper
    for hit in hits:
        paper = BY_ID[hit.doc_id]
        data = hit.as_dict()
        assert data["title"] == paper["title"]
        for key in ("authors", "year", "bibtex_key", "title"):
            assert data["metadata"][key] == paper[key]
        assert data["metadata"].get("doi") == paper.get("doi")
        # The score is (1 + cosine) / 2 (score = "unit" in the config): in [0, 1], best first.
        assert 0.0 <= hit.score <= 1.0 and hit.sources["retrieve"]["score"] == hit.score
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].score > 0.65


@pytest.mark.slow
def test_filters_on_paper_fields(papers_job: Job) -> None:
    hits = papers_job.retrieve("retrieval", k=50, filters={"year": {"gte": 2023}, "authors": "Dmitri Sokol"})
    assert [h.doc_id for h in hits] == ["ir-003"]
    recent = papers_job.retrieve("databases", k=50, filters={"venue": {"in": ["VLDB", "SIGMOD"]}})
    assert {h.doc_id for h in recent} == {p["paper_id"] for p in RECORDS if p.get("venue") in ("VLDB", "SIGMOD")}


@pytest.mark.slow
def test_scores_in_unit_interval(tmp_path: Path) -> None:
    job = new_job(tmp_path)
    job.ingest([PAPERS])
    hits = job.retrieve("a query about nothing in particular", k=len(RECORDS))
    assert len(hits) == len(RECORDS)
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    cosine = new_job(tmp_path, ['query.retrieve.score="cosine"']).retrieve(
        "a query about nothing in particular", k=len(RECORDS)
    )
    assert [h.doc_id for h in hits] == [h.doc_id for h in cosine]
    assert hits[0].score == pytest.approx((1 + cosine[0].score) / 2, abs=1e-6)
