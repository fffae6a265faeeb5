"""The package's own tests: each stage keeps its family's contract (plm's conformance kit)."""

from plm_example_plugin.char_ngrams import CharNgramTokenizer

import plm.testing


def test_char_ngrams_keeps_the_tokenizer_contract():
    plm.testing.check_tokenizer(CharNgramTokenizer(), different=CharNgramTokenizer(n=4))
