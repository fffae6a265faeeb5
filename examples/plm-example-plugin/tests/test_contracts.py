"""The package's own tests: each stage keeps its family's contract (plm's conformance kit)."""

from plm_example_plugin import QuestionNormalizer
from plm_example_plugin.char_ngrams import CharNgramTokenizer
from plm_example_plugin.hashed_words import HashedWordsEmbedder

import plm
import plm.testing


def test_char_ngrams_keeps_the_tokenizer_contract():
    plm.testing.check_tokenizer(CharNgramTokenizer(), different=CharNgramTokenizer(n=4))


def test_hashed_words_keeps_the_embedder_contract():
    plm.testing.check_embedder(HashedWordsEmbedder())


def test_question_normalizer_keeps_its_family_contract():
    # `normalizers` is this package's own family: no check of its own in the kit, the generic one
    queries = [plm.Query("How do I restart a Pod?"), plm.Query("what is the node's memory"), plm.Query("the")]
    plm.testing.check_stage(QuestionNormalizer(), queries)
