"""`snowball`: every PyStemmer language, with that language's stop words, ranking a German corpus."""

from __future__ import annotations

from pathlib import Path

import pytest
from plm_needs import needs

from plm_core.records import Chunk, CorpusVersion, ExpandedQuery
from plm_index.corpus import CorpusSnapshot

Stemmer = pytest.importorskip("Stemmer")
pytestmark = needs("bm25s", extra="bm25")
from plm_plugins.retrievers.bm25s import BM25Retriever  # noqa: E402
from plm_plugins.tokenizers.bm25s_stem import BM25sStemTokenizer  # noqa: E402
from plm_plugins.tokenizers.snowball import Language, SnowballTokenizer  # noqa: E402

REPO = Path(__file__).resolve().parents[3]

# The relevant page says "Speicherplätze" (plural, umlaut); the question asks for
# "Speicherplatz". The distractor is all German function words ("wie", "die", "und", "der").
GERMAN = [
    "Der Cluster hat zu wenig Speicherplätze für neue Volumes.",
    "Wie die Knoten und die Pods verbunden werden, und wie der Dienst die Anfragen an die Pods verteilt.",
    "Die Zertifikate werden jedes Jahr erneuert.",
    "Ein Knoten wird neu gestartet, wenn das Kubelet nicht antwortet.",
]
QUESTION = "Wie viel Speicherplatz ist noch frei?"


def _ranked(tmp_path: Path, tokenizer: object) -> list[str]:
    chunks = [Chunk(id=f"c{i}", doc_id=f"d{i}", text=t) for i, t in enumerate(GERMAN)]
    retriever = BM25Retriever(label="bm25", tokenizer=tokenizer, method="lucene")
    retriever.build(CorpusSnapshot.of(chunks, version=CorpusVersion("", 0)), tmp_path)
    return [h.chunk_id for h in retriever.search(ExpandedQuery(text=QUESTION, k=4), 4)]


def test_german_stemming_and_stop_words_find_the_inflected_form(tmp_path: Path) -> None:
    german = _ranked(tmp_path / "de", {"use": "snowball", "language": "german"})
    assert german == ["c0"]  # Speicherplatz = Speicherplätze; "wie", "ist" are stop words
    english = _ranked(tmp_path / "en", "bm25s_stem")
    assert "c0" not in english  # English stemming keeps "speicherplätz" apart from "speicherplatz"
    assert english[0] == "c1"  # and German function words still count
    assert _ranked(tmp_path / "en2", {"use": "snowball", "language": "english"}) == english


def test_german_tokens() -> None:
    tokens = SnowballTokenizer(language="german").tokenize(["Die Speicherplätze und der Speicherplatz", ""])
    assert tokens == [["speicherplatz", "speicherplatz"], []]
    kept = SnowballTokenizer(language="german", stopwords=False).tokenize(["Die Häuser"])
    assert kept == [["die", "haus"]]
    own = SnowballTokenizer(language="german", stopwords=["Häuser"]).tokenize(["Die Häuser"])
    assert own == [["die"]]


def test_every_pystemmer_language_is_offered_and_tokenizes() -> None:
    languages = set(Language.__args__)  # type: ignore[attr-defined]
    assert languages == set(Stemmer.algorithms())
    for language in sorted(languages):
        assert SnowballTokenizer(language=language).tokenize(["Kubernetes nodes 2024"])[0], language


def test_english_gives_bm25s_stem_tokens_on_the_sample_corpus() -> None:
    import bm25s

    texts = [p.read_text() for p in sorted((REPO / "examples" / "sample_corpus" / "docs").glob("*.md"))]
    texts += ["", "a I", "Straße ÉTÉ naïve_case x2 2x __init__ Ünïcödé 42 running's", "The Pods are running"]
    assert len(texts) >= 10
    own = bm25s.tokenize(
        texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), return_ids=False, show_progress=False
    )
    assert BM25sStemTokenizer().tokenize(texts) == [list(t) for t in own]  # bm25s's steps, written out
    assert BM25sStemTokenizer().tokenize(texts[-1:]) == [["pod", "run"]]
    assert SnowballTokenizer().tokenize(texts) == BM25sStemTokenizer().tokenize(texts)


def test_identity_names_the_stop_words() -> None:
    de, en = SnowballTokenizer(language="german"), SnowballTokenizer(language="english")
    assert de.identity["name"] == "snowball" and de.identity["language"] == "german"
    assert de.identity["stopwords_sha256"] != en.identity["stopwords_sha256"]
    assert (
        SnowballTokenizer(language="finnish").identity["stopwords_sha256"]
        == (SnowballTokenizer(language="german", stopwords=False).identity["stopwords_sha256"])
    )  # no list in bm25s for Finnish: none


ASCII_TEXT = (
    "".join(chr(i) for i in range(128)) + "The Pods are RUNNING; kubectl get pods -n kube_system (v1.2.3) it's a_b x"
)


@pytest.mark.parametrize("language", ["english", "german"])
def test_ascii_texts_give_the_patterns_words(language: str) -> None:
    """ASCII texts skip the regular expression (`translate` and `split`): the same tokens as
    the pattern gives, on every ASCII character and on texts mixing the two paths."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from plm_plugins.tokenizers.snowball import WORD, stemmed_words, stemmer_for, stopwords_for

    stop, stem = stopwords_for(language, True), stemmer_for(language)

    def by_pattern(texts: list[str]) -> list[list[str]]:
        return [[stem([w])[0] for w in WORD.findall(t.lower()) if w not in stop] for t in texts]

    fixed = [ASCII_TEXT, ASCII_TEXT.upper(), "", "a b c", "naïve ÀB café_au_lait", "x" * 3 + "\x1f" + "yy"]
    assert stemmed_words(fixed, stop, stem) == by_pattern(fixed)

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.text(alphabet=st.characters(max_codepoint=300), max_size=60), max_size=5))
    def same(texts: list[str]) -> None:
        assert stemmed_words(texts, stop, stem) == by_pattern(texts)

    same()
