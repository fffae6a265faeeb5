"""Crash safety and concurrency with real processes (issue: incremental, crash-safe indexing).

- An ingest subprocess is SIGKILLed at random moments (while batches commit, between
  them, during the BM25 rebuild); after each kill the store must be consistent: every
  document wholly old or wholly new, one vector per chunk, and the BM25 index either
  matching the store or detected as stale and rebuilt, never silently used. The next
  ingest then completes the work.
- A query process runs while another process ingests: it never errors, and every hit
  is a chunk of one version of its document, as stored at one moment.

Each document's text carries its version, and the texts are long enough to give several
chunks, so a half-written document would show as a mix of versions or a wrong count.
MiniLM runs on ONNX Runtime, as the recommended recipe does: the first ingest exports it
(with torch), every later process embeds without importing torch, in half the time. One data
folder serves the whole module (both stores, the subprocesses and the checks made in this
process), so the model is exported once, not once per store plus once for the checks.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plm_core.records import Document
from plm_core.settings import Settings
from plm_index.corpus import CorpusSnapshot
from plm_index.job import Job

pytestmark = pytest.mark.slow

N_DOCS = 40
BATCH = 4  # documents per transaction in the subprocess: 10 commits per full ingest
CONFIG = """
[job]
name = "crash"
[store]
use = "sqlite"
[embedder]
use = "sentence_transformers"
backend = "onnx"
model = "{model}"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
target_words = 60
min_words = 10
max_words = 120
overlap_sentences = 0
[query.retrieve]
use = "hybrid"
[query.retrieve.retrievers.bm25]
use = "bm25s"
[query.retrieve.retrievers.dense]
use = "dense"
[query.retrieve.fuser]
use = "rrf"
order = ["bm25", "dense"]
"""
TOPICS = ["backup", "network", "storage", "billing", "security", "scaling", "logging", "upgrade"]


def doc_text(i: int, version: int) -> str:
    """Doc i at a version: section count and words change with the version."""
    topic = TOPICS[i % len(TOPICS)]
    sections = []
    for s in range(2 + (i + version) % 3):
        words = " ".join(f"{topic}{(i * 7 + s * 3 + w) % 50} term{w}" for w in range(30 + 10 * (version % 2)))
        sections.append(f"## Part {s}\n\nVersion v{version} of doc{i:02d} part {s}. {words}.\n")
    return f"---\ntitle: Doc {i}\nteam: {topic}\nversion: {version}\n---\n\n# Doc {i}\n\n" + "\n".join(sections)


def write_corpus(folder: Path, version: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(N_DOCS):
        (folder / f"doc{i:02d}.md").write_text(doc_text(i, version))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PLM_DATA_DIR of every process here, for both stores: the ONNX export of the model is
    made once (by the first ingest) and found by every later process and by the checks."""
    return tmp_path_factory.mktemp("crash-data")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def setup(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    minilm_path: str,
    store_table_for: Any,
    data_dir: Path,
) -> dict:
    """The same guarantees on both stores: one module-wide config per store."""
    root = tmp_path_factory.mktemp(f"crash-{request.param}")
    config = root / "job.toml"
    table = store_table_for(request.param, request)
    config.write_text(CONFIG.format(model=minilm_path).replace('[store]\nuse = "sqlite"\n', table))
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PLM_PROGRESS": "0",
        "PLM_INGEST_BATCH": str(BATCH),
        "PLM_CACHE": "0",  # every run embeds for real, so kills land in real work
        # Windows of about two batches' chunks: stored in several steps, as a large folder's
        # windows of 8,192 are, so kills land between them (one window would hold them all).
        "PLM_EMBED_WINDOW": "16",
        "PLM_DATA_DIR": str(data_dir),
    }
    dsn = table.split('dsn = "')[1].split('"')[0] if request.param == "postgres" else None
    # The checks in this process read the same data folder: the export, never torch.
    settings = Settings(cache=False, progress=False, data_dir=str(data_dir))
    return {"root": root, "config": config, "env": env, "dsn": dsn, "settings": settings}


def ingest_cmd(setup: dict, corpus: Path, index: Path) -> list[str]:
    cli = [sys.executable, "-m", "plm_index.cli", "ingest", str(corpus), "--config", str(setup["config"])]
    return [*cli, "--index", str(index), "--json"]


def run_ingest(setup: dict, corpus: Path, index: Path) -> dict:
    res = subprocess.run(ingest_cmd(setup, corpus, index), env=setup["env"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def store_version(setup: dict, index: Path) -> int:
    """The committed corpus counter, read without taking any lock a writer needs."""
    if setup["dsn"]:
        import psycopg

        with psycopg.connect(setup["dsn"], autocommit=True) as conn:
            row = conn.execute("SELECT value FROM plm.meta WHERE key='corpus_version'").fetchone()
        return int(row[0]) if row else 0
    try:
        db = sqlite3.connect(f"file:{index / 'plm.sqlite'}?mode=ro", uri=True, timeout=5)
        try:
            row = db.execute("SELECT value FROM meta WHERE key='corpus_version'").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return -1
    return int(row[0]) if row else 0


def expected_chunks(setup: dict, corpus_version: int) -> dict[str, list[str]]:
    """doc id -> chunk texts the chunker makes of that version (no model needed)."""
    job = Job.from_config(setup["config"], index_dir=setup["root"] / "unused", settings=setup["settings"])
    chunker = job.transform.stages[0]
    docs = [Document(id=f"doc{i:02d}", text=doc_text(i, corpus_version)) for i in range(N_DOCS)]
    out: dict[str, list[str]] = {d.id: [] for d in docs}
    for chunk in chunker.run(docs):
        out[chunk.doc_id].append(chunk.text)
    return out


def check_invariants(setup: dict, index: Path, old: int, new: int) -> dict[str, int]:
    """Every document wholly `old` or wholly `new`; vectors and BM25 consistent. Returns
    how many documents are at each version."""
    expect = {old: expected_chunks(setup, old), new: expected_chunks(setup, new)}
    job = Job.from_config(setup["config"], index_dir=index, settings=setup["settings"])
    job.open()
    store = job.store
    assert store.consistency_problems() == []
    stored = {d: [c.text for c in store.chunks() if c.doc_id == d] for d in store.doc_fingerprints()}
    assert sorted(stored) == sorted(expect[old]), "a document is missing or extra"
    seen = {old: 0, new: 0}
    for doc_id, texts in stored.items():
        versions = [v for v in (old, new) if texts == expect[v][doc_id]]
        assert versions, f"{doc_id} is half-written: {len(texts)} chunks match neither version"
        seen[versions[0]] += 1
    ids, matrix, _ = store.vectors()
    assert ids == store.chunk_ids() and matrix.shape[0] == len(ids)  # one vector per chunk, in order
    # Any BM25 build on disk for the store's version is complete; a stale one is never used.
    version = store.version()
    hybrid = job.query_stages[-1]
    bm25 = hybrid.retrievers["bm25"]
    if bm25.is_current(version, index):
        with store.snapshot():
            bm25.load(CorpusSnapshot(store, index), index)  # raises if half-written or corrupt
    query = f"Version v{new} of doc03 part 0"
    hits = job.retrieve(query, k=3)
    # The BM25 in use (loaded, or rebuilt in memory when stale) is the store's, exactly.
    state = bm25.state
    rows = state.rows_in_index_order()
    rows = np.arange(state.total) if rows is None else rows
    assert [state.ids[int(r)] for r in rows] == store.chunk_ids()
    fresh = type(bm25)(bm25.config)
    fresh.build(CorpusSnapshot.of(store.chunks(), version=version), None)
    assert (bm25.scores(query)[rows] == fresh.scores(query)).all()
    top = store.get_chunks([hits[0].chunk_id])[hits[0].chunk_id]
    assert top.doc_id == "doc03"
    job.close()
    return seen


def test_sigkill_at_random_moments_leaves_the_store_consistent(setup: dict) -> None:
    root = setup["root"]
    corpus, index = root / "corpus", root / "index"
    write_corpus(corpus, 0)
    run_ingest(setup, corpus, index)
    seed = int(os.environ.get("PLM_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    batches = -(-N_DOCS // BATCH)
    outcomes = []
    for version in range(1, 6):
        write_corpus(corpus, version)
        start = store_version(setup, index)
        # Wait for a random number of committed batches (0 .. all, the last meaning the
        # BM25 rebuild phase), then a random extra delay, then SIGKILL.
        target, delay = rng.randint(0, batches), rng.uniform(0, 0.4)
        proc = subprocess.Popen(ingest_cmd(setup, corpus, index), env=setup["env"], stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while store_version(setup, index) < start + target and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        committed = store_version(setup, index) - start
        seen = check_invariants(setup, index, version - 1, version)
        outcomes.append((target, round(delay, 2), committed, seen[version]))
        report = run_ingest(setup, corpus, index)  # the next run completes the work
        assert report["unchanged"] == seen[version] and report["updated"] == N_DOCS - seen[version]
        assert check_invariants(setup, index, version - 1, version)[version] == N_DOCS
    print(f"seed {seed}; (batches waited for, delay s, batches committed, docs new) per kill: {outcomes}")
    # The kills really landed inside ingests: some left a mix of old and new documents.
    assert any(0 < new < N_DOCS for *_, new in outcomes), outcomes


QUERIER = textwrap.dedent(
    """
    import json, sys, time
    from plm_index.job import Job
    from plm_core.settings import Settings
    config, index, stop = sys.argv[1], sys.argv[2], sys.argv[3]
    job = Job.from_config(config, index_dir=index, settings=Settings(cache=False, progress=False))
    import pathlib
    n = 0
    while not pathlib.Path(stop).exists() or n == 0:
        i = n % 40
        filters = {"team": ["backup", "network"][n % 2]} if n % 3 == 0 else None
        try:
            hits = job.retrieve(f"doc{i:02d} part 1 term5", k=5, filters=filters)
            row = {"n": n, "version": str(job.searcher.version), "filters": filters,
                   "hits": [[h.doc_id, h.chunk_id, h.text, dict(h.metadata)] for h in hits]}
        except Exception as err:  # reported, and the test fails on it
            row = {"n": n, "error": f"{type(err).__name__}: {err}"}
        print(json.dumps(row), flush=True)
        n += 1
    """
)


def test_queries_during_an_ingest_see_consistent_snapshots(setup: dict) -> None:
    root = setup["root"]
    corpus, index, stop = root / "corpus2", root / "index2", root / "stop"
    write_corpus(corpus, 0)
    run_ingest(setup, corpus, index)
    # Files, not pipes: a full pipe would block the querier and hide the overlap.
    log, results = (root / "querier.log").open("w"), root / "querier.jsonl"
    with results.open("w") as sink:
        querier = subprocess.Popen(
            [sys.executable, "-c", QUERIER, str(setup["config"]), str(index), str(stop)],
            env=setup["env"],
            stdout=sink,
            stderr=log,
            text=True,
        )
    try:
        deadline = time.monotonic() + 120
        while not results.read_text() and querier.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # warm: model loaded, first answer given
        for version in (1, 2, 3):
            write_corpus(corpus, version)
            run_ingest(setup, corpus, index)
    finally:
        stop.touch()
        querier.wait(timeout=120)
        log.close()
    assert querier.returncode == 0, (root / "querier.log").read_text()[-3000:]
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    errors = [r for r in rows if "error" in r]
    assert not errors, errors[:3]
    texts = {v: expected_chunks(setup, v) for v in (0, 1, 2, 3)}
    for row in rows:
        assert len(row["hits"]) == 5, row
        for doc_id, chunk_id, text, meta in row["hits"]:
            # the hit is a chunk of one whole version of its document
            assert any(text in texts[v][doc_id] for v in texts), (row["n"], chunk_id)
            if row["filters"]:
                assert meta["team"] == row["filters"]["team"]
    versions = {r["version"] for r in rows}
    print(f"{len(rows)} queries, {len(errors)} errors, {len(versions)} corpus versions seen")
    # It really queried while the store changed: several corpus versions were seen.
    assert len(rows) >= 5 and len(versions) >= 3, (len(rows), len(versions))
