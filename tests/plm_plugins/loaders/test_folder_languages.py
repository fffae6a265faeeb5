"""A folder in several languages, as a translated team's docs are: each document carries the
language it is written in (its own `lang` wins), a filter narrows to one, and BM25 with the
`multilingual` tokenizer finds Chinese, Japanese, German and Russian prose by its own words."""

from __future__ import annotations

from pathlib import Path

import pytest
from plm_needs import needs

import plm

pytestmark = needs("py3langid", "Stemmer", extra="languages")

CONFIG = """
[job]
name = "languages"
[store]
use = "sqlite"
[index.load]
use = "folder"
language = "{language}"
[index.chunk]
use = "markdown_semantic"
headings = "commonmark"
words = "script"
[query.retrieve]
use = "bm25s"
tokenizer = "{tokenizer}"
"""

PAGES = {
    "zh/storage.md": "# 持久卷\n\n持久卷是集群中的一块存储，可以由管理员事先制备，或者使用存储类来动态制备。\n",
    "ja/storage.md": "# 永続ボリューム\n\n永続ボリュームは、管理者によって事前にプロビジョニングされた"
    "クラスター内のストレージです。\n",
    "de/network.md": "# Netzwerkrichtlinien\n\nNetzwerkrichtlinien legen fest, wie Gruppen von Pods "
    "miteinander kommunizieren dürfen.\n",
    "ru/network.md": "# Сетевые политики\n\nСетевые политики определяют, как группы подов могут "
    "взаимодействовать друг с другом.\n",
    "en/network.md": "# Network policies\n\nNetwork policies specify how groups of pods are allowed to communicate.\n",
    "notes.md": "---\nlang: fr\n---\n# Notes\n\nA page in English that says it is French.\n",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    for name, text in PAGES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def job_for(tmp_path: Path, language: str = "auto", tokenizer: str = "multilingual") -> plm.Job:
    config = tmp_path / f"{language}-{tokenizer}.toml"
    config.write_text(CONFIG.format(language=language, tokenizer=tokenizer))
    return plm.Job.from_config(config, index_dir=tmp_path / f"index-{language}-{tokenizer}")


def test_each_document_carries_its_language_and_a_filter_narrows_to_it(folder: Path, tmp_path: Path) -> None:
    job = job_for(tmp_path)
    job.ingest([folder])
    languages = {
        h.doc_id: h.metadata.get("language")
        for h in job.retrieve("pods 持久卷 永続 Netzwerkrichtlinien политики notes", k=10)
    }
    assert languages == {
        "zh/storage": "zh", "ja/storage": "ja", "de/network": "de", "ru/network": "ru", "en/network": "en",
        "notes": "fr",
    }  # fmt: skip
    assert [h.doc_id for h in job.retrieve("pods", k=5, filters={"language": "en"})] == ["en/network"]
    job.close()


@pytest.mark.parametrize(
    ("query", "expected"),
    [("存储", "zh/storage"), ("永続ボリュームとは", "ja/storage"), ("Netzwerkrichtlinie", "de/network"),
     ("сетевая политика", "ru/network")],
)  # fmt: skip
def test_a_query_finds_prose_in_its_own_language(folder: Path, tmp_path: Path, query: str, expected: str) -> None:
    job = job_for(tmp_path)
    job.ingest([folder])
    assert [h.doc_id for h in job.retrieve(query, k=1)] == [expected]
    job.close()
    english = job_for(tmp_path, tokenizer="bm25s_stem")
    english.ingest([folder])
    assert [h.doc_id for h in english.retrieve(query, k=1)] != [expected]  # what the issue met
    english.close()


def test_language_none_stores_no_language(folder: Path, tmp_path: Path) -> None:
    job = job_for(tmp_path, language="none")
    job.ingest([folder])
    hits = job.retrieve("pods", k=5)
    assert hits and all("language" not in h.metadata for h in hits)
    job.close()
