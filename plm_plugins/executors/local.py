"""The default executor: process each batch in this process, with the job's own stages
(models loaded once, shared with queries)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from plm import BatchProcessor, BatchResult, Document, Executor, ProcessorFactory, Registry, hookimpl


class LocalExecutor(Executor):
    """Batches one after another in this process; each result is committed before the
    next batch starts, so an interrupted ingest keeps every finished batch."""

    name = "local"

    def process(
        self, batches: Sequence[Sequence[Document]], local: BatchProcessor, recipe: ProcessorFactory, read_cache: bool
    ) -> Iterator[BatchResult]:
        yield from local.process_all(batches, read_cache)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(LocalExecutor)
