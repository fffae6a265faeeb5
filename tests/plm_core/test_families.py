"""A family is its base class: what `plm plugins` lists under a family is exactly what a
slot of that family takes, for every registered stage."""

from __future__ import annotations

from pathlib import Path

import pytest

from plm.evaluation import Evaluator, QueryGenerator, Reporter
from plm_core.component import BaseComponent
from plm_core.config import build_spec
from plm_core.errors import ConfigError, PluginError
from plm_core.interfaces import (
    Chunker,
    ChunkTransform,
    Converter,
    Embedder,
    Executor,
    Fuser,
    Loader,
    QueryExpander,
    RankingStage,
    Reranker,
    Retrieval,
    Retriever,
    Store,
    Tokenizer,
)
from plm_core.registry import Registry
from plm_index.plugins import build_registry

# Every family base in the kernel; a stage's family is that of the nearest one it subclasses.
FAMILY_BASES = (
    Loader, Converter, Chunker, ChunkTransform, Embedder, Tokenizer, QueryExpander, Retrieval, Retriever, Fuser,
    RankingStage, Reranker, Executor, Store, QueryGenerator, Evaluator, Reporter,
)  # fmt: skip
# The typed slots of a config (plm_core.config.load_job, the assembly's first [index] table).
TOP_SLOTS: dict[str, type] = {"[store]": Store, "[embedder]": Embedder, "[executor]": Executor, "[index] first": Loader}


def slots(registry: Registry) -> dict[str, type]:
    """Each slot with the base it takes: the top-level ones and every part a stage declares
    (`hybrid.retrievers` takes a Retriever, `bm25s.tokenizer` a Tokenizer, ...)."""
    found = dict(TOP_SLOTS)
    for reg in registry.all():
        for key, base in getattr(reg.cls, "parts", {}).items():
            found[f"{reg.name}.{key}"] = base
    return found


def test_each_slot_takes_exactly_what_is_listed_under_its_family() -> None:
    registry = build_registry(autoload=False)
    table = slots(registry)
    assert {"hybrid.retrievers", "hybrid.fuser", "bm25s.tokenizer"} <= set(table)
    for where, base in table.items():
        taken = sorted(r.name for r in registry.all() if isinstance(r.cls, type) and issubclass(r.cls, base))
        listed = sorted(r.name for r in registry.all() if r.family == base.family)
        assert taken == listed, f"{where} ({base.__name__}, family {base.family!r})"


def test_every_stage_is_listed_under_its_base_class_family() -> None:
    for reg in build_registry(autoload=False).all():
        bases = [b for b in FAMILY_BASES if issubclass(reg.cls, b)]
        assert bases, f"{reg.name}: no family base (issue 47: evaluators were none)"
        nearest = next(b for b in bases if all(issubclass(b, other) for other in bases))
        assert reg.family == nearest.family, f"{reg.name}: listed as {reg.family!r}, a {nearest.__name__}"


def test_a_stage_cannot_rename_its_family() -> None:
    with pytest.raises(TypeError, match="a family is its base class"):

        class Keywords(ChunkTransform):  # noqa: F841 - defining it is the test
            name = "kw"
            family = "keywords"


def test_a_new_family_is_a_new_base() -> None:
    class Summarizers(BaseComponent[object, object]):
        family = "summarizers"

    class Short(Summarizers):
        name = "short"

    registry = Registry()
    registry.add(Short)
    assert [(r.family, r.name) for r in registry.all()] == [("summarizers", "short")]
    with pytest.raises(PluginError, match="a family is its base class"):
        registry.add(Short, name="other", family="fusers")


def test_hybrid_is_retrieval_and_no_retriever_slot_takes_it() -> None:
    registry = build_registry(autoload=False)
    assert registry.get("hybrid").family == "retrieval"
    table = {"use": "hybrid", "retrievers": {"inner": {"use": "hybrid"}}, "fuser": {"use": "rrf"}}
    with pytest.raises(ConfigError, match=r"'hybrid' is a retrieval component, not a retriever; use one of: .*bm25s"):
        build_spec(table, "query.retrieve", registry, Path("x.toml"))


@pytest.mark.parametrize(
    "old", ["keywords:yake", "entities:spacy_entities", "retrievers:hybrid", "embedders:embed_query"]
)
def test_a_former_family_label_still_finds_the_stage(old: str) -> None:
    family, name = old.split(":")
    reg = build_registry(autoload=False).get(old)
    assert reg.name == name and reg.family != family
