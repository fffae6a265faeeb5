"""The contract pages (docs/contracts/, one per family) are what docs/contracts.py makes
from the family bases now; every example on them is a class its base accepts, and those the
kit can check keep their contract; the face and the hand-written docs list the same
methods as the code."""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest

import plm

REPO = Path(__file__).resolve().parents[1]


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("plm_docs_contracts", REPO / "docs" / "contracts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


contracts = _generator()


def test_the_pages_are_what_the_code_makes_now() -> None:
    made = contracts.pages()
    on_disk = {p.name: p.read_text() for p in (REPO / "docs" / "contracts").glob("*.md")}
    assert sorted(on_disk) == sorted(made), "run: python docs/contracts.py"
    for name, text in made.items():
        assert on_disk[name] == text, f"docs/contracts/{name} is stale: run python docs/contracts.py"


def test_every_family_base_and_part_has_a_docstring_and_a_page() -> None:
    for base, parts in contracts.families():
        for cls in (base, *parts):
            assert inspect.getdoc(cls) and cls.__doc__, f"{cls.__name__} has no docstring"
        assert (REPO / "docs" / "contracts" / f"{base.family}.md").is_file()
        assert base.__name__ in plm.__all__ and base.__name__ in (plm.__doc__ or ""), base.__name__


def test_a_page_lists_every_abstract_method_with_its_signature() -> None:
    from plm_core.component import signature

    for base, parts in contracts.families():
        text = (REPO / "docs" / "contracts" / f"{base.family}.md").read_text()
        for cls in (base, *parts):
            for name in getattr(cls, "__abstractmethods__", ()):
                if name in vars(cls):
                    assert signature(cls, name).rsplit(" (from ", 1)[0] in text, (base.family, name)


def test_every_base_has_a_slot_and_an_example() -> None:
    names = {base.__name__ for base, _ in contracts.families()}
    assert set(contracts.SLOTS) == set(contracts.EXAMPLES) == names
    assert set(contracts.CHECKS) <= names


@pytest.mark.parametrize("base", sorted(contracts.EXAMPLES))
def test_every_example_is_a_class_its_base_accepts(base: str, tmp_path: Path) -> None:
    import plm.testing

    space: dict[str, Any] = {}
    exec(compile(contracts.EXAMPLE_IMPORTS + contracts.EXAMPLES[base], f"<{base} example>", "exec"), space)
    made: list[Any] = [v for v in space.values() if isinstance(v, type) and "name" in vars(v)]
    if base == "Store":  # a test function, not a class
        assert callable(space["test_my_store_keeps_the_store_contract"])
        return
    (cls,) = made
    assert issubclass(cls, getattr(plm, base))
    if base == "Tokenizer":
        plm.testing.check_tokenizer(cls(), different=cls(lower=False))
    elif base == "Retriever":
        plm.testing.check_retriever(cls, tmp_path)
    elif base == "Fuser":
        plm.testing.check_fuser(cls())
    elif base == "QueryGenerator":
        plm.testing.check_query_generator(cls())
    else:
        _run_example(base, cls(), tmp_path)
        _check_example(base, cls, tmp_path)


def _check_example(base: str, cls: type, tmp_path: Path) -> None:
    """Each example passes its family's conformance check, the one its page names."""
    import plm.testing

    if base == "Loader":
        for i, text in enumerate(["a pod", "a node", "a service"]):
            (tmp_path / f"doc{i}.txt").write_text(text)
        plm.testing.check_loader(cls(), tmp_path)
    elif base == "Converter":
        plm.testing.check_converter(cls(), b"species,speed\nsloth,slow\n", unusable=b"")
    elif base == "Retrieval":
        from plm_plugins.retrievers.dense import DenseRetriever

        plm.testing.check_retrieval(cls(retrievers={"dense": DenseRetriever()}))
    else:
        check = plm.testing.CHECKS[getattr(plm, base).family]
        check(cls())


def _run_example(base: str, stage: Any, tmp_path: Path) -> None:
    """The examples the kit has no check for, run once on a small input."""
    ranking = plm.Ranking(
        plm.ExpandedQuery(text="q", k=2),
        (plm.Hit("a", "d", 2.0, 1, text="a long text here"), plm.Hit("b", "d", 1.995, 2, text="short")),
    )
    if base == "Loader":
        (tmp_path / "one.txt").write_text("hello")
        assert [d.id for d in stage.run(str(tmp_path))] == ["one"]
    elif base == "Converter":
        converted = stage.convert(b"species,speed\nsloth,slow", "a.csv")
        assert (converted.title, converted.text) == ("species", "species | speed\nsloth | slow")
    elif base == "Chunker":
        chunks = stage.run([plm.Document(id="d", text="one\n\ntwo")])
        assert [(c.id, c.text) for c in chunks] == [("d#0", "one"), ("d#1", "two")]
    elif base == "ChunkTransform":
        assert stage.run([plm.Chunk(id="c", doc_id="d", text="Hello world")])[0].keywords == ("Hello",)
    elif base == "Embedder":
        assert stage.embed(["a b", "c"]).shape == (2, 3) and stage.model_name == "shape-v1"
    elif base == "QueryExpander":
        assert stage.run(plm.Query(text="k8s pods")).text == "k8s pods kubernetes"
    elif base == "RankingStage":
        assert [h.chunk_id for h in stage.run(ranking).hits] == ["a", "b"]
    elif base == "Reranker":
        assert [h.chunk_id for h in stage.run(ranking).hits] == ["b", "a"] and stage.depth(5) == 20
    elif base == "Retrieval":

        class Fixed:  # a retriever's search: these chunk ids, best first
            def __init__(self, *ids: str) -> None:
                self.ids = ids

            def search(self, query: Any, n: int, allowed: Any = None) -> list[plm.ScoredChunk]:
                return [plm.ScoredChunk(c, 1.0 / (r + 1), "x", r) for r, c in enumerate(self.ids[:n])]

        class Rows:  # the Corpus the runtime hands the stage: every row allowed, hits by id
            def allowed(self, filters: Any) -> tuple[Any, int]:
                return None, 4

            def hits(self, ranked: Any, sources: Any) -> tuple[plm.Hit, ...]:
                return tuple(plm.Hit(s.chunk_id, "d", s.score, s.rank + 1) for s in ranked)

        stage.retrievers, stage.corpus = {"a": Fixed("p", "q", "r"), "b": Fixed("q", "s")}, Rows()
        ranking = stage.run(plm.ExpandedQuery(text="q", k=3, depth=3))
        assert [h.chunk_id for h in ranking.hits] == ["p", "q", "s"]
    elif base == "Executor":

        class Local:
            def process(self, batch: Any, read_cache: bool = True) -> Any:
                return len(batch)

        assert list(stage.process([[1, 2], [3]], Local(), None, True)) == [2, 1]
    elif base == "Evaluator":

        class Qset:  # a plm_eval QuerySet: its name, queries and qrels
            name, queries, qrels = "t", {"q1": "a", "q2": "b"}, {"q1": {"d1": 1}, "q2": {"d9": 1}}

        class Job:  # what an evaluator searches: d1 first whatever the query
            def search(self, query: plm.Query) -> tuple[plm.Ranking, dict[str, float]]:
                return plm.Ranking(plm.ExpandedQuery.of(query), (plm.Hit("d1#0", "d1", 1.0, 1),)), {}

        report = stage.evaluate(Job(), Qset())
        assert report["metrics"] == {"Hit@1": 0.5} and stage.metric_names() == ["Hit@1"]
    elif base == "Reporter":
        runs = [("a", {"sets": [{"set": "t", "metrics": {"m": 1.0}}]}), ("b", {"sets": [{"set": "t", "metrics": {}}]})]
        comparison = stage.compare(runs)
        assert json.loads(stage.write(comparison, tmp_path / "out")["means"].read_text()) == comparison
    else:
        raise AssertionError(f"no run for the {base} example")


# What each base declares abstract, wherever the docs list a plugin's methods for it.
LISTED = {"SegmentedIndex": plm.SegmentedIndex, "SavedIndex": plm.SavedIndex}


@pytest.mark.parametrize(
    "where", ["plm/__init__.py", "docs/plugins.md", "docs/architecture.md", "docs/scale.md", "docs/index.md"]
)
def test_the_face_and_the_docs_name_every_method_a_segmented_or_saved_index_writes(where: str) -> None:
    text = (REPO / where).read_text()
    for base_name, base in LISTED.items():
        methods = sorted(base.__abstractmethods__ - plm.Index.__abstractmethods__)
        telling = [m for m in methods if "_" in m]  # `index` or `save` alone may mean something else
        for mention in re.finditer(r"`(" + "|".join(telling) + r")[`(]", text):
            around = text[max(0, mention.start() - 400) : mention.end() + 400]
            missing = [m for m in methods if f"`{m}" not in around]
            assert not missing, f"{where}: a list of {base_name}'s methods leaves out {missing}: {around!r}"
