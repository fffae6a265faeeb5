"""BM25 over the chunks' index text, scored as bm25s scores, including an exact rank_bm25
Okapi mode; kept as segments, so a sync adds a segment instead of rebuilding.

Each segment (plm_index.segments) keeps its rows' term frequencies and lengths. IDF and
the average length depend on the whole corpus, so a query computes them over the live
rows of all segments and scores with bm25s's formulas, expression for expression and
summing each query word's part in query order as bm25s does: the floats of a bm25s index
of the same corpus, and the same with any number of segments. The POC used
`rank_bm25.BM25Okapi`, whose IDF differs from every bm25s method: log((N - df + 0.5) /
(df + 0.5)) with negative values (terms in more than half of the chunks) replaced by
epsilon x the mean IDF, where bm25s's `robertson` clips them to 0 and reorders results.
`method = "rank_bm25_okapi"` scores with that IDF and ATIRE's term-frequency part (the
(k1 + 1) numerator rank_bm25 uses), in float64 and rank_bm25's operation order, so its
scores are bit-identical to rank_bm25's.

Texts become tokens through a `tokenizers` plugin, a part of this stage
(`tokenizer = "bm25s_stem"`, or a `[...bm25.tokenizer]` table); its identity is part of
the saved index's settings, so another tokenizer never reads this one's index.

`heading_weight` (BM25F's per-field weight, with one length for the whole chunk): the tokens
of a chunk's heading count that many times, in its term frequencies and in its length, as if
the heading were written that many times (for a whole weight, exactly: the same floats as a
build of that text). The heading is read from the chunk's own index text (`heading_field`):
its Markdown heading lines, or its first paragraph (a BEIR title with include_title). It is
applied when a segment is built and is one of the segment settings, so queries pay nothing
for it and an index built with another weight is rebuilt, never read; 1.0 (the default)
builds what the retriever built before it existed, bit for bit, in the same folder.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from plm import (
    ComponentConfig,
    ExpandedQuery,
    PlmUserError,
    Retriever,
    ScoredChunk,
    SegmentedIndex,
    StaleIndexError,
    Tokenizer,
    default_registry,
    hookimpl,
)
from plm.indexes import Rows, State
from plm_plugins.retrievers import bm25_impacts
from plm_plugins.retrievers.bm25_impacts import (
    _NORM,
    _TFC,
    RAW_FROM,
    Impacts,
    _buffer,
    _give_back,
    _live_tokens,
    _norms,
    _postings,
    _postings_of,
    _segment_arrays,
    _sum_by_row,
    _with_blocks,
    compiled,
    formula_of,
    idf_of,
)
from plm_plugins.retrievers.bm25_postings import Postings
from plm_plugins.retrievers.bm25_topk import AUTO_FROM, UNBOUNDED, candidates, worth_pruning
from plm_plugins.retrievers.token_slices import Ahead, token_slices

if TYPE_CHECKING:
    from plm import Registry

FORMAT = 4  # 4: first positions (the word order of rank_bm25_okapi's mean IDF)

# A Markdown ATX heading line (1 to 6 `#`, a space or tab, then text), as the
# markdown_semantic chunker writes one at the top of each section.
HEADING_LINE = re.compile(r"^#{1,6}[ \t]+\S[^\n]*", re.MULTILINE)


def heading_text(text: str, field: str) -> str:
    """The part of a chunk's index text that `heading_weight` weighs: "markdown", its
    Markdown heading lines (every one, wherever it is: a chunk of merged sections has
    several), joined by newlines; "first_paragraph", the text before its first blank line
    (all of it when it has none)."""
    if field == "markdown":
        return "\n".join(m.group(0) for m in HEADING_LINE.finditer(text))
    return text.split("\n\n", 1)[0]


class BM25Retriever(Retriever, SegmentedIndex):
    """Sparse lexical retrieval; ranks by the full score vector like the POC."""

    name = "bm25s"
    parts = {"tokenizer": Tokenizer}
    tokenizer: Tokenizer | None
    _ahead: Ahead | None = None  # the texts of a sync's chunks, tokenized while it stores them
    _impacts_key: str | None = None  # the version's cache key of this scoring's impacts

    class Config(ComponentConfig):
        tokenizer: str | dict[str, Any] = "bm25s_stem"
        """The tokenizer (a `tokenizers` plugin, see `plm plugins`): its name, or a table with `use`
        and its settings ([...bm25.tokenizer] use = "snowball", language = "german").
        bm25s_stem (the default, the recommended recipe's): bm25s's regex, English stop words,
        Snowball English stemmer; whitespace_lower: `text.lower().split()` (the POC: no stop words,
        no stemming; configs/poc_parity.toml names it); snowball: any language; identifiers:
        camelCase and snake_case names split into words too."""

        @field_validator("tokenizer")
        @classmethod
        def _names_a_tokenizer(cls, value: str | dict[str, Any]) -> str | dict[str, Any]:
            if isinstance(value, dict) and not isinstance(value.get("use"), str):
                raise ValueError('a tokenizer table needs use = "<a tokenizer\'s name>" (see `plm plugins`)')
            return value

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
        heading_weight: float = Field(1.0, gt=0)
        """How many times a word of the chunk's heading counts (BM25F's field weight): in its
        term frequency and in the chunk's length, as if the heading were written that many
        times; 1 (the default) weighs headings as any text and builds exactly the index built
        without this option. Applied when the index is built (queries cost nothing more); an
        index built with another weight is rebuilt. Off by default: on SciFact and poc_needle
        it changed no held-out metric significantly (Benchmarks); measure it with `plm eval`."""
        heading_field: Literal["markdown", "first_paragraph"] = "markdown"
        """What the heading is, read from the chunk's index text (with heading_weight != 1):
        markdown, its Markdown heading lines (`#` to `######` then a space: what the
        markdown_semantic chunker writes at the top of each section, "(continued)" headings
        and those of merged sections included); first_paragraph, its text before the first
        blank line: a BEIR corpus loaded with include_title = true puts the title there."""
        top_k: Literal["exhaustive", "maxscore", "auto"] = "auto"
        """How a query finds its best chunks, all three giving the same hits, scores and tie order:
        exhaustive scores every chunk holding a query word; maxscore (MaxScore, in NumPy) only the
        chunks holding a word whose bound, with the smaller bounds of the words after it, can
        reach the k-th best score (faster when a query word is in many chunks, slower otherwise);
        auto (the default), the C kernel (built at install where a C compiler is found) with
        block-max for a query of 131,072 postings or more: blocks of 64 chunks whose bound cannot
        reach the k-th best score are skipped; without the kernel, maxscore for a query with a
        word in 20,000 chunks or more beside a word in a quarter as many or fewer, else
        exhaustive. bm25l and bm25+ score every chunk either way."""

    config: Config

    # ------------------------------------------------------------------ tokens
    @property
    def tokens(self) -> Tokenizer:
        """The tokenizer part: the assembly builds it from the config's `tokenizer`; a retriever
        made by hand (`BM25Retriever(tokenizer="snowball")`) looks the name up in the installed plugins."""
        if self.tokenizer is None:
            table = self.config.tokenizer
            params = {"use": table} if isinstance(table, str) else dict(table)
            if "use" not in params:
                raise PlmUserError(
                    f"retriever {self.label!r}: its tokenizer table lacks 'use' (a tokenizer's name, see `plm plugins`)"
                )
            cls: Any = default_registry().get(str(params.pop("use")), family="tokenizers").cls
            self.tokenizer = cls(cls.Config(**params), label="tokenizer")
        return self.tokenizer

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        return self.tokens.tokenize(texts)

    # ------------------------------------------------------------------ index
    # Segments (plm_index.segments) under index_dir/bm25s-<settings hash>/: each keeps its
    # rows' term frequencies and lengths; IDF and average length, which depend on the whole
    # corpus, are applied at query time, so scores equal a whole build's.
    def segment_settings(self) -> dict[str, Any]:
        """What a segment depends on: the tokenizer by its identity (name and settings,
        defaults included), not as written, and a heading weight other than 1 with the
        heading field it weighs (none at 1: the settings, and the folder, of an index built
        before the option). Scoring settings are applied at query time."""
        settings: dict[str, Any] = {"format": FORMAT, "tokenizer": self.tokens.identity}
        if self.heading_weight != 1.0:
            settings["heading"] = {"field": self.config.heading_field, "weight": self.heading_weight}
        return settings

    @property
    def heading_weight(self) -> float:
        return float(self.config.heading_weight)

    def index_base(self, index_dir: Path) -> Path:
        return self.stage_base(index_dir)

    def ahead(self, texts: Sequence[str]) -> None:
        if self._ahead is None:
            self._ahead = Ahead(self.tokens)
        self._ahead.add(texts)

    def ahead_done(self) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.close()

    def build_data(self, rows: Rows) -> Postings:
        texts = list(rows.texts or [])
        # Tokenized a slice at a time (on every core when there are many, or ahead, while a
        # sync stored them), each slice's tokens turned into ids and dropped: the whole
        # corpus's token lists peaked at 9 GB for a million chunks.
        slices = token_slices(self.tokens, texts, self.tokenize, self._ahead)
        if self.heading_weight == 1.0:
            return Postings.of_slices(slices)
        headings = self.tokenize([heading_text(t, self.config.heading_field) for t in texts])
        return Postings.of_slices(slices, headings, self.heading_weight)

    def save_data(self, data: Postings, folder: Path) -> None:
        data.save(folder)

    def open_data(self, folder: Path, n_rows: int) -> Postings:
        return Postings.open(folder, n_rows, self.heading_weight)

    def merge_data(self, parts: list[Postings], keep: list[Any]) -> Postings:
        return Postings.merge(parts, keep)

    # ------------------------------------------------------------------ search
    def scores(self, text: str) -> Any:
        """The BM25 score of every row of the open segments for a query text (deleted rows
        score 0; `search` leaves them out)."""
        return self._dense(*self._matches(self.tokenize([text])[0]))

    def token_scores(self, tokens: Sequence[str], weights: Sequence[float] | None = None) -> Any:
        """`scores` for tokens already made; with `weights`, each word's part times its weight
        (a weighted query: pseudo-relevance feedback's expansion terms), added word by word."""
        import numpy as np

        if weights is None:
            return self._dense(*self._matches(list(tokens)))
        total = np.zeros(0 if self.state is None else self.state.total, dtype=np.float64)
        for token, weight in zip(tokens, weights, strict=True):
            total = total + self._dense(*self._matches([token])).astype(np.float64) * weight
        return total.astype(self.config.dtype, copy=False)

    def search(self, query: ExpandedQuery, n: int, allowed: Any = None) -> list[ScoredChunk]:
        # The POC's order (equal scores, the later chunk first), found among the rows that
        # share a word with the query (or, with `top_k = "maxscore"`, among those of the
        # words that can make a hit); the full vector only where those cannot tell.
        tokens = self.tokenize([query.text])[0]
        state = self.state
        if state is None:
            raise StaleIndexError(f"BM25 index {self.label!r} is not loaded")
        drop = self.drops_zero_scores
        c = self.config
        # The C kernel (block-max for many postings with auto); without it, MaxScore in NumPy
        # for a long list beside a short one.
        numpy_maxscore = c.top_k == "maxscore" or (
            c.top_k == "auto" and compiled() is None and state.total >= AUTO_FROM and worth_pruning(state, tokens)
        )
        top = None if numpy_maxscore else self._compiled_top(state, tokens, n, allowed)
        if top is not None:
            rows, values, count = top  # ranked as `top_of` ranks; fewer than n: not all scores > 0
            if count >= n or drop:
                hits = state.ranked(rows, values.astype(c.dtype).tolist(), count > n, self.label)
                if hits is not None:
                    return hits
            return state.top(self._dense(*self._matches(tokens)), n, self.label, allowed, drop_zero=drop)
        if numpy_maxscore:
            found = candidates(
                state,
                tokens,
                n,
                method=c.method,
                k1=c.k1,
                b=c.b,
                delta=c.delta,
                epsilon=c.epsilon,
                weight=self.heading_weight,
                dtype=c.dtype,
                allowed_rows=None if allowed is None else state.allowed_rows(allowed),
                impacts=lambda words: self._word_impacts(state, words),
            )
            if found is not None:
                hits = state.top_of(found[0], found[1].astype(c.dtype), n, self.label, allowed, drop)
                if hits is not None:
                    return hits
        rows, values, constant = self._matches(tokens)
        if constant is None:
            hits = state.top_of(rows, values.astype(c.dtype), n, self.label, allowed, drop)
            if hits is not None:
                return hits
        return state.top(self._dense(rows, values, constant), n, self.label, allowed, drop_zero=drop)

    def _matches(self, tokens: list[str]) -> tuple[Any, Any, float | None]:
        """The live rows that hold a query word (ascending), their BM25 scores in float64, and
        the score every row gets besides (bm25l and bm25+: a word's part for rows without it;
        None for the others, where a row without a query word scores 0).

        bm25s's formulas, expression for expression, over each word's postings under the
        corpus-wide IDF and average length; each row's parts are added in query order, a
        repeated word once per occurrence, as bm25s and rank_bm25 add them: their floats."""
        import numpy as np

        state = self.state
        if state is None:
            raise StaleIndexError(f"BM25 index {self.label!r} is not loaded")
        none = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        if not state.n_live:
            return (*none, None)
        words = self._word_impacts(state, tokens)
        rows, parts, skips = [], [], []
        for term in tokens:  # query order, a repeated word once per occurrence
            if (hit := words.get(term)) is not None:
                rows.append(hit[0])
                parts.append(hit[1])
                if hit[2] is not None:
                    skips.append(hit[2])
        constant = float(np.array(skips, dtype=np.float64).sum()) if skips else None
        if not rows:
            return (*none, constant)
        if len(rows) == 1:
            return rows[0], parts[0], constant  # 0.0 + part: part
        return (*_sum_by_row(state, np.concatenate(rows), np.concatenate(parts)), constant)

    def _compiled_top(self, state: State, tokens: list[str], n: int, allowed: Any) -> tuple[Any, Any, int] | None:
        """The first n of `_matches`'s rows as `top_of` ranks them, their float64 scores, and how
        many rows score above 0 and tie or beat the n-th (`_bm25_kernel.c`: the query's parts summed
        per row, those rows picked and ordered in one C call, by block-max for many postings):
        the same floats, the same order. None where it does not apply: the package built
        without the kernel, bm25l/bm25+ (every row scores), another dtype, no query word in the
        index."""
        import numpy as np

        dtype = self.config.dtype
        if dtype not in ("float32", "float64") or not state.n_live or (kernel := compiled()) is None:
            return None
        if self.config.method in UNBOUNDED:
            return None  # bm25l/bm25+: every row scores
        words, scoring = self._kernel_words(state, tokens, self.config.top_k == "auto")
        found = [hit for t in tokens if (hit := words[t]) is not None]  # query order, repeats
        if not found:
            return None  # no query word in the index
        mask = None if allowed is None else state.allowed_rows(allowed)
        best, values = np.empty(max(n, 0), dtype=np.intp), np.empty(max(n, 0), dtype=np.float64)
        buffer = _buffer(state.total)
        order, below = state.order, bm25_impacts.SORTED_BELOW
        single = dtype == "float32"
        count, _ = kernel(found, buffer, order, max(n, 0), single, mask, below, best, values, scoring)
        _give_back(buffer)  # (not reached if it raised: the buffer dropped)
        return best[: min(n, count)], values[: min(n, count)], count

    def _kernel_words(
        self, state: State, tokens: Sequence[str], blocks: bool = False
    ) -> tuple[dict[str, Any], tuple[Any, ...]]:
        """The words as the C kernel reads them, kept with the version: a word in fewer than
        RAW_FROM rows by its impacts (`_impacts`: made once, read at every query), a longer
        one by its postings, scored in the kernel (`_postings_of`: making a long list's
        impacts costs twice to five times scoring it, and a million's queries' long lists do
        not fit the kept impacts); with the scoring's (formula, k1, b, average length). With
        `blocks`, a query of BLOCKS_FROM postings or more has every word by its postings and
        their blocks (`_with_blocks`), and the scoring the rows a block: the kernel's block-max."""
        c = self.config
        kept = state.cached(self.impacts_key + " postings", Impacts)
        words = kept.get(list(tokens))
        if len(words) < len(set(tokens)):
            idf = idf_of(state, c.method, c.epsilon)
            for term in dict.fromkeys(tokens):
                if term not in words:
                    hit = _postings_of(state, term, idf)
                    if hit is None or hit[1] < RAW_FROM:  # a short list, or segments the kernel cannot read
                        hit = self._word_impacts(state, [term])[term]
                    words.update(kept.add({term: hit}))
        scoring = state.cached(self.impacts_key + " scoring", lambda: self._scoring(state))
        postings = 0
        for hit in words.values():  # (live rows for a word by its postings: near enough)
            if hit is not None:
                postings += hit[1] if isinstance(hit[0], float) else hit[5]
        if not blocks or postings < bm25_impacts.BLOCKS_FROM:
            return words, scoring
        # Many postings: each word by its postings and its blocks, for the kernel's block-max.
        idf = idf_of(state, c.method, c.epsilon)
        for term in dict.fromkeys(tokens):
            hit = words[term]
            if hit is not None and not (isinstance(hit[0], float) and len(hit) > 4):  # not yet with its blocks
                raw = hit if isinstance(hit[0], float) else _postings_of(state, term, idf)
                if raw is None:  # segments the kernel cannot read
                    return words, scoring
                words[term] = hit = _with_blocks(state, term, raw)
                kept.add({term: hit})
        return words, (*scoring, bm25_impacts.BLOCK_ROWS)

    def _scoring(self, state: State) -> tuple[int, float, float, float]:
        """What the C kernel scores words by their postings with: (formula: 0 for lucene's and
        robertson's, 1 for atire's, which rank_bm25's is; k1, b, the live rows' average length)."""
        c = self.config
        avgdl = _live_tokens(state, self.heading_weight) / state.n_live
        return 0 if c.method in ("lucene", "robertson") else 1, float(c.k1), float(c.b), float(avgdl)

    @property
    def impacts_key(self) -> str:
        """The version's cache key of this scoring's impacts."""
        if self._impacts_key is None:
            c = self.config
            self._impacts_key = f"bm25_impacts {c.method} {c.k1!r} {c.b!r} {c.delta!r} {c.epsilon!r}"
        return self._impacts_key

    def _word_impacts(self, state: State, tokens: Sequence[str]) -> dict[str, Any]:
        """The words' impacts (`_impacts`), kept with the version, computed for those not met since it opened."""
        impacts = state.cached(self.impacts_key, Impacts)
        words = impacts.get(list(tokens))
        if len(words) < len(set(tokens)):  # words not met since this version opened
            words.update(impacts.add(self._impacts(state, [t for t in dict.fromkeys(tokens) if t not in words])))
        return words

    def _impacts(self, state: State, terms: list[str]) -> dict[str, Any]:
        """Each word's impacts under this version's statistics: (its live rows as intp, idf x
        tfc(tf, dl) of each as float64, the bm25l/bm25+ constant or None; then the two arrays'
        addresses and their length, for the C kernel); None for a word no live row holds.
        Computed for all the words at once, element for element what one word at a time
        gives: bm25s's expressions under the corpus-wide IDF and average length."""
        import numpy as np

        c, n_docs = self.config, state.n_live
        avgdl = _live_tokens(state, self.heading_weight) / n_docs
        idf = idf_of(state, c.method, c.epsilon)
        formula = formula_of(c.method)
        tfc, k1, delta = _TFC[formula], c.k1, c.delta
        segments = state.cached("bm25_segments", lambda: _segment_arrays(state))
        out: dict[str, Any] = {}
        found, rows, tfs, idfs, skips = [], [], [], [], []
        for term in terms:
            hit = _postings(segments, term)
            out[term] = None  # not in the corpus: no part (rank_bm25 adds 0, bm25s skips it)
            if hit is not None:
                found.append(term)
                rows.append(hit[0])
                tfs.append(hit[1])
                idfs.append(idf(len(hit[0]), n_docs))
                if c.method in ("bm25l", "bm25+"):  # bm25s: a constant for chunks without the word
                    skips.append(idfs[-1] * tfc(0.0, _NORM[formula](avgdl, avgdl, k1, c.b), k1, delta))
        if not found:
            return out
        # Rows as intp: numpy gathers and scatters by int32 indices at a third of the speed.
        at, tf = np.concatenate(rows, dtype=np.intp), np.concatenate(tfs)
        norms = _norms(state, rows, at, formula, avgdl, k1, c.b)
        counts = [len(r) for r in rows]
        part = np.repeat(np.array(idfs), counts) * tfc(tf.astype(np.float64), norms, k1, delta)
        if skips:
            part -= np.repeat(np.array(skips), counts)
        ends = np.cumsum(counts).tolist()
        for i, term in enumerate(found):
            lo = ends[i - 1] if i else 0
            rows, parts = at[lo : ends[i]].copy(), part[lo : ends[i]].copy()
            # (the arrays' addresses and length: the C kernel reads them without the buffer
            # protocol's per-array cost, the tuple keeping them alive)
            where = rows.__array_interface__["data"][0], parts.__array_interface__["data"][0], len(rows)
            out[term] = (rows, parts, skips[i] if skips else None, *where)
        return out

    def _dense(self, rows: Any, values: Any, constant: float | None) -> Any:
        import numpy as np

        assert self.state is not None
        scores = np.zeros(self.state.total, dtype=np.float64)
        scores[rows] = values
        if constant is not None:
            scores += constant
        return scores.astype(self.config.dtype, copy=False)

    @property
    def drops_zero_scores(self) -> bool:
        """A chunk that shares no word with the query is not a result, except in the POC's
        own scoring (`rank_bm25_okapi`), whose zero-score candidates still earned RRF points."""
        drop = self.config.drop_zero_scores
        return self.config.method != "rank_bm25_okapi" if drop is None else drop


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(BM25Retriever)
