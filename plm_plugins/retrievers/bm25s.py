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

import json
import math
import re
import threading
from array import array as int_array
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from plm import (
    ComponentConfig,
    ExpandedQuery,
    PlmUserError,
    Retriever,
    Rows,
    ScoredChunk,
    SegmentedIndex,
    StaleIndexError,
    State,
    Tokenizer,
    default_registry,
    hookimpl,
    load_npy,
)
from plm_plugins.retrievers.token_slices import Ahead, Slice, slices_of, token_slices

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
        # share a word with the query; the full vector only where those cannot tell.
        rows, values, constant = self._matches(self.tokenize([query.text])[0])
        state = self.state
        assert state is not None
        drop = self.drops_zero_scores
        if constant is None:
            hits = state.top_of(rows, values.astype(self.config.dtype), n, self.label, allowed, drop)
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
        c = self.config
        impacts = state.cached(f"bm25_impacts {c.method} {c.k1!r} {c.b!r} {c.delta!r} {c.epsilon!r}", Impacts)
        words = impacts.get(tokens)
        if len(words) < len(set(tokens)):  # words not met since this version opened
            words.update(impacts.add(self._impacts(state, [t for t in dict.fromkeys(tokens) if t not in words])))
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

    def _impacts(self, state: State, terms: list[str]) -> dict[str, Any]:
        """Each word's impacts under this version's statistics: (its live rows as intp, idf x
        tfc(tf, dl) of each, the bm25l/bm25+ constant or None); None for a word no live row
        holds. Computed for all the words at once, element for element what one word at a
        time gives: bm25s's expressions under the corpus-wide IDF and average length."""
        import numpy as np

        c, n_docs = self.config, state.n_live
        avgdl = _live_tokens(state, self.heading_weight) / n_docs
        idf_of = _okapi_idf(state, c.epsilon) if c.method == "rank_bm25_okapi" else _IDF[c.method]
        formula = "atire" if c.method == "rank_bm25_okapi" else c.method  # rank_bm25's is ATIRE's
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
                idfs.append(idf_of(len(hit[0]), n_docs))
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
            out[term] = (at[lo : ends[i]].copy(), part[lo : ends[i]].copy(), skips[i] if skips else None)
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


class Postings:
    """One segment's BM25 data: the vocabulary (word -> id, first-occurrence order), each
    word's rows, term frequencies and first positions in the row (CSC: rows[indptr[w]:
    indptr[w + 1]], ascending; the positions order the words as rank_bm25 first met them),
    and each row's length in tokens.

    With a heading weight w other than 1 (`heading_weight`), `tf` holds each word's weighted
    frequency in float64, (tf - htf) + w x htf for htf of its tf in the row's heading, and `hl`
    each row's heading tokens: a row's weighted length is (dl - hl) + w x hl, and the live
    rows' total is summed in integers before it is weighted, so it is the same number
    whatever the segments (`weighted`)."""

    FILES = ("indptr.npy", "rows.npy", "tf.npy", "dl.npy", "first.npy")
    HEADING_FILE = "hl.npy"

    def __init__(
        self,
        vocab: dict[str, int],
        indptr: Any,
        rows: Any,
        tf: Any,
        dl: Any,
        first: Any,
        hl: Any = None,
        weight: float = 1.0,
    ) -> None:
        self.vocab, self.indptr, self.rows, self.tf, self.dl, self.first = vocab, indptr, rows, tf, dl, first
        self.hl, self.weight = hl, weight
        self._float_lengths: Any = None  # lengths(), float64, made once: a segment never changes
        self.tokens = int(dl.sum())
        self.heading_tokens = 0 if hl is None else int(hl.sum())

    def lengths(self) -> Any:
        """Each row's length as the scoring reads it: in tokens, or weighted (float64)."""
        import numpy as np

        if self.hl is None:
            return self.dl
        return weighted(np.asarray(self.dl, dtype=np.float64), np.asarray(self.hl, dtype=np.float64), self.weight)

    def float_lengths(self) -> Any:
        """`lengths()` as float64, the scoring's own type, made once for the segment."""
        import numpy as np

        if self._float_lengths is None:
            self._float_lengths = np.asarray(self.lengths(), dtype=np.float64)
        return self._float_lengths

    @classmethod
    def of(
        cls, corpus: Iterable[Sequence[str]], headings: list[list[str]] | None = None, weight: float = 1.0
    ) -> Postings:
        """The postings of rows of tokens (read once, in order: a generator's slices are
        dropped as they are read); with `headings` (each row's heading's tokens) and a
        weight, each word's heading occurrences (at most its occurrences in the row) count
        `weight` times."""
        return cls.of_slices(slices_of(corpus), headings, weight)

    @classmethod
    def of_slices(
        cls, slices: Iterable[Slice], headings: list[list[str]] | None = None, weight: float = 1.0
    ) -> Postings:
        """`of` over rows given as `token_slices` gives them: a slice's words join the
        vocabulary in the order they first occur in it, so ids are in corpus order."""
        import numpy as np

        vocab: dict[str, int] = {}
        lengths, parts = int_array("i"), [np.zeros(0, dtype=np.int32)]
        for words, ids, row_lengths in slices:
            lookup = np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), np.int32, len(words))
            parts.append(lookup[np.frombuffer(ids, dtype=np.int32)])
            lengths.extend(row_lengths)
        n_docs, n_vocab = len(lengths), len(vocab)
        dl = np.frombuffer(lengths, dtype=np.int32).copy() if n_docs else np.zeros(0, dtype=np.int32)
        pairs, tf, first = _word_row_pairs(np.concatenate(parts, dtype=np.int64), dl, n_vocab)
        del parts
        term = pairs // max(n_docs, 1)
        indptr = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(np.bincount(term, minlength=n_vocab), out=indptr[1:])
        rows = (pairs % max(n_docs, 1)).astype(np.int32)
        if headings is None:
            return cls(vocab, indptr, rows, tf, dl, first)
        if len(headings) != n_docs:
            raise ValueError(f"{len(headings)} headings for {n_docs} rows")
        # Each (word, row) of a heading, counted, found among the row's own pairs: a heading
        # word the row's tokens lack (a tokenizer that reads a line alone otherwise) is none.
        h_ids = [[vocab[t] for t in tokens if t in vocab] for tokens in headings]
        h_n = np.array([len(r) for r in h_ids], dtype=np.int64)
        h_term = np.fromiter((t for r in h_ids for t in r), dtype=np.int64, count=int(h_n.sum()))
        h_doc = np.repeat(np.arange(n_docs, dtype=np.int64), h_n)
        h_pairs, h_count = np.unique(h_term * max(n_docs, 1) + h_doc, return_counts=True)
        at_pair: Any = np.minimum(np.searchsorted(pairs, h_pairs), max(len(pairs) - 1, 0))
        found = pairs[at_pair] == h_pairs  # (no heading pair without a row pair of its word: none to find)
        htf = np.zeros(len(pairs), dtype=np.int64)
        htf[at_pair[found]] = np.minimum(h_count[found], tf[at_pair[found]])
        hl = np.bincount(rows, weights=htf, minlength=n_docs).astype(np.int32)
        wtf = weighted(tf.astype(np.float64), htf.astype(np.float64), weight)
        return cls(vocab, indptr, rows, wtf, dl, first, hl, weight)

    def save(self, folder: Path) -> None:
        import numpy as np

        (folder / "vocab.json").write_text(json.dumps(list(self.vocab), ensure_ascii=False))
        for name, array in zip(self.FILES, (self.indptr, self.rows, self.tf, self.dl, self.first), strict=True):
            np.save(folder / name, array, allow_pickle=False)
        if self.hl is not None:
            np.save(folder / self.HEADING_FILE, self.hl, allow_pickle=False)

    @classmethod
    def open(cls, folder: Path, n_rows: int, weight: float = 1.0) -> Postings:
        import numpy as np

        words = json.loads((folder / "vocab.json").read_text())
        # Memory-mapped, as plain array views of the maps: slicing an np.memmap costs a few
        # microseconds more per slice, paid for every query word in every segment.
        indptr, rows, tf, dl, first = (load_npy(folder / name).view(np.ndarray) for name in cls.FILES)
        hl = None if weight == 1.0 else load_npy(folder / cls.HEADING_FILE).view(np.ndarray)
        if (
            len(indptr) != len(words) + 1
            or len(rows) != len(tf)
            or len(first) != len(rows)
            or len(dl) != n_rows
            or int(indptr[-1]) != len(rows)
            or (hl is not None and len(hl) != n_rows)
            or (tf.dtype == np.float64) != (hl is not None)
        ):
            raise ValueError(f"postings of {len(words)} words, {len(rows)} entries, {len(dl)} lengths, {n_rows} rows")
        return cls({w: i for i, w in enumerate(words)}, indptr, rows, tf, dl, first, hl, weight)

    @classmethod
    def merge(cls, parts: list[Postings], keep: list[Any]) -> Postings:
        """The kept rows of each part, in order, as one segment's postings."""
        import numpy as np

        vocab: dict[str, int] = {}
        terms, rows, tfs, dls, hls, firsts = [], [], [], [], [], []
        offset = 0
        for part, kept in zip(parts, keep, strict=True):
            new_row = np.cumsum(kept) - 1 + offset  # old row -> merged row (where kept)
            words = list(part.vocab)
            counts = np.diff(np.asarray(part.indptr))
            term = np.repeat(np.arange(len(words), dtype=np.int64), counts)
            alive = kept[np.asarray(part.rows)]
            used = np.unique(term[alive])
            remap = np.full(len(words), -1, dtype=np.int64)
            remap[used] = [vocab.setdefault(words[t], len(vocab)) for t in used.tolist()]
            terms.append(remap[term[alive]])
            rows.append(new_row[np.asarray(part.rows)[alive]])
            tfs.append(np.asarray(part.tf)[alive])
            firsts.append(np.asarray(part.first)[alive])
            dls.append(np.asarray(part.dl)[kept])
            if part.hl is not None:
                hls.append(np.asarray(part.hl)[kept])
            offset += int(kept.sum())
        weight = parts[0].weight if parts else 1.0
        if any(p.weight != weight or (p.hl is None) != (weight == 1.0) for p in parts):
            raise ValueError("postings of different heading weights cannot be merged")
        term, row = np.concatenate(terms), np.concatenate(rows)
        by = np.lexsort((row, term))
        indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(term, minlength=len(vocab)), out=indptr[1:])
        dl = np.concatenate(dls).astype(np.int32)
        first = np.concatenate(firsts)[by].astype(np.int32)
        if weight == 1.0:
            return cls(vocab, indptr, row[by].astype(np.int32), np.concatenate(tfs)[by].astype(np.int32), dl, first)
        tf = np.concatenate(tfs)[by].astype(np.float64)
        return cls(vocab, indptr, row[by].astype(np.int32), tf, dl, first, np.concatenate(hls).astype(np.int32), weight)


def weighted(total: Any, heading: Any, weight: float) -> Any:
    """A count with its heading part weighted: (total - heading) + weight x heading (term
    frequencies and lengths alike, arrays or numbers: one expression, so the same floats
    wherever it is computed)."""
    return (total - heading) + weight * heading


class Impacts:
    """A version's word impacts (`BM25Retriever._impacts`), kept with its state as its queries
    meet the words, most recently used first, up to MAX_IMPACTS postings: a word is scored
    once per version, as Lucene and PISA keep impacts per segment, not once per query. Its
    arrays are read-only, shared by every query."""

    MAX_IMPACTS = 1 << 22  # postings (16 bytes each: 64 MiB)
    MAX_WORDS = 1 << 16  # words, those in no live row included

    def __init__(self) -> None:
        self._words: OrderedDict[str, Any] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, terms: list[str]) -> dict[str, Any]:
        with self._lock:
            out = {}
            for term in terms:
                if term in self._words:
                    self._words.move_to_end(term)
                    out[term] = self._words[term]
            return out

    def add(self, words: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            for term, hit in words.items():
                if hit is not None:
                    hit[0].flags.writeable = hit[1].flags.writeable = False
                    self._size += len(hit[0]) - (len(old[0]) if (old := self._words.get(term)) else 0)
                self._words[term] = hit
                self._words.move_to_end(term)
            while (self._size > self.MAX_IMPACTS or len(self._words) > self.MAX_WORDS) and len(self._words) > 1:
                _, hit = self._words.popitem(last=False)
                self._size -= len(hit[0]) if hit is not None else 0
            return words


def _segment_arrays(state: State) -> list[tuple[Any, ...]]:
    """Per segment what a query reads, looked up once per state (a query word visits every
    segment: attribute lookups there cost as much as the arithmetic)."""
    out = []
    for i, seg in enumerate(state.segments):
        p: Postings = seg.data
        out.append((p.vocab, p.indptr, p.rows, p.tf, int(state.offsets[i]), state.dead(i)))
    return out


def _postings(segments: list[tuple[Any, ...]], term: str) -> tuple[Any, Any] | None:
    """A word's live postings in every segment: global rows (ascending) and term
    frequencies; None when no live row holds it."""
    import numpy as np

    rows, tfs = [], []
    for vocab, indptr, posting_rows, posting_tf, offset, dead in segments:
        tid = vocab.get(term)
        if tid is None:
            continue
        lo, hi = indptr[tid], indptr[tid + 1]
        found, tf = posting_rows[lo:hi], posting_tf[lo:hi]
        if dead is not None:
            alive = ~dead[found]
            found, tf = found[alive], tf[alive]
        if len(found):
            rows.append(found + offset if offset else found)
            tfs.append(tf)
    if len(rows) < 2:
        return (rows[0], tfs[0]) if rows else None
    return np.concatenate(rows), np.concatenate(tfs)


def _word_row_pairs(key: Any, dl: Any, n_vocab: int) -> tuple[Any, Any, Any]:
    """The corpus's tokens (word ids, rows of lengths `dl` one after another; int64, used up)
    as each distinct (word, row) pair, `word * rows + row` ascending, its count, and the
    position in the row where the word first occurs.

    One in-place sort of `(word, row, position)` keys where they fit in 62 bits: a third of
    the memory and time of a stable argsort (np.unique with first indices), which is the
    way left for corpora too large for those keys."""
    import numpy as np

    n_rows, total = max(len(dl), 1), len(key)
    starts = np.cumsum(dl, dtype=np.int64) - dl  # each row's first token
    span = int(dl.max()) + 1 if len(dl) else 1  # positions 0 .. span - 1
    if not total or n_vocab * n_rows * span >= 1 << 62:
        key *= n_rows
        key += np.repeat(np.arange(len(dl), dtype=np.int64), dl)
        pairs, at, tf = np.unique(key, return_index=True, return_counts=True)
        rows = pairs % n_rows
        return pairs, tf.astype(np.int32), (at - starts[rows]).astype(np.int32)
    # word * rows * span + row * span + (token index - row start) = (word, row, position)
    key *= n_rows * span
    key += np.repeat(np.arange(len(dl), dtype=np.int64) * span - starts, dl)
    key += np.arange(total, dtype=np.int64)
    key.sort()
    pair = key // span
    begins = np.flatnonzero(np.concatenate(([True], pair[1:] != pair[:-1])))
    pairs = pair[begins]
    first = (key[begins] - pairs * span).astype(np.int32)  # a pair's smallest position sorts first
    tf = np.diff(np.append(begins, total)).astype(np.int32)
    return pairs, tf, first


def _norms(state: State, rows: list[Any], at: Any, formula: str, avgdl: float, k1: float, b: float) -> Any:
    """The length part (`_NORM`) of the rows `at` (the words' `rows`, each ascending, joined),
    element for element what every row's holds. A version's first words compute it for their
    rows alone (a write's new version at a million: no pass over every row before its first
    answer); once that has covered as many rows as the version has, every row's is computed
    and kept, and read from then on."""
    import numpy as np

    kept = state.cached(f"bm25_norms {formula} {k1!r} {b!r}", lambda: {"rows": 0, "norms": None})
    if kept["norms"] is None:
        kept["rows"] += len(at)
        if kept["rows"] <= state.total:
            return _NORM[formula](np.concatenate([_lengths_of(state, r) for r in rows]), avgdl, k1, b)
        kept["norms"] = _NORM[formula](_lengths(state), avgdl, k1, b)
    return kept["norms"][at]


def _lengths(state: State) -> Any:
    """Each row's length as the scoring reads it (segments concatenated), float64: each
    segment's made once, so a new version (a write) only joins them."""
    import numpy as np

    return np.concatenate([np.zeros(0)] + [seg.data.float_lengths() for seg in state.segments])


def _lengths_of(state: State, rows: Any) -> Any:
    """`_lengths(state)[rows]` without joining every segment's: each segment's part of the
    rows read where it lies."""
    import numpy as np

    out = np.empty(len(rows), dtype=np.float64)
    for i, at, local in state.by_segment(rows):
        out[at] = state.segments[i].data.float_lengths()[local]
    return out


def _sum_by_row(state: State, at: Any, part: Any) -> tuple[Any, Any]:
    """The rows in `at` whose parts do not sum to 0 (ascending) and their sums, each row's
    parts added in the order given (np.add.at adds one at a time, in order), into a zeroed
    buffer of at least the state's size, zeroed again where used and kept for the next query
    (one per query running at once), of this version or the next: no array of the corpus's
    size is made per query, nor per write (a new buffer's pages fault in as it is first
    written: 5 ms at a million). A row left out scores 0, as a row no query word reaches."""
    import numpy as np

    try:
        buffer = _BUFFERS.pop()  # list.pop and append are atomic: a buffer is one query's at a time
    except IndexError:
        buffer = np.zeros(0, dtype=np.float64)
    if len(buffer) < state.total:
        buffer = np.zeros(state.total + state.total // 8 + 1024, dtype=np.float64)  # room for writes
    sums = buffer[: state.total]
    np.add.at(sums, at, part)
    if len(at) < state.total * SORTED_BELOW:
        # Few parts for the rows: their rows sorted (0.9 ms for 93k parts) rather than every
        # row scanned (2.4 ms at a million rows, most of it branching over the scattered rows).
        rows = np.sort(at)
        rows = rows[np.concatenate(([True], rows[1:] != rows[:-1]))] if len(rows) else rows
        values = sums[rows]
        sums[rows] = 0.0
        kept = values != 0
        rows, values = rows[kept], values[kept]
    else:
        rows = np.flatnonzero(sums != 0)
        values = sums[rows]
        sums[rows] = 0.0  # (a -0.0 left behind adds as 0.0 does)
    if len(_BUFFERS) < _KEEP_BUFFERS:
        _BUFFERS.append(buffer)  # not reached (the buffer dropped) if anything above raised
    return rows, values


# `_sum_by_row` finds the rows by sorting the parts when they are fewer than this many per row.
SORTED_BELOW = 0.125

# Zeroed score buffers for `_sum_by_row`, shared by every BM25 index of the process.
_BUFFERS: list[Any] = []
_KEEP_BUFFERS = 8


def _live_tokens(state: State, weight: float = 1.0) -> float:
    """Tokens in the live rows (for the average length), kept with the state; with a heading
    weight, the weighted total of the integer totals (the same whatever the segments)."""

    def count() -> float:
        total = heading = 0
        for seg, dead in zip(state.segments, state.deleted, strict=True):
            data: Postings = seg.data
            total += data.tokens - (int(data.dl[dead].sum()) if len(dead) else 0)
            if data.hl is not None:
                heading += data.heading_tokens - (int(data.hl[dead].sum()) if len(dead) else 0)
        return total if weight == 1.0 else weighted(float(total), float(heading), weight)

    return state.cached("bm25_tokens", count)


def _okapi_idf(state: State, epsilon: float) -> Any:
    """rank_bm25.BM25Okapi's IDF over the live rows: log((N - df + 0.5) / (df + 0.5)), and
    for negative ones epsilon x the mean IDF. The mean is summed one word at a time in the
    order rank_bm25 first met the words (chunks in the store's index order, each chunk's
    words in order of appearance): another order can round the floor one ulp apart, and
    with it every stop word's score (a sync's new segment, or an edited chunk, holds words
    out of that order)."""
    import numpy as np

    def floor_of() -> float:
        df: dict[str, int] = {}
        firsts: dict[str, tuple[int, int]] = {}  # word -> (order key, position) where first met
        for i, seg in enumerate(state.segments):
            postings: Postings = seg.data
            counts = np.diff(np.asarray(postings.indptr))
            term = np.repeat(np.arange(len(counts)), counts)
            rows, first = np.asarray(postings.rows), np.asarray(postings.first)
            dead = state.dead(i)
            if dead is not None:
                alive = ~dead[rows]
                term, rows, first = term[alive], rows[alive], first[alive]
            if not len(term):
                continue
            order = np.asarray(seg.order)[rows]
            at = np.lexsort((first, order, term))  # by word, then where in the corpus
            starts = at[np.r_[True, term[at][1:] != term[at][:-1]]]  # each word's first posting
            n_of = np.bincount(term, minlength=len(counts))
            words = list(postings.vocab)
            for t, key, pos in zip(term[starts].tolist(), order[starts].tolist(), first[starts].tolist(), strict=True):
                word = words[t]
                df[word] = df.get(word, 0) + int(n_of[t])
                if word not in firsts or (key, pos) < firsts[word]:
                    firsts[word] = (key, pos)
        n_docs = state.n_live
        idf_sum = 0.0
        for word in sorted(df, key=firsts.__getitem__):  # sequential: Python 3.12+ sum() compensates rounding
            f = df[word]
            idf_sum += math.log(n_docs - f + 0.5) - math.log(f + 0.5)
        return epsilon * (idf_sum / len(df)) if df else 0.0

    floor = state.cached(f"okapi_floor{epsilon}", floor_of)

    def idf(df: int, n_docs: int) -> float:
        value = math.log(n_docs - df + 0.5) - math.log(df + 0.5)
        return floor if value < 0 else value

    return idf


def _idf_robertson(df: int, n: int) -> float:
    inner = (n - df + 0.5) / (df + 0.5)
    return math.log(max(inner, 1))


# bm25s's formulas (bm25s.scoring), the same expressions in the same order: the same floats.
_IDF: dict[str, Any] = {
    "robertson": _idf_robertson,
    "lucene": lambda df, n: math.log(1 + (n - df + 0.5) / (df + 0.5)),
    "atire": lambda df, n: math.log(n / df),
    "bm25l": lambda df, n: math.log((n + 1) / (df + 0.5)),
    "bm25+": lambda df, n: math.log((n + 1) / df),
}
# bm25s's term-frequency parts, split where bm25s's expression has a part that depends on the
# row's length alone (`_NORM`, computed once per row and version): the same expressions, in
# the same order, so the same floats.
_NORM: dict[str, Any] = {
    "robertson": lambda dl, avg, k1, b: k1 * ((1 - b) + b * dl / avg),
    "lucene": lambda dl, avg, k1, b: k1 * ((1 - b) + b * dl / avg),
    "atire": lambda dl, avg, k1, b: k1 * (1 - b + b * dl / avg),
    "bm25l": lambda dl, avg, k1, b: 1 - b + b * dl / avg,
    "bm25+": lambda dl, avg, k1, b: k1 * (1 - b + b * dl / avg),
}
_TFC: dict[str, Any] = {
    "robertson": lambda tf, norm, k1, delta: tf / (norm + tf),
    "lucene": lambda tf, norm, k1, delta: tf / (norm + tf),
    "atire": lambda tf, norm, k1, delta: (tf * (k1 + 1)) / (tf + norm),
    "bm25l": lambda tf, norm, k1, delta: ((k1 + 1) * (tf / norm + delta)) / (k1 + tf / norm + delta),
    "bm25+": lambda tf, norm, k1, delta: ((k1 + 1) * tf) / (norm + tf) + delta,
}


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(BM25Retriever)
