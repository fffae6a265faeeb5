"""The executor check (`check_executor`): each batch's result once, whichever order and
wherever it was processed, with `read_cache` passed on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from plm.testing.rules import checking
from plm_core.interfaces import Executor
from plm_core.records import BatchResult, Chunk, Document


class KitProcessor:
    """A batch processor (`plm.BatchProcessor`) that needs no model: one chunk per document,
    whose text says whether the cache could be read."""

    def process(self, batch: Sequence[Document], read_cache: bool = True) -> BatchResult:
        chunks = [Chunk(id=f"{d.id}#0", doc_id=d.id, text=f"{d.text} read_cache={read_cache}") for d in batch]
        return BatchResult(documents=list(batch), chunks=chunks)

    def process_all(self, batches: Any, read_cache: bool = True) -> Iterator[BatchResult]:
        for batch in batches:
            yield self.process(batch, read_cache)


class KitRecipe:
    """A picklable recipe (`plm.ProcessorFactory`): a worker elsewhere builds a KitProcessor."""

    def build(self) -> KitProcessor:
        return KitProcessor()


def _batches(n: int) -> list[list[Document]]:
    return [[Document(id=f"b{b}-d{i}", text=f"text {b} {i}") for i in range(1 + b % 3)] for b in range(n)]


def check_executor(executor: Executor, n_batches: int = 6) -> None:
    """`process(batches, local, recipe, read_cache)` yields one `plm.BatchResult` per batch,
    in any order, each holding that batch's documents and the chunks the processor made of
    them (locally or from the recipe), with `read_cache` passed on; no batches, no results."""
    with checking("executors") as rules:
        executor.ensure_warm()
        for read_cache in (True, False):
            with rules.part(f"processing with read_cache={read_cache}"):
                batches = _batches(n_batches)
                out = executor.process(batches, KitProcessor(), KitRecipe(), read_cache)
                rules.expect(isinstance(out, Iterator), "process returns an iterator (results as they come)")
                results = list(out)
                rules.require(all(isinstance(r, BatchResult) for r in results), "it yields plm.BatchResult records")
                got = Counter(tuple(d.id for d in r.documents) for r in results)
                want = Counter(tuple(d.id for d in b) for b in batches)
                rules.expect(got == want, "each batch's result comes once", f"got {dict(got)}, want {dict(want)}")
                expected = KitProcessor()
                for result in results:
                    made = expected.process(result.documents, read_cache).chunks
                    rules.expect(
                        result.chunks == made,
                        "a result holds the processor's chunks of its batch, made with the read_cache given",
                        f"{[c.text for c in result.chunks]} vs {[c.text for c in made]}",
                    )
        with rules.part("no batches"):
            none = list(executor.process([], KitProcessor(), KitRecipe(), True))
            rules.expect(none == [], "no batches give no results", f"{none!r}")
