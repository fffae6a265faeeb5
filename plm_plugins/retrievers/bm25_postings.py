"""A BM25 segment's postings: what `bm25s` keeps on disk for each segment, how a segment's
rows of tokens become them, and how segments merge into one.

The format (`FORMAT` in `bm25s`): `vocab.json` (the words, first-occurrence order) and one
`.npy` each for the CSC arrays `Postings` describes; `hl.npy` too with a heading weight."""

from __future__ import annotations

import json
from array import array as int_array
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from plm.indexes import load_npy
from plm_plugins.retrievers.token_slices import Slice, slices_of


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
        self.word_bounds: dict[str, Any] = {}  # what bm25_topk keeps per word (`_stats_of`)
        self.word_blocks: OrderedDict[str, Any] = OrderedDict()  # bm25_impacts._blocks_of's
        self.blocks_kept = 0  # blocks in word_blocks
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
        # Read into memory, not memory-mapped: a file truncated in place under a server (`cp`
        # or `rsync --inplace` over a live index) took it down with SIGBUS at the next query
        # that touched a page gone from the map, and bytes overwritten in place were scored as
        # they came. What is read is what was checked; the runtime stats the files at every
        # query and refuses the segment once one changed (`plm_index.segments.files`).
        indptr, rows, tf, dl, first = (load_npy(folder / name, mmap=False) for name in cls.FILES)
        hl = None if weight == 1.0 else load_npy(folder / cls.HEADING_FILE, mmap=False)
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
