from __future__ import annotations

import math

import pytest

from plm_plugins.evaluators.ir_metrics import chunk_view, doc_ranking, ir_scores


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
