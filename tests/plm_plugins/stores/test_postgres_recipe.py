"""A real recipe moved to Postgres by swapping its [store] table, and nothing else: the
SciFact RRF config (MiniLM, bm25s, dense, RRF) gives the same hits over both stores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from plm_needs import needs

from plm_core.settings import Settings
from plm_index.job import Job

pytestmark = [pytest.mark.slow, needs("psycopg", extra="postgres")]

REPO = Path(__file__).resolve().parents[3]
TOPICS = ["protein folding", "gene expression", "vaccine trials", "sleep apnea", "gut microbiome"]


def beir_corpus(folder: Path) -> Path:
    folder.mkdir()
    with (folder / "corpus.jsonl").open("w") as fh:
        for i in range(40):
            topic = TOPICS[i % len(TOPICS)]
            text = f"A study of {topic} in cohort {i}. " + " ".join(
                f"Finding {j} on {topic} and marker{i + j}." for j in range(6)
            )
            fh.write(json.dumps({"_id": f"doc{i}", "title": f"{topic.title()} {i}", "text": text}) + "\n")
    return folder


def test_swapping_the_store_table_is_the_only_change(tmp_path: Path, pg_dsn: str, minilm_path: str) -> None:
    text = (REPO / "configs" / "scifact" / "rrf_no_enrichment.toml").read_text()
    assert '[store]\nuse = "sqlite"\n' in text
    swapped = text.replace('[store]\nuse = "sqlite"\n', f'[store]\nuse = "postgres"\ndsn = "{pg_dsn}"\n')
    (tmp_path / "sqlite.toml").write_text(text)
    (tmp_path / "postgres.toml").write_text(swapped)
    corpus = beir_corpus(tmp_path / "beir") / "corpus.jsonl"
    settings = Settings(progress=False, offline=True, data_dir=str(tmp_path / "data"))
    results = {}
    for name in ("sqlite", "postgres"):
        job = Job.from_config(tmp_path / f"{name}.toml", index_dir=tmp_path / f"index-{name}", settings=settings)
        report = job.ingest([corpus])
        assert report.added and not report.failed
        results[name] = [
            [(h.chunk_id, round(h.score, 6), dict(h.sources)) for h in job.retrieve(q, k=5)]
            for q in ("vaccine trials cohort 7", "what is known about sleep apnea?", "marker12")
        ]
        job.close()
    assert results["postgres"] == results["sqlite"]
    assert type(Job.from_config(tmp_path / "postgres.toml", settings=settings).store).__name__ == "PostgresStore"


def test_the_postgres_quickstart_indexes_a_markdown_folder(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`plm ingest my_docs/ --config THE_CONFIG` as the Postgres quickstart (docs/postgres.md) runs it."""
    page = (REPO / "docs" / "postgres.md").read_text()
    section = page[page.index("# A Postgres database instead of SQLite") :]
    line = next(x for x in section.splitlines() if x.startswith("plm ingest my_docs/"))
    config = REPO / line.split("--config")[1].split()[0]
    docs = tmp_path / "my_docs"
    docs.mkdir()
    (docs / "pager.md").write_text("# Pager rotation\n\nThe on-call pager moves to the next engineer every Monday.\n")
    (docs / "backups.md").write_text("# Backups\n\nSnapshots of the database are taken every night at 02:00.\n")
    monkeypatch.setenv("PLM_DATABASE_URL", pg_dsn)
    settings = Settings(progress=False, offline=True, data_dir=str(tmp_path / "data"))
    job = Job.from_config(config, settings=settings)
    try:
        report = job.ingest([docs])
        assert len(report.added) == 2 and not report.failed
        assert job.retrieve("when are database snapshots taken?", k=1)[0].doc_id == "backups"
    finally:
        job.close()


def test_a_folder_is_a_filter_on_postgres_too(tmp_path: Path, pg_dsn: str) -> None:
    """`--filter folder=...` (each folder above a file, a list in its metadata) and
    `format=...` compiled to SQL by the Postgres store, as SQLite's mask gives them."""
    docs = tmp_path / "docs"
    for name, text in {"a/x.md": "# X\n\nThe quokka of a.\n", "a/b/y.md": "# Y\n\nThe quokka of a b.\n",
                       "c/z.txt": "The quokka of c.\n"}.items():  # fmt: skip
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text)
    config = tmp_path / "pg_folder.toml"
    config.write_text(
        f'[job]\nname = "pg_folder"\n[store]\nuse = "postgres"\ndsn = "{pg_dsn}"\n[index.load]\nuse = "folder"\n'
        '[index.chunk]\nuse = "markdown_semantic"\nheadings = "commonmark"\n'
        '[query.retrieve]\nuse = "bm25s"\ntokenizer = "bm25s_stem"\n'
    )
    settings = Settings(progress=False, offline=True, data_dir=str(tmp_path / "data"))
    job = Job.from_config(config, index_dir=tmp_path / "index", settings=settings)
    assert sorted(job.ingest([docs]).added) == ["a/b/y", "a/x", "c/z.txt"]
    found = {}
    for spec in ({"folder": "a"}, {"folder": "a/b"}, {"format": "txt"}, {"folder": {"ne": "a"}}):
        found[json.dumps(spec)] = sorted(h.doc_id for h in job.retrieve("quokka", k=5, filters=spec))
    job.close()
    assert found == {
        '{"folder": "a"}': ["a/b/y", "a/x"],
        '{"folder": "a/b"}': ["a/b/y"],
        '{"format": "txt"}': ["c/z.txt"],
        '{"folder": {"ne": "a"}}': ["c/z.txt"],
    }
