from __future__ import annotations

import math

import pytest

from plm_eval.evaluators.ir_metrics import chunk_view, doc_ranking, ir_scores


def test_doc_ranking_keeps_first_occurrence() -> None:
    assert doc_ranking(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]


def test_chunk_view_rank_is_first_relevant_within_k() -> None:
    rel = {"d2": 1}
    assert chunk_view(["d1", "d2", "d2"], rel, 5) == 2
    assert chunk_view(["d1", "d3", "d4", "d5", "d6", "d2"], rel, 5) is None
    assert chunk_view(["d1"], {"d1": 0}, 5) is None  # grade 0 is not relevant


def test_ir_scores_match_hand_computed_values() -> None:
    qrels = {"q1": {"a": 1, "c": 1}, "q2": {"x": 2, "y": 1}}
    runs = {"q1": ["b", "a", "c"], "q2": ["y", "z", "x"]}
    got = ir_scores(runs, qrels, ["nDCG@10", "R@100", "RR@10"])
    # q1: relevant at ranks 2 and 3, ideal at 1 and 2
    dcg1 = 1 / math.log2(3) + 1 / math.log2(4)
    idcg1 = 1 + 1 / math.log2(3)
    # q2 (graded, linear gain as trec_eval): y=1 at rank 1, x=2 at rank 3; ideal x then y
    dcg2 = 1 + 2 / math.log2(4)
    idcg2 = 2 + 1 / math.log2(3)
    assert got["nDCG@10"]["q1"] == pytest.approx(dcg1 / idcg1)
    assert got["nDCG@10"]["q2"] == pytest.approx(dcg2 / idcg2)
    assert got["RR@10"] == pytest.approx({"q1": 0.5, "q2": 1.0})
    assert got["R@100"] == pytest.approx({"q1": 1.0, "q2": 1.0})


def test_query_with_no_results_scores_zero() -> None:
    got = ir_scores({"q1": [], "q2": ["a"]}, {"q1": {"a": 1}, "q2": {"a": 1}}, ["nDCG@10"])
    assert got["nDCG@10"] == {"q1": 0.0, "q2": 1.0}


class _FixedJob:
    """A stand-in job whose ranking per query is fixed: chunk ids are `<doc>#<n>`."""

    def __init__(self, runs: dict[str, list[str]]) -> None:
        self.runs = runs

    def search(self, query):  # type: ignore[no-untyped-def]
        from plm_core.records import ExpandedQuery, Hit, Ranking

        docs = self.runs.get(query.id, [])[: query.k]  # the warm-up query (no id): nothing
        hits = tuple(Hit(chunk_id=f"{d}#{i}", doc_id=d, score=1.0 / (i + 1), rank=i) for i, d in enumerate(docs))
        return Ranking(query=ExpandedQuery(text=query.text, k=query.k, id=query.id, original=query.text), hits=hits), {}


def test_evaluate_per_query_rows_and_aggregates_match_hand_computed_values() -> None:
    from plm_eval.dataset import QuerySet
    from plm_eval.evaluators.ir_metrics import IRMetricsEvaluator

    # q1: the relevant doc "a" is the 2nd chunk (and 2nd doc); q2: graded, "y" (grade 1)
    # first, "x" (grade 2) later, with "y" repeated so the doc ranking is shorter than
    # the chunk list; q3: nothing relevant among the top 5 chunks, found at doc rank 6.
    runs = {
        "q1": ["b", "a", "c"],
        "q2": ["y", "y", "z", "x"],
        "q3": ["p1", "p2", "p3", "p4", "p5", "r"],
    }
    qset = QuerySet(
        "t",
        {"q1": "one", "q2": "two", "q3": "three"},
        {"q1": {"a": 1}, "q2": {"x": 2, "y": 1}, "q3": {"r": 1}},
    )
    res = IRMetricsEvaluator(chunk_k=5, doc_k=100).evaluate(_FixedJob(runs), qset)
    rows = {r["query_id"]: r for r in res["per_query"]}
    assert [rows[q]["rank"] for q in ("q1", "q2", "q3")] == [2, 1, None]
    assert [rows[q]["doc_rank"] for q in ("q1", "q2", "q3")] == [2, 1, 6]
    assert [rows[q]["MRR"] for q in ("q1", "q2", "q3")] == [0.5, 1.0, 0.0]
    assert [rows[q]["Hit@1"] for q in ("q1", "q2", "q3")] == [0.0, 1.0, 0.0]
    assert [rows[q]["Hit@5"] for q in ("q1", "q2", "q3")] == [1.0, 1.0, 0.0]
    # q2 doc ranking y, z, x: DCG = 1 + 2/log2(4) = 2; ideal x, y: 2 + 1/log2(3)
    assert rows["q2"]["nDCG@10"] == pytest.approx(2 / (2 + 1 / math.log2(3)), abs=1e-6)
    assert rows["q3"]["nDCG@10"] == pytest.approx(1 / math.log2(7), abs=1e-6)
    assert rows["q3"]["RR@10"] == pytest.approx(1 / 6, abs=1e-6)
    m = res["metrics"]
    assert m["Hit@1"] == pytest.approx(1 / 3) and m["Hit@5"] == pytest.approx(2 / 3)
    assert m["MRR"] == pytest.approx((0.5 + 1.0) / 3)
    # Every aggregate is the mean of the per-query values of the same name.
    for name, value in m.items():
        assert value == pytest.approx(sum(r[name] for r in rows.values()) / 3, abs=1e-6)


class _SlowFirstJob(_FixedJob):
    """Its first search loads a model: 0.3 s of `embed`; later ones 1 ms."""

    loaded = False

    def search(self, query):  # type: ignore[no-untyped-def]
        ranking, _ = super().search(query)
        embed = 0.001 if self.loaded else 0.3
        self.loaded = True
        return ranking, {"embed": embed, "retrieve": 0.002}


def test_ms_per_query_leaves_out_the_first_search_that_loads_the_model() -> None:
    """Issue 45 item 17: `plm run` said "embed 120 ms per query" of 1 ms queries, the first
    query's model load spread over the set."""
    from plm_eval.dataset import QuerySet
    from plm_eval.evaluators.ir_metrics import IRMetricsEvaluator

    qset = QuerySet("t", {"q1": "one", "q2": "two"}, {"q1": {"a": 1}, "q2": {"b": 1}})
    res = IRMetricsEvaluator(chunk_k=5, doc_k=100).evaluate(_SlowFirstJob({"q1": ["a"], "q2": ["c"]}), qset)
    assert res["ms_per_query"] == pytest.approx({"embed": 1.0, "retrieve": 2.0})
    assert res["metrics"]["Hit@1"] == 0.5


def test_measures_must_be_some_and_each_once() -> None:
    # two names of one measure were scored once, the other reported 0.0 for every query
    pytest.importorskip("ir_measures")
    from pydantic import ValidationError

    from plm_eval.evaluators.ir_metrics import IRMetricsEvaluator

    with pytest.raises(ValidationError, match="at least one measure"):
        IRMetricsEvaluator(measures=[])
    with pytest.raises(ValidationError, match=r"'P\(rel=1\)@5' and 'P@5' are the same measure"):
        IRMetricsEvaluator(measures=["P@5", "P(rel=1)@5"])
    assert IRMetricsEvaluator(measures=["AP", "P@5"]).metric_names() == ["Hit@1", "Hit@5", "MRR", "AP", "P@5"]
