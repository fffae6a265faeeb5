"""The package's own tests: each stage keeps its family's contract (plm's conformance kit)."""

from plm_example_search.word_overlap import WordOverlap

import plm.testing


def test_word_overlap_keeps_the_retriever_contract(tmp_path):
    plm.testing.check_retriever(lambda: WordOverlap(label="overlap"), tmp_path / "plain")
    plm.testing.check_retriever(lambda: WordOverlap(label="overlap", min_share=0.5), tmp_path / "half")
