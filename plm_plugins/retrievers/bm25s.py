"""BM25 over the chunks' index text with bm25s, including an exact rank_bm25 Okapi mode.

bm25s precomputes a sparse (docs x vocabulary) matrix of per-term scores, so a query's
scores are a sum of a few columns. The POC used `rank_bm25.BM25Okapi`, whose IDF differs
from every bm25s method: log((N - df + 0.5) / (df + 0.5)) with negative values (terms in
more than half of the chunks) replaced by epsilon x the mean IDF, where bm25s's
`robertson` clips them to 0 and reorders results. `method = "rank_bm25_okapi"` builds
bm25s's matrix with that IDF and ATIRE's term-frequency part (the (k1 + 1) numerator
rank_bm25 uses), in float64 and in rank_bm25's operation order, so its scores are
bit-identical; the index is saved and loaded with bm25s's own format.

Texts become tokens through a `tokenizers` plugin, a part of this stage
(`tokenizer = "bm25s_stem"`, or a `[...bm25.tokenizer]` table); its identity is part of
the saved index's settings, so another tokenizer never reads this one's index.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from plm_core.component import ComponentConfig
from plm_core.errors import MissingDependencyError, StaleIndexError, StoreError
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import Retriever, Snapshot, Tokenizer
from plm_core.records import CorpusVersion, ExpandedQuery, ScoredChunk
from plm_core.registry import default_registry
from plm_index import builds
from plm_index.ranking import top_n
from plm_plugins.retrievers.columns import IDS_FILE, load_ids, save_ids

if TYPE_CHECKING:
    from plm_core.registry import Registry

META_FILE = "plm_bm25.json"
FORMAT = 2


class BM25Retriever(Retriever):
    """Sparse lexical retrieval; ranks by the full score vector like the POC."""

    name = "bm25s"
    parts = {"tokenizer": Tokenizer}
    tokenizer: Tokenizer | None

    class Config(ComponentConfig):
        tokenizer: str | dict[str, Any] = "bm25s_stem"
        """The tokenizer (a `tokenizers` plugin, see `plm plugins`): its name, or a table with `use`
        and its settings ([...bm25.tokenizer] use = "snowball", language = "german").
        bm25s_stem (the default, the recommended recipe's): bm25s's regex, English stop words,
        Snowball English stemmer; whitespace_lower: `text.lower().split()` (the POC: no stop words,
        no stemming; configs/poc_parity.toml names it); snowball: any language; identifiers:
        camelCase and snake_case names split into words too."""
        method: Literal["rank_bm25_okapi", "robertson", "lucene", "atire", "bm25l", "bm25+"] = "lucene"
        """The BM25 variant: lucene (the default, the recommended recipe's) and the others are
        bm25s's own; rank_bm25_okapi is the POC's rank_bm25.BM25Okapi, bit for bit."""
        k1: float = Field(1.5, ge=0)
        """Term-frequency saturation (>= 0, usually 1.2 to 2): higher lets repeated words count
        longer; 0 ignores term frequency."""
        b: float = Field(0.75, ge=0, le=1)
        """Length normalisation (0 to 1): 0 ignores chunk length, 1 normalises fully."""
        delta: float = Field(0.5, ge=0)
        """The lower bound added to term scores (bm25l and bm25+ only; ignored by the others)."""
        epsilon: float = Field(0.25, ge=0)
        """rank_bm25_okapi only: negative IDFs (terms in more than half of the chunks) become
        epsilon x the mean IDF."""
        dtype: Literal["float64", "float32"] = "float64"
        """Score precision: float64 is what rank_bm25 summed in (bit-identical scores);
        float32 halves the index but its rounding can reorder near-ties."""
        drop_zero_scores: bool | None = None
        """true: leave out chunks that share no word with the query; unset: true, except with
        method = "rank_bm25_okapi", the POC's scoring, whose zero-score candidates still earned RRF points."""

    config: Config

    # ------------------------------------------------------------------ tokens
    @property
    def tokens(self) -> Tokenizer:
        """The tokenizer part: the assembly builds it from the config's `tokenizer`; a retriever
        made by hand (`BM25Retriever(tokenizer="snowball")`) looks the name up in the installed plugins."""
        if self.tokenizer is None:
            table = self.config.tokenizer
            params = {"use": table} if isinstance(table, str) else dict(table)
            cls: Any = default_registry().get(str(params.pop("use")), family="tokenizers").cls
            self.tokenizer = cls(cls.Config(**params), label="tokenizer")
        return self.tokenizer

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        return self.tokens.tokenize(texts)

    def _token_ids(self, texts: Sequence[str]) -> Any:
        """Texts as bm25s's `Tokenized` (token ids and their vocabulary): indexing ids is
        about 1.7x faster than indexing lists of strings (bench/bench_scale.py)."""
        vocab: dict[str, int] = {}
        ids = [[vocab.setdefault(t, len(vocab)) for t in tokens] for tokens in self.tokenize(texts)]
        return _import_bm25s().tokenization.Tokenized(ids=ids, vocab=vocab)

    # ------------------------------------------------------------------ index
    # One build per corpus version under index_dir/bm25s-<settings hash>/, in bm25s's own
    # save format, through the shared build folder (plm_index.builds: atomic, checksummed).
    def index_base(self, index_dir: Path) -> Path:
        return builds.stage_folder(index_dir, "bm25s", self._settings())

    def index_path(self, index_dir: Path, version: CorpusVersion) -> Path:
        return builds.build_path(self.index_base(index_dir), version, self._settings())

    def _settings(self) -> dict[str, Any]:
        """What the saved index depends on (search-time options left out)."""
        # The tokenizer by its identity (name and settings, defaults included), not as written.
        settings = self.config.model_dump(exclude={"drop_zero_scores", "tokenizer"})
        return {"format": FORMAT, **settings, "tokenizer": self.tokens.identity}

    def build(self, snapshot: Snapshot, index_dir: Path | None) -> None:
        texts = snapshot.index_texts
        retriever = self._index(texts)
        self._retriever, self._n_docs = retriever, len(texts)
        self._chunk_ids: Sequence[str] = snapshot.chunk_ids
        if index_dir is not None:

            def write(folder: Path) -> None:
                if retriever is not None:
                    retriever.save(str(folder), show_progress=False)
                save_ids(folder / IDS_FILE, self._chunk_ids)

            meta = {**self._settings(), "version": snapshot.version.token, "num_docs": len(texts)}
            builds.save_build(
                self.index_path(index_dir, snapshot.version), write, {**meta, "empty": retriever is None}, META_FILE
            )

    def is_current(self, version: CorpusVersion, index_dir: Path) -> bool:
        return builds.build_matches(self.index_path(index_dir, version), version, self._settings(), META_FILE)

    def load(self, snapshot: Snapshot, index_dir: Path) -> None:
        path, version, n_chunks = self.index_path(index_dir, snapshot.version), snapshot.version, snapshot.n_chunks
        what = f"BM25 index {self.label!r} under {self.index_base(index_dir)}"
        meta = builds.open_build(path, version, self._settings(), what, META_FILE)
        if meta.get("num_docs") != n_chunks:
            raise StoreError(
                f"BM25 index {path} holds {meta.get('num_docs')} chunks but the store's version {version} has "
                f"{n_chunks}: run `plm index rebuild`"
            )
        self._retriever = None
        try:
            ids = load_ids(path / IDS_FILE, n_chunks)
            if not meta.get("empty"):
                bm25s = _import_bm25s()
                self._retriever = bm25s.BM25.load(str(path), mmap=True, load_corpus=False, show_progress=False)
        except FileNotFoundError:  # removed by a newer build while we read it
            raise StaleIndexError(f"BM25 index {path} was replaced while loading") from None
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise StoreError(f"BM25 index {path} is corrupt ({err}): run `plm index rebuild`") from None
        self._n_docs, self._chunk_ids = n_chunks, ids

    def _index(self, texts: list[str]) -> Any:
        """The bm25s index of these texts (row i for texts[i]); None when no text has a token."""
        bm25s = _import_bm25s()
        c = self.config
        if c.method != "rank_bm25_okapi":
            tokens = self._token_ids(texts)
            if not tokens.vocab:
                return None
            retriever = bm25s.BM25(k1=c.k1, b=c.b, delta=c.delta, method=c.method, dtype=c.dtype)
            retriever.index(tokens, show_progress=False)
            return retriever
        corpus = self.tokenize(texts)
        if not any(corpus):
            return None
        # The tf part is ATIRE's; idf_method only matters inside bm25s.index(), which is
        # not used here, and is recorded as robertson (rank_bm25's IDF before flooring).
        retriever = bm25s.BM25(k1=c.k1, b=c.b, method="atire", idf_method="robertson", dtype=c.dtype)
        retriever.scores, retriever.vocab_dict = okapi_matrix(corpus, c.k1, c.b, c.epsilon)
        retriever.scores["data"] = retriever.scores["data"].astype(c.dtype, copy=False)
        retriever.unique_token_ids_set = set(retriever.vocab_dict.values())
        retriever.nonoccurrence_array = None
        return retriever

    # ------------------------------------------------------------------ search
    def scores(self, text: str) -> Any:
        """The BM25 score of every chunk (row order) for a query text."""
        import numpy as np

        retriever = self._retriever
        if retriever is None:
            return np.zeros(self._n_docs, dtype=self.config.dtype)
        vocab = retriever.vocab_dict
        # Repeated query words count once per occurrence, as in rank_bm25 and bm25s.
        ids = [vocab[t] for t in self.tokenize([text])[0] if t in vocab]
        if not ids:  # bm25s's get_scores() fails on an empty token list
            return np.zeros(self._n_docs, dtype=self.config.dtype)
        return retriever.get_scores_from_ids(ids)

    def search(self, query: ExpandedQuery, n: int, allowed: Any = None) -> list[ScoredChunk]:
        # Full scores, then the POC's argsort order (not bm25s.retrieve(): it raises when k
        # exceeds the corpus and orders ties differently).
        scores = self.scores(query.text)
        return top_n(scores, n, self._chunk_ids, self.label, allowed, drop_zero=self.drops_zero_scores)

    @property
    def drops_zero_scores(self) -> bool:
        """A chunk that shares no word with the query is not a result, except in the POC's
        own scoring (`rank_bm25_okapi`), whose zero-score candidates still earned RRF points."""
        drop = self.config.drop_zero_scores
        return self.config.method != "rank_bm25_okapi" if drop is None else drop


def okapi_matrix(corpus: list[list[str]], k1: float, b: float, epsilon: float) -> tuple[dict[str, Any], dict[str, int]]:
    """bm25s's CSC score arrays and vocabulary, with rank_bm25.BM25Okapi's exact float64 scores."""
    import numpy as np

    vocab: dict[str, int] = {}
    # Vocabulary in first-occurrence order: rank_bm25 sums its IDFs in that order, and a
    # float sum in another order can differ in the last bit of the epsilon floor.
    rows = [[vocab.setdefault(t, len(vocab)) for t in tokens] for tokens in corpus]
    n_docs, n_vocab = len(corpus), len(vocab)
    doc_len = np.array([len(r) for r in rows], dtype=np.int64)
    term = np.fromiter((t for r in rows for t in r), dtype=np.int64, count=int(doc_len.sum()))
    doc = np.repeat(np.arange(n_docs, dtype=np.int64), doc_len)
    pairs, tf = np.unique(term * n_docs + doc, return_counts=True)  # sorted by (term, doc): CSC order
    term, doc = pairs // n_docs, pairs % n_docs
    df = np.bincount(term, minlength=n_vocab).tolist()

    idf = [math.log(n_docs - f + 0.5) - math.log(f + 0.5) for f in df]
    idf_sum = 0.0
    for value in idf:  # sequential, not sum(): Python 3.12+ sum() compensates rounding
        idf_sum += value
    floor = epsilon * (idf_sum / n_vocab)
    idf_arr = np.array([floor if value < 0 else value for value in idf], dtype=np.float64)

    avgdl = int(doc_len.sum()) / n_docs
    q_freq, dl = tf.astype(np.float64), doc_len[doc].astype(np.float64)
    # Same expression and order as rank_bm25's get_scores, so every product is identical.
    data = idf_arr[term] * (q_freq * (k1 + 1) / (q_freq + k1 * (1 - b + b * dl / avgdl)))
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(np.bincount(term, minlength=n_vocab), out=indptr[1:])
    scores = {"data": data, "indices": doc.astype(np.int32), "indptr": indptr, "num_docs": n_docs}
    return scores, vocab


@functools.cache
def _import_bm25s() -> Any:
    try:
        import bm25s
    except ImportError:
        raise MissingDependencyError("bm25s", "bm25") from None
    # bm25s pins its logger to DEBUG, which floods stderr on every build; defer to the
    # application's logging instead (once: setLevel clears logging's caches).
    logging.getLogger("bm25s").setLevel(logging.NOTSET)
    return bm25s


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(BM25Retriever)
