"""`plm.testing`'s tokenizer, chunker and chunk transform checks pass a stage written from
the contract alone and fail, naming the rule, for one broken in one way."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

import plm
import plm.testing


class Words(plm.Tokenizer):
    name = "kit_words"

    class Config(plm.ComponentConfig):
        lower: bool = True

    config: Config

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        return [(t.lower() if self.config.lower else t).split() for t in texts]


def test_a_tokenizer_written_from_the_contract_passes() -> None:
    plm.testing.check_tokenizer(Words(), different=Words(lower=False))


class Counting(Words):
    name = "kit_counting"
    calls = 0

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        Counting.calls += 1
        return [[*tokens, f"call{Counting.calls}"] if tokens else [] for tokens in super().tokenize(texts)]


class Deduplicating(Words):
    name = "kit_dedup"

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        return [list(dict.fromkeys(tokens)) for tokens in super().tokenize(texts)]


class EmptyToken(Words):
    name = "kit_empty_token"

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        return [t.split(" ") for t in texts]


class BatchPosition(Words):
    name = "kit_batch_position"

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        return [[f"{tok}{i}" for tok in tokens] for i, tokens in enumerate(super().tokenize(texts))]


class SetIdentity(Words):
    name = "kit_set_identity"

    @property
    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "stopwords": {"the", "a"}}


class ConstantIdentity(Words):
    name = "kit_constant_identity"

    @property
    def identity(self) -> dict[str, Any]:
        return {"name": self.name}


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (Counting, r"tokenize\(\) is deterministic"),
        (Deduplicating, r"repeats are kept"),
        (EmptyToken, r"(non-empty strings|an empty text has no tokens)"),
        (BatchPosition, r"do not depend on the other texts in the batch"),
        (SetIdentity, r"`identity` is JSON"),
        (ConstantIdentity, r"`identity` changes with settings"),
    ],
)
def test_a_broken_tokenizer_fails_naming_the_contract(broken: type[Words], message: str) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_tokenizer(broken(), different=broken(lower=False))
    assert str(err.value).startswith("tokenizers contract (docs/contracts/tokenizers.md)")


class Paragraphs(plm.Chunker):
    name = "test_paragraphs"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:
        out = []
        for doc in data:
            start = 0
            for i, part in enumerate(doc.text.split("\n\n")):
                if part.strip():
                    out.append(plm.Chunk(id=f"{doc.id}#{i}", doc_id=doc.id, text=part, start_char=start))
                start += len(part) + 2
        return out


class WarmParagraphs(Paragraphs):
    name = "test_warm_paragraphs"

    def warm_up(self) -> None:  # setup where DESIGN.md asks for it; the pipeline warms first
        self.split = "\n\n"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:
        assert self.split
        return super().run(data)


def test_a_chunker_written_from_the_contract_passes() -> None:
    plm.testing.check_chunker(Paragraphs())
    plm.testing.check_chunker(WarmParagraphs())
    plm.testing.check_chunker(plm.default_registry().get("markdown_semantic", "chunkers").cls())


class NumberedAcrossTheBatch(Paragraphs):
    name = "test_numbered"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:  # ids from a counter over the batch
        return [replace(c, id=f"{c.doc_id}#{i}") for i, c in enumerate(super().run(data))]


class SameIds(Paragraphs):
    name = "test_same_ids"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:
        return [replace(c, id=c.id.split("#")[1]) for c in super().run(data)]


class Backwards(Paragraphs):
    name = "test_backwards"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:
        return list(reversed(super().run(data)))


class Strings(Paragraphs):
    name = "test_strings"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:
        return [c.text for c in super().run(data)]  # type: ignore[misc]


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (NumberedAcrossTheBatch, "a document.s chunks do not depend on the other documents"),
        (SameIds, "chunk ids are unique"),
        (Backwards, "a document's chunks come together"),
        (Strings, "run returns plm.Chunk records"),
    ],
)
def test_a_broken_chunker_fails_naming_the_contract(broken: type[Paragraphs], message: str) -> None:
    with pytest.raises(AssertionError, match="chunkers contract .docs/contracts/chunkers.md.: " + message):
        plm.testing.check_chunker(broken())


# ---------------------------------------------------------------------- a chunk transform
class CapitalWords(plm.ChunkTransform):
    name = "kit_capital_words"
    cache_fields = ("keywords",)

    def run(self, data: list[plm.Chunk]) -> list[plm.Chunk]:
        return [replace(c, keywords=tuple(w for w in c.text.split() if w.istitle())) for c in data]


class TitleInEnriched(plm.ChunkTransform):
    """Not cached: may read more than the text (here the chunk's title)."""

    name = "kit_title_in_enriched"

    def run(self, data: list[plm.Chunk]) -> list[plm.Chunk]:
        return [replace(c, enriched=f"{c.metadata.get('title', '')}\n{c.text}") for c in data]


def test_a_chunk_transform_written_from_the_contract_passes() -> None:
    plm.testing.check_chunk_transform(CapitalWords())
    plm.testing.check_chunk_transform(TitleInEnriched())


class DropsEmpty(CapitalWords):
    name = "kit_drops_empty"

    def run(self, data: list[plm.Chunk]) -> list[plm.Chunk]:
        return [c for c in super().run(data) if not c.text.startswith("#")]  # headings dropped


class CachedButReadsTheTitle(CapitalWords):
    name = "kit_cached_title"

    def run(self, data: list[plm.Chunk]) -> list[plm.Chunk]:
        return [replace(c, keywords=(str(c.metadata.get("title")),)) for c in data]


class CachedButSetsAnotherField(CapitalWords):
    name = "kit_cached_other_field"

    def run(self, data: list[plm.Chunk]) -> list[plm.Chunk]:
        return [replace(c, enriched=c.text.upper()) for c in super().run(data)]


class RanksWithinTheBatch(CapitalWords):
    name = "kit_ranks_in_batch"

    def run(self, data: list[plm.Chunk]) -> list[plm.Chunk]:
        return [replace(c, keywords=(f"n{len(data)}",)) for c in data]


class Reordered(TitleInEnriched):
    name = "kit_reordered"

    def run(self, data: list[plm.Chunk]) -> list[plm.Chunk]:
        return list(reversed(super().run(data)))


class BadCacheField(CapitalWords):
    name = "kit_bad_cache_field"
    cache_fields = ("keyword",)


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (DropsEmpty, r"one chunk out for each chunk in"),
        (CachedButReadsTheTitle, r"a cached stage gives equal texts equal fields"),
        (CachedButSetsAnotherField, r"a cached stage changes only its `cache_fields`"),
        (RanksWithinTheBatch, r"a cached stage's fields do not depend on the other chunks of the batch"),
        (Reordered, r"each chunk keeps its id and document, in the order given"),
        (BadCacheField, r"`cache_fields` names fields of plm.Chunk"),
    ],
)
def test_a_broken_chunk_transform_fails_naming_the_contract(broken: type[plm.ChunkTransform], message: str) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_chunk_transform(broken())
    assert str(err.value).startswith("enrichers contract (docs/contracts/enrichers.md)")
