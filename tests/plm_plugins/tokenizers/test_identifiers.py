"""`identifiers`: names are indexed whole and by their parts, in documents and in queries."""

from __future__ import annotations

from pathlib import Path

import pytest
from plm_needs import needs

from plm_core.records import Chunk, CorpusVersion, ExpandedQuery
from plm_index.corpus import CorpusSnapshot

pytestmark = needs("Stemmer", "bm25s", extra="bm25")
from plm_plugins.retrievers.bm25s import BM25Retriever  # noqa: E402
from plm_plugins.tokenizers.identifiers import IdentifierTokenizer  # noqa: E402

EXACT = IdentifierTokenizer()  # no stemming, no stop words: the defaults


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("PodDisruptionBudget", ["poddisruptionbudget", "pod", "disruption", "budget"]),
        ("maxSurge", ["maxsurge", "max", "surge"]),
        ("max_surge", ["max_surge", "max", "surge"]),
        ("kube-apiserver", ["kube-apiserver", "kube", "apiserver"]),
        ("kubectl.kubernetes.io", ["kubectl.kubernetes.io", "kubectl", "kubernetes", "io"]),
        ("apps/v1", ["apps/v1", "apps", "v1"]),
        ("HTTPServer", ["httpserver", "http", "server"]),
        ("spec.maxUnavailable", ["spec.maxunavailable", "spec", "maxunavailable", "max", "unavailable"]),
        ("the pod, the node.", ["the", "pod", "the", "node"]),
    ],
)
def test_names_are_split_and_kept_whole(text: str, tokens: list[str]) -> None:
    assert EXACT.tokenize([text]) == [tokens]


def test_settings_stem_drop_stop_words_and_whole_names() -> None:
    assert IdentifierTokenizer().tokenize(["The PodDisruptionBudgets"]) == [
        ["the", "poddisruptionbudgets", "pod", "disruption", "budgets"]
    ]  # defaults (chosen on poc_needle's informed set): no stemming, no stop words
    stemmed = IdentifierTokenizer(stem=True, stopwords=True)
    assert stemmed.tokenize(["The PodDisruptionBudgets"]) == [["poddisruptionbudget", "pod", "disrupt", "budget"]]
    parts_only = IdentifierTokenizer(stem=False, stopwords=False, keep_whole=False)
    assert parts_only.tokenize(["PodDisruptionBudget pod"]) == [["pod", "disruption", "budget", "pod"]]
    assert IdentifierTokenizer(min_length=4).tokenize(["a maxSurge of 25"]) == [["maxsurge", "surge"]]


TEXTS = [
    "Create a PodDisruptionBudget for the application.",
    "Set spec.maxUnavailable on the Deployment.",
    "The pod is pending on the node.",
    "Budget planning for the team.",
]


def _ranked(tmp_path: Path, tokenizer: str, query: str) -> list[str]:
    chunks = [Chunk(id=f"c{i}", doc_id=f"d{i}", text=t) for i, t in enumerate(TEXTS)]
    retriever = BM25Retriever(label="bm25", tokenizer=tokenizer, method="lucene")
    retriever.build(CorpusSnapshot.of(chunks, version=CorpusVersion("", 0)), tmp_path)
    return [h.chunk_id for h in retriever.search(ExpandedQuery(text=query, k=4), 4)]


def test_queries_get_the_same_treatment(tmp_path: Path) -> None:
    assert _ranked(tmp_path / "a", "identifiers", "pod disruption budget")[0] == "c0"
    assert "c0" not in _ranked(tmp_path / "b", "bm25s_stem", "pod disruption budget")
    assert _ranked(tmp_path / "c", "identifiers", "max unavailable")[0] == "c1"
    assert _ranked(tmp_path / "d", "bm25s_stem", "max unavailable") == []
    # the exact name ranks its page first, above pages that share one of its words
    assert _ranked(tmp_path / "e", "identifiers", "PodDisruptionBudget") == ["c0", "c3", "c2"]
