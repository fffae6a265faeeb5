"""Conformance checks for plm plugins: prove a stage keeps its family's contract with one call.

    import plm.testing

    def test_my_tokenizer_keeps_the_contract():
        plm.testing.check_tokenizer(MyTokenizer())

    def test_my_retriever_keeps_the_contract(tmp_path):
        plm.testing.check_retriever(MyRetriever, tmp_path)

One check per family `plm plugins` lists (its page: docs/contracts/<family>.md):

- loaders: `check_loader(loader, source=None)`: documents a store can hold, ids unique, the
  same every time, a missing source refused; where `files()` lists, `load_files` agrees.
- converters: `check_converter(converter, data, path="", unusable=None)`: `extensions`, a
  `plm.Converted` with text and JSON metadata, the same whatever the path; `unusable` bytes
  refused with a PlmUserError saying why.
- chunkers: `check_chunker(chunker, documents=None)`: chunks of the documents given, ids
  unique, each document's together and in reading order, the same every time and whether
  its documents come together or one by one (a sync retries a failed batch so).
- enrichers: `check_chunk_transform(transform, chunks=None)`: one chunk out per chunk in,
  in order, ids, documents and texts kept; a stage with `cache_fields` changes only those,
  as its text alone decides.
- embedders: `check_embedder(embedder, texts=None, atol=1e-4)`: one float32 row per text,
  the same alone as in a batch, `expected_model_name` the model it loads.
- tokenizers: `check_tokenizer(tokenizer, different=None)`: deterministic, one token list per
  text, repeats kept, a JSON `identity` that a fresh instance with the same config shares
  (and `different`, the tokenizer with settings that change its tokens, does not).
- expanders: `check_expander(expander, texts=None)`: an ExpandedQuery keeping k, depth,
  filters, id, weights and the user's text as `original`, also after another expander.
- query_generators: `check_query_generator(generator, documents=None)`: queries for
  documents of the corpus, the same every time, each span it says it copied found in its
  source, and none found verbatim once those spans and copies are cut.
- evaluators: `check_evaluator(evaluator, job=None, qset=None)`: a JSON report whose
  metrics are metric_names(), each the mean of its per-query values.
- reporters: `check_reporter(reporter, runs=None, folder=None)`: a JSON comparison that
  leaves the runs as they were; files written inside the folder given.
- retrievers: `check_retriever(make_retriever, folder=None, exact=True)`: n hits best
  first, the `allowed` mask applied before the cut, ties scored equal and ordered the same
  every time, an empty corpus, and a saved build that opens to the same hits
  (`exact=False`: an ANN search); `check_segmented_index(make_index, folder)`: an index
  kept by `refresh` (segments, deletions, merges) ranks as one built whole, at every step.
- fusers: `check_fuser(fuser, sources=("dense", "bm25"))`: one ranking, best first, from
  the sources'; deterministic; one empty source keeps the other's order; none, no hits.
- retrieval: `check_retrieval(stage, chunks=None)`: the `[query.retrieve]` stage, its
  retrievers built on the kit's corpus: a ranking of at most `depth` hits, ranked from 1,
  best first, filters applied before the cut.
- rankers and rerankers: `check_ranking_stage(stage, ranking=None)`: a `Ranking` of the
  same query, only hits it was given, each once, ranked from 1; the same every time; an
  empty ranking stays empty; `depth(k)` at least k.
- executors: `check_executor(executor, n_batches=6)`: each batch's result once, in any
  order, made locally or from the picklable recipe, `read_cache` passed on.
- stores: `check_store(make_store, reopen=None)`: documents, chunks, vectors, filters, meta
  and the change feed, and all of it as it was after `close()` and a reopen (`make_store()`
  called again opens the same location; or `reopen(store)`).
- any other family (a third party's, e.g. `normalizers`): `check_stage(stage, inputs)`:
  its `output_type`, the same output for the same input, from a fresh instance too.

A check reports every rule the stage breaks in one AssertionError, each line naming the
contract and its page: `stores contract (docs/contracts/stores.md): <rule>` with what was
seen below it. The checks build indexes from `MemorySnapshot`, a snapshot with a change feed
held in memory (the `plm.Snapshot` protocol, nothing more), and hand a retrieval stage a
`MemoryCorpus` (`plm.Corpus`). This package is not loaded by `import plm`; it loads the
index runtime when a check runs. Modules: `rules` (how a check reports), `corpus` (what
checks run on), then one per concern.
"""

from __future__ import annotations

from plm.testing.corpus import (
    CHUNKS,
    MARKDOWN_DOCS,
    MemoryCorpus,
    MemorySnapshot,
    embed,
    query,
    snapshot_of,
)
from plm.testing.embedders import check_embedder
from plm.testing.evaluation import (
    QUERY_SET,
    RUNS,
    KitJob,
    KitQuerySet,
    check_evaluator,
    check_query_generator,
    check_reporter,
)
from plm.testing.executors import KitProcessor, KitRecipe, check_executor
from plm.testing.files import check_converter, check_loader
from plm.testing.queries import check_expander, check_stage
from plm.testing.ranking import check_fuser, check_ranking_stage, check_retrieval
from plm.testing.retrievers import check_retriever, check_segmented_index
from plm.testing.stores import check_store
from plm.testing.text import check_chunk_transform, check_chunker, check_tokenizer

# family (as `plm plugins` lists it) -> its check; any other family: `check_stage`
CHECKS = {
    "chunkers": check_chunker,
    "converters": check_converter,
    "embedders": check_embedder,
    "enrichers": check_chunk_transform,
    "evaluators": check_evaluator,
    "executors": check_executor,
    "expanders": check_expander,
    "fusers": check_fuser,
    "loaders": check_loader,
    "query_generators": check_query_generator,
    "rankers": check_ranking_stage,
    "reporters": check_reporter,
    "rerankers": check_ranking_stage,
    "retrieval": check_retrieval,
    "retrievers": check_retriever,
    "stores": check_store,
    "tokenizers": check_tokenizer,
}

__all__ = [
    "CHECKS",
    "CHUNKS",
    "MARKDOWN_DOCS",
    "QUERY_SET",
    "RUNS",
    "KitJob",
    "KitProcessor",
    "KitQuerySet",
    "KitRecipe",
    "MemoryCorpus",
    "MemorySnapshot",
    "check_chunk_transform",
    "check_chunker",
    "check_converter",
    "check_embedder",
    "check_evaluator",
    "check_executor",
    "check_expander",
    "check_fuser",
    "check_loader",
    "check_query_generator",
    "check_ranking_stage",
    "check_reporter",
    "check_retrieval",
    "check_retriever",
    "check_segmented_index",
    "check_stage",
    "check_store",
    "check_tokenizer",
    "embed",
    "query",
    "snapshot_of",
]
