"""A file under the size limit never hangs an ingest: chunking is linear in the input and
chunk sizes are bounded (strictly by max_words with `strict_max_words`)."""

from __future__ import annotations

import time

import pytest

from plm_core.records import Document
from plm_plugins.chunkers.markdown_semantic import OVERSIZE_FACTOR, MarkdownSemanticChunker, word_count

SHAPES = {
    "one-word headings": lambda n: "# a\n" * n,
    "headings inside a code fence": lambda n: "```\n" + "# x\n" * n + "```\n",
    "many small sections": lambda n: "## heading here\n\nsome text words\n" * (n // 2),
    "one paragraph, no sentence break": lambda n: "word " * (2 * n),
    "one paragraph of short sentences": lambda n: "A b c. " * n,
    "blank-line paragraphs": lambda n: "alpha beta gamma delta.\n\n" * (n // 2),
}


def _chunk(text: str, strict: bool) -> tuple[float, list[int]]:
    chunker = MarkdownSemanticChunker(target_words=400, min_words=50, max_words=800, strict_max_words=strict)
    t0 = time.perf_counter()
    chunks = chunker.run([Document(id="d", text=text)])
    return time.perf_counter() - t0, [word_count(c.text) for c in chunks]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_time_grows_linearly(shape: str) -> None:
    make = SHAPES[shape]
    small = min(_chunk(make(25_000), False)[0] for _ in range(3))
    large = min(_chunk(make(200_000), False)[0] for _ in range(3))
    # 8x the input: linear work takes ~8x, the old quadratic folding ~64x. The best of three
    # runs and a 25x bound leave room for a noisy shared machine; a quadratic step fails.
    assert large < max(25 * small, 0.5), (shape, small, large)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_strict_never_exceeds_max_words_and_default_is_bounded(shape: str) -> None:
    text = SHAPES[shape](100_000)
    _, strict = _chunk(text, True)
    assert max(strict) <= 800, shape
    _, default = _chunk(text, False)
    assert max(default) <= 800 * OVERSIZE_FACTOR + 4, shape  # + the "(continued)" heading's words


def test_four_megabytes_of_headings_finish_quickly() -> None:
    seconds, words = _chunk("# a\n" * 1_000_000, False)
    assert seconds < 30 and max(words) <= 800 * OVERSIZE_FACTOR
