from __future__ import annotations

import pytest

from plm_core.component import BaseComponent, ComponentConfig, fits
from plm_core.errors import PipelineError, TypeValidationError
from plm_core.pipeline import Pipeline
from plm_core.records import Chunk, Document, ExpandedQuery, Query


class Split(BaseComponent[list[Document], list[Chunk]]):
    input_type = list[Document]
    output_type = list[Chunk]

    def run(self, data: list[Document]) -> list[Chunk]:
        return [Chunk(id=f"{d.id}_{i}", doc_id=d.id, text=w) for d in data for i, w in enumerate(d.text.split())]


class Upper(BaseComponent[list[Chunk], list[Chunk]]):
    input_type = list[Chunk]
    output_type = list[Chunk]

    class Config(ComponentConfig):
        suffix: str = ""

    def run(self, data: list[Chunk]) -> list[Chunk]:
        from dataclasses import replace

        return [replace(c, text=c.text.upper() + self.config.suffix) for c in data]


class Boom(BaseComponent[list[Chunk], list[Chunk]]):
    input_type = list[Chunk]
    output_type = list[Chunk]

    def run(self, data: list[Chunk]) -> list[Chunk]:
        raise ValueError("kaput")


class Expand(BaseComponent[Query, ExpandedQuery]):
    input_type = Query
    output_type = ExpandedQuery

    def run(self, data: Query) -> ExpandedQuery:
        return ExpandedQuery(text=data.text + " more", original=data.text, fired=("x",))


def test_chain_runs_in_order_and_times_each_stage() -> None:
    pipe = Pipeline().add(Split()).add(Upper(suffix="!"))
    result = pipe.run([Document(id="d", text="a b")])
    assert [c.text for c in result.output] == ["A!", "B!"]
    assert set(result.timings) == {"Split", "Upper"}
    assert all(t >= 0 for t in result.timings.values())


def test_type_mismatch_names_both_stages_and_types() -> None:
    pipe = Pipeline().add(Split())
    with pytest.raises(TypeValidationError) as info:
        pipe.add(Expand())
    msg = str(info.value)
    assert "Split" in msg and "Expand" in msg and "list[Chunk]" in msg and "Query" in msg


def test_failing_stage_is_named() -> None:
    pipe = Pipeline().add(Split()).add(Boom())
    with pytest.raises(PipelineError) as info:
        pipe.run([Document(id="d", text="a")])
    assert info.value.stage == "Boom" and "kaput" in str(info.value)
    assert isinstance(info.value.cause, ValueError)


def test_records_are_immutable() -> None:
    chunk = Chunk(id="c", doc_id="d", text="t")
    with pytest.raises(AttributeError):
        chunk.text = "x"  # type: ignore[misc]


def test_fits_handles_subclasses_and_generics() -> None:
    assert fits(ExpandedQuery, Query)
    assert not fits(Query, ExpandedQuery)
    assert fits(list[Chunk], list[Chunk])
    assert not fits(list[Document], list[Chunk])
    assert not fits(list[Chunk], Chunk)


def test_component_config_forbids_unknown_keys() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Upper(sufix="!")


class Words(BaseComponent[list[Document], list[Chunk]]):
    name = "words"
    family = "chunkers"
    input_type = list[Document]
    output_type = list[Chunk]

    def run(self, data: list[Document]) -> list[Chunk]:
        return [w for d in data for w in d.text.split()]  # type: ignore[misc]  # str, not Chunk


class Listed(BaseComponent[Query, ExpandedQuery]):
    input_type = Query
    output_type = ExpandedQuery

    def run(self, data: Query) -> ExpandedQuery:
        return [data.text]  # type: ignore[return-value]


def test_a_stage_returning_the_wrong_type_is_named_where_it_returns() -> None:
    # not an AttributeError in the store two stages on: the stage, what it returned, what it should
    with pytest.raises(PipelineError) as info:
        Pipeline().add(Words()).add(Upper()).run([Document(id="d", text="a b")])
    assert info.value.stage == "words" and isinstance(info.value.cause, TypeValidationError)
    assert (
        str(info.value.cause)
        == "'words' (chunkers) returned a list holding a str at 0, not the list[Chunk] it must return"
    )
    with pytest.raises(PipelineError, match=r"'Listed' returned a list, not the ExpandedQuery it must return"):
        Pipeline().add(Listed()).run(Query(text="q"))
    assert Pipeline().add(Split()).run([Document(id="d", text="a b")]).output  # right types pass


def test_a_stage_in_the_wrong_place_is_named_with_its_family() -> None:
    # a chunker put in [query.rerank] said only "stage 'rerank' expects list[Document]"
    with pytest.raises(
        TypeValidationError,
        match=r"stage 'Expand' outputs ExpandedQuery but the next stage 'words' \(chunkers\) expects list\[Document\]",
    ):
        Pipeline().add(Expand()).add(Words())


def test_output_types_that_cannot_be_checked_at_run_time_are_not_refused() -> None:
    from typing import Any, Optional

    from plm_core.component import output_problem
    from plm_core.protocols import Snapshot

    chunk = Chunk(id="c", doc_id="d", text="t")
    for value, declared in [
        ([1, "x"], list[Any]),  # Any is a type on 3.11: not a class to check items against
        (object(), Snapshot),  # a Protocol that is not runtime-checkable
        ([chunk], list[Chunk] | None),
        (None, Optional[list[Chunk]]),  # noqa: UP045 - the old spelling, as a plugin may write it
        ((1, 2), tuple[int, ...]),
    ]:
        assert output_problem(value, declared) is None, declared
    assert output_problem(("x",), list[Chunk]) == "a tuple"
    assert output_problem([chunk, "x"], list[Chunk]) == "a list holding a str at 1"


def test_a_ranking_stage_that_reorders_without_renumbering_is_named() -> None:
    # a reranker that reversed the hits and kept their ranks showed users 3, 2, 1
    from dataclasses import replace

    from plm_core.interfaces import RankingStage
    from plm_core.records import Hit, Ranking

    class Reverse(RankingStage):
        name = "reverse"

        def run(self, data: Ranking) -> Ranking:
            return replace(data, hits=tuple(reversed(data.hits)))

    class Renumbered(Reverse):
        name = "renumbered"

        def run(self, data: Ranking) -> Ranking:
            hits = super().run(data).hits
            return replace(data, hits=tuple(replace(h, rank=i) for i, h in enumerate(hits, 1)))

    query = ExpandedQuery.of(Query(text="q"))
    ranking = Ranking(
        query=query, hits=tuple(Hit(chunk_id=f"c{i}", doc_id="d", score=1.0 / i, rank=i) for i in (1, 2, 3))
    )
    with pytest.raises(PipelineError) as info:
        Pipeline().add(Reverse()).run(ranking)
    assert isinstance(info.value.cause, TypeValidationError)
    assert "'reverse' (rankers) returned a Ranking whose hits are ranked 3, 2, 1: ranks count from 1" in str(info.value)
    out = Pipeline().add(Renumbered()).run(ranking).output
    assert [(h.chunk_id, h.rank) for h in out.hits] == [("c3", 1), ("c2", 2), ("c1", 3)]
