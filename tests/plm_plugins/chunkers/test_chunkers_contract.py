"""The built-in chunker keeps the chunkers contract (`plm.testing.check_chunker`), with its
default settings and with small chunks that split every section."""

from __future__ import annotations

import plm
import plm.testing


def test_markdown_semantic_keeps_the_contract() -> None:
    cls = plm.default_registry().get("markdown_semantic", "chunkers").cls
    plm.testing.check_chunker(cls())
    plm.testing.check_chunker(cls(target_words=20, min_words=5, max_words=30, overlap_sentences=1))
    plm.testing.check_chunker(
        cls(headings="commonmark", strict_max_words=True, max_words=25, target_words=15, min_words=5)
    )
