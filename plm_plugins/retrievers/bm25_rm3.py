"""BM25 with RM3 pseudo-relevance feedback (Lavrenko and Croft's relevance model, as
Anserini's `-rm3`): search once, take the words of the top `fb_docs` chunks weighted by how
often they occur there and how well each chunk scored, keep the `fb_terms` heaviest, and
search again with the query's own words and these, mixed by `original_weight`. It reads the
same saved index as `bm25s` (the segments depend on the tokenizer and heading weight, not on
the scoring settings), so swapping one for the other re-tokenizes nothing."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from pydantic import Field

from plm import ExpandedQuery, ScoredChunk, StaleIndexError, hookimpl
from plm.indexes import State
from plm_plugins.retrievers.bm25s import BM25Retriever, Postings

if TYPE_CHECKING:
    from plm import Registry


class BM25RM3Retriever(BM25Retriever):
    """`bm25s`, plus RM3 expansion of every query from its own first ranking."""

    name = "bm25_rm3"

    class Config(BM25Retriever.Config):
        fb_docs: int = Field(10, ge=1)
        """How many top chunks of the first search the expansion words come from."""
        fb_terms: int = Field(10, ge=1)
        """How many expansion words are added (the heaviest in the relevance model)."""
        original_weight: float = Field(0.5, ge=0, le=1)
        """The query's own words' share of the final query (RM3's lambda): 1 is plain BM25."""

    config: Config

    def search(self, query: ExpandedQuery, n: int, allowed: Any = None) -> list[ScoredChunk]:
        # bm25s's search ranks the query's own postings; feedback's words change every score.
        if self.state is None:
            raise StaleIndexError(f"BM25 index {self.label!r} is not loaded")
        return self.state.top(self.scores(query.text), n, self.label, allowed, drop_zero=self.drops_zero_scores)

    def scores(self, text: str) -> Any:
        import numpy as np

        tokens = self.tokenize([text])[0]
        first = self.token_scores(tokens)
        state = self.state
        if state is None:
            raise StaleIndexError(f"BM25 index {self.label!r} is not loaded")
        if not tokens or self.config.original_weight >= 1.0:
            return first
        ranked = np.where(state.live, first, 0.0)
        k = min(self.config.fb_docs, int((ranked > 0).sum()))
        if k == 0:
            return first
        # Ties broken by index order, not row: a corpus kept as segments picks what one built whole does.
        kth = np.partition(ranked, ranked.size - k)[ranked.size - k]
        near = np.flatnonzero(ranked >= kth)  # the top k and whatever ties the k-th
        top = near[np.lexsort((state.order[near], -ranked[near]))[:k]]
        doc_weight = ranked[top] / ranked[top].sum()
        model: dict[str, float] = {}
        for row, w in zip(top.tolist(), doc_weight.tolist(), strict=True):
            words, tfs = _row_terms(state, row)
            length = tfs.sum()
            for word, tf in zip(words, tfs.tolist(), strict=True):
                model[word] = model.get(word, 0.0) + w * tf / length
        expansion = sorted(model.items(), key=lambda kv: (-kv[1], kv[0]))[: self.config.fb_terms]
        total = sum(v for _, v in expansion) or 1.0
        lam = self.config.original_weight
        weights = {t: lam * n / len(tokens) for t, n in Counter(tokens).items()}
        for word, v in expansion:
            weights[word] = weights.get(word, 0.0) + (1 - lam) * v / total
        terms = sorted(weights)  # one order whatever the segments' vocabularies: the same float sums
        return self.token_scores(terms, [weights[t] for t in terms])


def _row_terms(state: State, row: int) -> tuple[list[str], Any]:
    """The words of one row (global index) and their counts there, from its segment's
    postings turned row-major once per state."""
    import numpy as np

    i = int(np.searchsorted(np.asarray(state.offsets), row, side="right") - 1)
    words, ptr, terms, tfs = state.cached(f"rm3_rows{i}", lambda: _by_row(state.segments[i].data))
    local = row - int(state.offsets[i])
    lo, hi = ptr[local], ptr[local + 1]
    return [words[t] for t in terms[lo:hi].tolist()], tfs[lo:hi]


def _by_row(p: Postings) -> tuple[list[str], Any, Any, Any]:
    import numpy as np

    words = [""] * len(p.vocab)
    for word, tid in p.vocab.items():
        words[tid] = word
    term = np.repeat(np.arange(len(p.vocab), dtype=np.int64), np.diff(p.indptr))
    by = np.argsort(p.rows, kind="stable")
    ptr = np.zeros(len(p.dl) + 1, dtype=np.int64)
    np.cumsum(np.bincount(p.rows, minlength=len(p.dl)), out=ptr[1:])
    return words, ptr, term[by], np.asarray(p.tf)[by].astype(np.float64)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(BM25RM3Retriever)
