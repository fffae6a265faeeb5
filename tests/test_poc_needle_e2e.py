"""The whole POC recipe on the real corpus, through the public Job API, as `plm run` does it.

Ingests poc_needle with configs/poc_parity.toml (MiniLM: BGE cannot be had offline) and
checks the port plan's accuracy bar and parity with the POC's own outputs. The ingest is
the session fixture `poc_needle_run` (tests/conftest.py), shared with the component-level
parity test.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from plm_index.job import Job

pytestmark = [pytest.mark.dataset, pytest.mark.slow]

ONE_CALL_SAMPLE = 0.1  # the one call's batches re-embedded; PLM_TEST_ONE_CALL=all: the whole corpus in one call


@pytest.fixture(scope="module")
def run(poc_needle_run: tuple[Job, dict]) -> tuple[Job, dict]:
    return poc_needle_run


def test_ingest_gives_the_poc_chunks_and_enriched_texts(run: tuple[Job, dict], reference_enriched: list[dict]) -> None:
    job, report = run
    assert report["ingest"]["documents"] == 1569
    chunks = job.store.chunks()
    assert [c.id for c in chunks] == [r["chunk_id"] for r in reference_enriched]
    mismatched = [c.id for c, r in zip(chunks, reference_enriched, strict=True) if c.index_text != r["enriched"]]
    assert mismatched == [], f"{len(mismatched)} enriched texts differ, e.g. {mismatched[:5]}"


def test_needle_hit_at_5_meets_the_port_plan_bar(run: tuple[Job, dict]) -> None:
    _, report = run
    metrics = {s["set"]: s["metrics"] for s in report["sets"]}
    assert metrics["needle"]["Hit@5"] >= 0.85


def test_top5_lists_equal_the_poc_reference(run: tuple[Job, dict], poc_needle: Path) -> None:
    _, report = run
    differ = []
    total = 0
    for s in report["sets"]:
        reference = json.loads((poc_needle / "reference" / f"{s['set']}.json").read_text())
        for row in s["per_query"]:
            total += 1
            if row["chunks"] != reference[row["query_id"]]["chunks"]:
                differ.append(f"{s['set']}/{row['query_id']}")
    assert total == 120
    assert differ == [], f"{len(differ)} of 120 top-5 lists differ from the POC: {differ[:10]}"


def one_call_batches(texts: list[str], batch_size: int) -> list[list[int]]:
    """The batches (indices into `texts`) that ONE sentence-transformers encode call over
    `texts` embeds together: it sorts the texts by their length in characters, longest
    first (`np.argsort` of the negated lengths), and cuts the sorted list every `batch_size`."""
    import numpy as np

    order = np.argsort([-len(text) for text in texts])
    return [[int(i) for i in order[start : start + batch_size]] for start in range(0, len(order), batch_size)]


def sampled_batches(batches: list[list[int]], seed: int = 7269) -> list[list[int]]:
    """A seeded sample of the batches: one of every 1/ONE_CALL_SAMPLE consecutive ones in the
    length order, so long and short texts alike are checked."""
    rng, step = random.Random(seed), round(1 / ONE_CALL_SAMPLE)
    return [batches[start + rng.randrange(min(step, len(batches) - start))] for start in range(0, len(batches), step)]


def test_chunk_vectors_equal_one_call_over_the_corpus(run: tuple[Job, dict]) -> None:
    """The POC embedded every chunk in one call; a sentence-transformers call sorts its texts
    by length into batches, so per-ingest-batch calls gave 264 of 7,269 vectors other last
    bits, and near-ties in dense ranks flipped on 21 of 6,107 natural queries.

    A vector depends only on the batch its text is embedded in, so the suite re-embeds a
    seeded tenth of the one call's 228 batches (one of every ten in length order), each as a
    call of its own: the same bits as the one call (all 228 checked so: equal), in a tenth of
    the time. Vectors embedded per ingest batch of 64 documents differed in 165 chunks of 53
    batches, 5 of them in this sample.
    `PLM_TEST_ONE_CALL=all` embeds the whole corpus in one call instead, as the POC did."""
    import numpy as np

    job, _ = run
    assert job.embedder is not None
    chunks = job.store.chunks()  # index order: the POC's corpus order
    ids, stored, _ = job.store.vectors()
    assert ids == [c.id for c in chunks]
    texts = [c.index_text for c in chunks]
    if os.environ.get("PLM_TEST_ONE_CALL") == "all":
        rows = np.arange(len(texts))
        want = np.asarray(job.embedder.embed(texts), dtype=np.float32)
    else:
        prefixed = [job.embedder.config.doc_prefix + t for t in texts]  # what the call sorts
        batches = sampled_batches(one_call_batches(prefixed, job.embedder.config.batch_size))
        rows = np.array([i for batch in batches for i in batch])
        assert len(batches) >= 20 and len(rows) >= 600
        want = np.concatenate(
            [np.asarray(job.embedder.embed([texts[i] for i in batch]), dtype=np.float32) for batch in batches]
        )
    differ = rows[~(np.asarray(stored)[rows] == want).all(axis=1)]
    assert len(differ) == 0, f"{len(differ)} of {len(rows)} vectors checked differ, e.g. {ids[differ[0]]}"
