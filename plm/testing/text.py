"""The checks of the stages that turn text into what is indexed: a tokenizer
(`check_tokenizer`), a chunker (`check_chunker`) and a stage after it, an enricher or an
extractor (`check_chunk_transform`, a `plm.ChunkTransform`)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Sequence

from plm.testing.corpus import MARKDOWN_DOCS
from plm.testing.rules import Rules, checking
from plm_core.interfaces import Chunker, ChunkTransform, Tokenizer
from plm_core.records import Chunk, Document

SAMPLE = ["The pod is Pending", "kube-proxy routes traffic; CPU at 95%", "", "Ünïcode café naïve", "pod pod"]


def check_tokenizer(tokenizer: Tokenizer, different: Tokenizer | None = None) -> None:
    """`different`, if given, is the same tokenizer with other settings that change its
    tokens: its `identity` must differ (a changed tokenizer rebuilds the index)."""
    with checking("tokenizers") as rules:
        got = tokenizer.tokenize(SAMPLE)
        rules.require(
            isinstance(got, list) and len(got) == len(SAMPLE),
            "tokenize(texts) returns one token list per text",
            f"{len(SAMPLE)} texts gave {got!r}",
        )
        rules.expect(
            all(isinstance(t, list) and all(isinstance(x, str) and x for x in t) for t in got),
            "each text's tokens are a list of non-empty strings",
            f"got {got!r}",
        )
        rules.expect(got[2] == [], "an empty text has no tokens", f"got {got[2]!r}")
        rules.expect(any(got), "plain words give tokens", f"{SAMPLE} gave {got!r}")
        with rules.part("tokenizing again"):
            _check_repeatable(rules, tokenizer, got)
        with rules.part("identity"):
            _check_identity(rules, tokenizer, got, different)


def _check_repeatable(rules: Rules, tokenizer: Tokenizer, got: list[list[str]]) -> None:
    rules.expect(tokenizer.tokenize(SAMPLE) == got, "tokenize() is deterministic: the same texts, the same tokens")
    alone = [tokenizer.tokenize([t])[0] for t in SAMPLE]
    rules.expect(alone == got, "a text's tokens do not depend on the other texts in the batch", f"{alone} vs {got}")
    rules.expect(tokenizer.run(list(SAMPLE)) == got, "run(texts) is tokenize(texts)")
    for text, tokens in zip(SAMPLE, got, strict=True):
        twice = Counter(tokenizer.tokenize([f"{text} {text}"])[0])
        rules.expect(
            twice == Counter({t: 2 * c for t, c in Counter(tokens).items()}),
            "repeats are kept: a text said twice gives each token twice (BM25 counts them)",
            f"{text!r} gave {tokens}; said twice it gave {dict(twice)}",
        )


def _check_identity(rules: Rules, tokenizer: Tokenizer, got: list[list[str]], different: Tokenizer | None) -> None:
    identity = tokenizer.identity
    rules.expect(isinstance(identity, dict), "`identity` is a dict", f"got {identity!r}")
    try:
        json.dumps(identity, sort_keys=True)
    except (TypeError, ValueError) as err:
        rules.expect(False, "`identity` is JSON (it goes into the index's build settings)", f"{err}")
    fresh = type(tokenizer)(tokenizer.config)
    rules.expect(
        fresh.identity == identity and fresh.tokenize(SAMPLE) == got,
        "a new instance with the same config has the same identity and tokens",
        f"identity {identity} vs {fresh.identity}",
    )
    if different is not None:
        rules.expect(
            different.identity != identity,
            "`identity` changes with settings that change the tokens",
            f"both {identity}",
        )


def check_chunker(chunker: Chunker, documents: Sequence[Document] | None = None) -> None:
    """The chunker contract on `documents` (default `MARKDOWN_DOCS`, Markdown with headings)."""
    with checking("chunkers") as rules:
        docs = list(documents if documents is not None else MARKDOWN_DOCS)
        chunker.ensure_warm()  # as the pipeline does before `run`: setup may live in warm_up
        rules.expect(chunker.run([]) == [], "no documents give no chunks")
        first = chunker.run(docs)
        rules.require(isinstance(first, list), "run returns a list", repr(type(first)))
        rules.require(first, "the test documents give at least one chunk")
        bad = next((c for c in first if not isinstance(c, Chunk)), None)
        rules.require(bad is None, "run returns plm.Chunk records", repr(type(bad)))
        order = {d.id: i for i, d in enumerate(docs)}
        ids = [c.id for c in first]
        rules.expect(len(set(ids)) == len(ids), "chunk ids are unique", str([i for i in ids if ids.count(i) > 1][:3]))
        for c in first:
            rules.expect(c.doc_id in order, "each chunk's doc_id names one of the documents given", repr(c.doc_id))
            rules.expect(c.text.strip(), "a chunk has text", repr(c.id))
        seen = [order.get(c.doc_id, -1) for c in first]
        rules.expect(seen == sorted(seen), "a document's chunks come together, documents in the order given")
        for doc in docs:
            starts = [c.start_char for c in first if c.doc_id == doc.id]
            rules.expect(starts == sorted(starts), "a document's chunks come in reading order (start_char)", doc.id)
        with rules.part("chunking again"):
            rules.expect(first == chunker.run(docs), "the same documents give the same chunks")
            alone = [c for d in docs for c in chunker.run([d])]
            rules.expect(
                alone == first,
                "a document's chunks do not depend on the other documents of the batch (a sync retries one by one)",
            )


def _chunks() -> list[Chunk]:
    """A chunker's chunks of MARKDOWN_DOCS, by paragraph, with the metadata the runtime adds;
    the last repeats an earlier text in another document (a cached stage must agree)."""
    out = []
    for doc in MARKDOWN_DOCS:
        start = 0
        for i, part in enumerate(doc.text.split("\n\n")):
            if part.strip() and not part.startswith(("---", "```")):
                meta = {"title": doc.title, "team": "a" if i % 2 else "b"}
                out.append(Chunk(id=f"{doc.id}#{i}", doc_id=doc.id, text=part, start_char=start, metadata=meta))
            start += len(part) + 2
    again = out[1]
    return [*out, dataclasses.replace(again, id="copy#0", doc_id="copy", metadata={"title": "Copy"})]


def check_chunk_transform(transform: ChunkTransform, chunks: Sequence[Chunk] | None = None) -> None:
    """An enricher or extractor (`plm.ChunkTransform`, family `enrichers`) on `chunks`
    (default: paragraphs of `MARKDOWN_DOCS`, one text repeated in another document): one
    chunk out for each in, in order, each the same chunk (id, document, text) with what the
    stage adds; the same every time. One that declares `cache_fields` is cached by text: it
    changes only those fields (of `plm.Chunk`), and what it sets depends on the chunk's text
    alone, not on the rest of the batch or the chunk's id."""
    with checking("enrichers") as rules:
        given = list(chunks if chunks is not None else _chunks())
        transform.ensure_warm()  # as the pipeline does before `run`
        rules.expect(transform.run([]) == [], "no chunks give no chunks")
        first = transform.run(list(given))
        rules.require(isinstance(first, list), "run returns a list", repr(type(first)))
        rules.require(all(isinstance(c, Chunk) for c in first), "run returns plm.Chunk records")
        rules.require(len(first) == len(given), "one chunk out for each chunk in", f"{len(given)} in, {len(first)} out")
        moved = [(a.id, b.id) for a, b in zip(given, first, strict=True) if (a.id, a.doc_id) != (b.id, b.doc_id)]
        rules.expect(not moved, "each chunk keeps its id and document, in the order given", f"{moved[:3]}")
        changed = [a.id for a, b in zip(given, first, strict=True) if a.text != b.text]
        rules.expect(not changed, "a chunk's text is kept (a stage adds to it: `enriched`, keywords)", f"{changed[:3]}")
        with rules.part("running again"):
            rules.expect(transform.run(list(given)) == first, "the same chunks give the same chunks")
        if transform.cache_fields:
            with rules.part("cache_fields"):
                _check_cached(rules, transform, given, first)


def _check_cached(rules: Rules, transform: ChunkTransform, given: list[Chunk], first: list[Chunk]) -> None:
    fields = {f.name for f in dataclasses.fields(Chunk)}
    unknown = [f for f in transform.cache_fields if f not in fields]
    rules.require(not unknown, "`cache_fields` names fields of plm.Chunk", f"{unknown}")
    others = fields - set(transform.cache_fields)
    for a, b in zip(given, first, strict=True):
        wrong = sorted(f for f in others if getattr(a, f) != getattr(b, f))
        rules.expect(
            not wrong,
            "a cached stage changes only its `cache_fields` (the cache keeps nothing else)",
            f"{a.id}: {wrong} changed, cache_fields {transform.cache_fields}",
        )

    def cached(chunk: Chunk) -> tuple[object, ...]:
        return tuple(getattr(chunk, f) for f in transform.cache_fields)

    alone = [transform.run([c])[0] for c in given]
    rules.expect(
        [cached(c) for c in alone] == [cached(c) for c in first],
        "a cached stage's fields do not depend on the other chunks of the batch (only uncached texts reach it)",
    )
    by_text: dict[str, tuple[object, ...]] = {}
    for chunk in first:
        seen = by_text.setdefault(chunk.text, cached(chunk))
        rules.expect(
            seen == cached(chunk),
            "a cached stage gives equal texts equal fields (the cache is keyed by text and settings)",
            f"{chunk.id}: {cached(chunk)} vs {seen}",
        )
