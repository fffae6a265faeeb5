"""The `multilingual` tokenizer: English exactly as `bm25s_stem`, CJK runs as bigrams that
meet however a query is written, German and Russian word forms meeting, and a BM25 index
over Chinese prose answering a Chinese query (it found nothing with `bm25s_stem`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from plm_needs import needs

import plm.testing
from plm_core.records import Chunk, CorpusVersion, ExpandedQuery
from plm_plugins.tokenizers.bm25s_stem import BM25sStemTokenizer
from plm_plugins.tokenizers.multilingual import MultilingualTokenizer, bigrams

pytestmark = needs("py3langid", "Stemmer", extra="languages")

REPO = Path(__file__).resolve().parents[3]


def tokens(text: str, **config: object) -> list[str]:
    return MultilingualTokenizer(**config).tokenize([text])[0]


def test_it_keeps_the_tokenizer_contract() -> None:
    plm.testing.check_tokenizer(MultilingualTokenizer(), MultilingualTokenizer(default_language="de"))


def test_english_paragraphs_get_exactly_bm25s_stems_tokens() -> None:
    paragraphs = [
        p
        for path in sorted((REPO / "examples/sample_corpus/docs").glob("*.md"))
        for p in path.read_text().split("\n\n")
        if len(p.split()) >= 8
    ]
    assert len(paragraphs) > 20
    assert MultilingualTokenizer().tokenize(paragraphs) == BM25sStemTokenizer().tokenize(paragraphs)


def test_cjk_runs_are_bigrams_and_a_lone_character_is_itself() -> None:
    assert bigrams("持久卷") == ["持久", "久卷"]
    assert bigrams("卷") == ["卷"]
    got = tokens("持久卷是集群中的一块存储。")
    assert "持久" in got and "存储" in got and not any(len(t) > 2 for t in got)


def test_a_chinese_page_with_code_keeps_its_english_words_stemmed_as_english() -> None:
    got = tokens("在应用中使用 CORSMiddleware 来配置 dependencies。")
    assert "corsmiddlewar" in got and "depend" in got and "应用" in got


def test_hangul_is_not_paired_with_han() -> None:
    got = tokens("漢字한국어")
    assert "字한" not in got and "한국" in got and "漢字" in got


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Wie erstelle ich eine Netzwerkrichtlinie?", "Die Netzwerkrichtlinien des Clusters werden hier beschrieben."),
        ("Как настроить сетевые политики?", "Сетевая политика определяет правила для подов."),
    ],
)
def test_word_forms_of_one_word_meet(a: str, b: str) -> None:
    shared = set(tokens(a)) & set(tokens(b))
    assert shared, (tokens(a), tokens(b))


def test_stop_words_of_the_texts_language_are_dropped() -> None:
    assert "und" not in tokens("Die Pods und die Dienste des Clusters laufen auf den Knoten.")
    assert "und" in tokens("Die Pods und die Dienste des Clusters laufen auf den Knoten.", stopwords=False)


def test_a_default_language_without_a_stemmer_is_a_config_error() -> None:
    with pytest.raises(plm.ConfigError, match="default_language 'zz'"):
        MultilingualTokenizer(default_language="zz").tokenize(["x"])


CHINESE = {
    "storage": "持久卷是集群中的一块存储，可以由管理员事先制备。",
    "topology": "拓扑管理器负责协调节点上的资源分配。",
    "network": "网络策略规定了容器组之间如何通信。",
    "scheduler": "调度器会为每个新创建的容器组选择一个节点。",
}


def _ranked(tmp_path: Path, tokenizer: str, query: str) -> list[str]:
    from plm_index.corpus import CorpusSnapshot
    from plm_plugins.retrievers.bm25s import BM25Retriever

    chunks = [Chunk(id=k, doc_id=k, text=v) for k, v in CHINESE.items()]
    retriever = BM25Retriever(label="bm25", tokenizer=tokenizer, method="lucene")
    retriever.build(CorpusSnapshot.of(chunks, version=CorpusVersion("", 0)), tmp_path / tokenizer / query)
    return [h.chunk_id for h in retriever.search(ExpandedQuery(text=query, k=4), 4)]


def test_bm25_over_chinese_prose_finds_a_two_character_query(tmp_path: Path) -> None:
    assert _ranked(tmp_path, "multilingual", "存储") == ["storage"]
    assert _ranked(tmp_path, "multilingual", "拓扑在哪里") == ["topology"]
    assert _ranked(tmp_path, "bm25s_stem", "存储") == []  # a clause was one token: nothing met it


def test_hostile_text_is_tokenized_in_linear_time_without_error() -> None:
    import time

    tokenizer = MultilingualTokenizer()
    tokenizer.tokenize(["warm"])
    for text in ("存" * 1_000_000, "a" * 1_000_000, "\u0301" * 200_000, "ﬁ" * 200_000, "\U00020000ab" * 100_000):
        start = time.thread_time()
        tokens = tokenizer.tokenize([text])[0]
        assert time.thread_time() - start < 10, text[:3]
        assert isinstance(tokens, list)
    assert len(tokenizer.tokenize(["存" * 1_000])[0]) == 999  # one pair a character after the first


def test_any_unicode_is_tokens_of_the_text() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    tokenizer = MultilingualTokenizer()

    @settings(max_examples=200, deadline=None)
    @given(st.text(max_size=200))
    def same_shape(text: str) -> None:
        tokens = tokenizer.tokenize([text])[0]
        assert all(isinstance(t, str) and t and not t.isspace() for t in tokens)

    same_shape()
