"""`language_route`: a query the dense model cannot read gets the fuser's other profile, and
in a hybrid recipe it is ranked as BM25 alone ranks it."""

from __future__ import annotations

import pytest
from plm_needs import needs

from plm import Query
from plm_plugins.expanders.language_route import LanguageRouteExpander

pytestmark = needs("py3langid", extra="languages")


@pytest.mark.parametrize(
    ("text", "profile"),
    [("How do I declare a path parameter with a type?", ""), ("path parameters", ""),
     ("如何声明带类型的路径参数？", "other_language"),
     ("Wie deklariere ich einen Pfadparameter mit Typ?", "other_language"),
     ("Как объявить параметр пути с типом?", "other_language")],
)  # fmt: skip
def test_a_query_outside_the_models_languages_gets_the_other_profile(text: str, profile: str) -> None:
    out = LanguageRouteExpander().run(Query(text=text, k=3))
    assert (out.text, out.profile, out.k) == (text, profile, 3)


def test_the_served_languages_and_the_profile_are_the_configs() -> None:
    expander = LanguageRouteExpander(languages=["en", "de"], profile="bm25_only")
    assert expander.run(Query(text="Wie deklariere ich einen Pfadparameter mit Typ?")).profile == ""
    assert expander.run(Query(text="如何声明带类型的路径参数？")).profile == "bm25_only"


HYBRID = """
[job]
name = "route"
[store]
use = "sqlite"
[embedder]
use = "hashed_words"
dim = 16
[index.load]
use = "folder"
[index.chunk]
use = "markdown_semantic"
words = "script"
[query.expand]
use = "{expand}"
[query.retrieve]
use = "hybrid"
[query.retrieve.retrievers.dense]
use = "dense"
[query.retrieve.retrievers.bm25]
use = "bm25s"
tokenizer = "multilingual"
[query.retrieve.fuser]
use = "rrf"
order = ["bm25", "dense"]
[query.retrieve.fuser.default]
k = 10
[query.retrieve.fuser.profiles.other_language]
k = 10
weights = {{ dense = 0.0, bm25 = 1.0 }}
"""


def test_a_routed_query_is_ranked_as_bm25_alone_ranks_it(tmp_path: pytest.TempPathFactory) -> None:
    from pathlib import Path

    import plm

    pytest.importorskip("plm_example_plugin", reason="the example plugin (hashed_words) is not installed")
    root = Path(str(tmp_path))
    docs = root / "docs"
    docs.mkdir()
    pages = [
        "持久卷是集群中的一块存储。", "存储类描述存储的类别。", "网络策略规定容器组之间的通信。",
        "调度器为容器组选择节点。", "Storage classes describe kinds of storage.", "A volume is a directory of storage.",
    ]  # fmt: skip
    for i, text in enumerate(pages):
        (docs / f"p{i}.md").write_text(f"# p{i}\n\n{text}\n")
    ranked = {}
    for expand in ("language_route", "none"):
        (root / f"{expand}.toml").write_text(HYBRID.format(expand=expand))
        job = plm.Job.from_config(root / f"{expand}.toml", index_dir=root / f"index-{expand}")
        job.ingest([docs])
        ranked[expand] = [(h.doc_id, h.sources) for h in job.retrieve("存储的类别", k=6)]
        job.close()
    routed = [doc for doc, sources in ranked["language_route"] if "bm25" in sources]
    assert routed[:2] == ["p1", "p0"]  # BM25's order: the page with most of the query's pairs first
    assert [doc for doc, _ in ranked["language_route"]][: len(routed)] == routed  # every BM25 hit before the rest
    bm25_ranks = [sources["bm25"]["rank"] for _, sources in ranked["language_route"] if "bm25" in sources]
    assert bm25_ranks == list(range(1, len(bm25_ranks) + 1))  # in BM25's own order, dense never reorders
