"""A BM25 build tokenizes slices in worker processes on a machine with more than one core:
the postings must be those of one process, bit for bit, vocabulary order included."""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import pytest

import plm
from plm_index.segments import Rows
from plm_plugins.retrievers import token_slices
from plm_plugins.retrievers.bm25s import BM25Retriever, Postings

WORDS = ["Pods", "pending", "the", "running", "nodes", "kubelet", "Ünïcode", "café", "scheduling", "42", "a"]


def _texts(n: int) -> list[str]:
    rng = random.Random(7)
    return [" ".join(rng.choices(WORDS, k=rng.randrange(0, 12))) + f" w{i % 97}" for i in range(n)]


def _arrays(p: Postings) -> list[Any]:
    return [list(p.vocab), p.indptr, p.rows, p.tf, p.dl, p.first]


def _build(tokenizer: Any, texts: list[str]) -> Postings:
    rows = Rows(np.arange(1, len(texts) + 1), [f"c{i}" for i in range(len(texts))], np.arange(len(texts)), texts=texts)
    return BM25Retriever(label="bm25", tokenizer=tokenizer).build_data(rows)


def _same(a: Postings, b: Postings) -> None:
    for x, y in zip(_arrays(a), _arrays(b), strict=True):
        assert type(x) is type(y) and (x == y if isinstance(x, list) else np.array_equal(x, y) and x.dtype == y.dtype)


@pytest.mark.parametrize("tokenizer", ["bm25s_stem", {"use": "snowball", "language": "german"}, "whitespace_lower"])
def test_slices_tokenized_by_workers_give_the_postings_of_one_process(tokenizer: Any, monkeypatch: Any) -> None:
    texts = _texts(700)
    monkeypatch.setattr(token_slices, "STEP", 50)  # 14 slices: the workers' path
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    spawned = []
    real = token_slices._in_workers
    monkeypatch.setattr(token_slices, "_in_workers", lambda *a: spawned.append(1) or real(*a))
    parallel = _build(tokenizer, texts)
    assert spawned, "the build did not use worker processes"
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    spawned.clear()
    alone = _build(tokenizer, texts)
    assert not spawned
    _same(parallel, alone)
    _same(alone, Postings.of(BM25Retriever(label="bm25", tokenizer=tokenizer).tokenize(texts)))  # one slice


def test_a_tokenizer_workers_cannot_make_is_run_here(monkeypatch: Any) -> None:
    class Local(plm.Tokenizer):  # defined in a function: a worker cannot import it
        name = "local_words"

        def tokenize(self, texts: Any) -> list[list[str]]:
            return [t.lower().split() for t in texts]

    monkeypatch.setattr(token_slices, "STEP", 50)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(token_slices, "_in_workers", lambda *a: pytest.fail("handed to workers"))
    texts = _texts(300)
    retriever = BM25Retriever(label="bm25")
    retriever.tokenizer = Local(Local.Config(), label="tokenizer")
    rows = Rows(np.arange(1, 301), [f"c{i}" for i in range(300)], np.arange(300), texts=texts)
    _same(retriever.build_data(rows), Postings.of([t.lower().split() for t in texts]))


def test_a_script_without_a_main_guard_is_not_run_again_by_the_workers(tmp_path: Any) -> None:
    import subprocess
    import sys

    marker = tmp_path / "runs.txt"
    script = tmp_path / "build.py"  # no `if __name__ == "__main__":`, as many users write
    script.write_text(
        f"""
import os
import numpy as np
from plm_index.segments import Rows
from plm_plugins.retrievers import token_slices
from plm_plugins.retrievers.bm25s import BM25Retriever

with open({str(marker)!r}, "a") as f:
    f.write("run\\n")
token_slices.STEP = 20
os.cpu_count = lambda: 2
spawned = []
real = token_slices._in_workers
token_slices._in_workers = lambda *a: spawned.append(1) or real(*a)
texts = [f"pods pending on node {{i}}" for i in range(200)]
rows = Rows(np.arange(1, 201), [f"c{{i}}" for i in range(200)], np.arange(200), texts=texts)
data = BM25Retriever(label="bm25").build_data(rows)
assert spawned and len(data.dl) == 200
"""
    )
    subprocess.run([sys.executable, str(script)], check=True, timeout=120, cwd=tmp_path)
    assert marker.read_text() == "run\n"  # the workers did not run the script's body again


def test_workers_that_cannot_start_leave_the_build_to_this_process(monkeypatch: Any) -> None:
    texts = _texts(300)
    monkeypatch.setattr(token_slices, "STEP", 50)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(token_slices, "_spec", lambda tokenizer: ("no_such_module_for_plm", "Nothing", {}))
    started = []
    real = token_slices._in_workers
    monkeypatch.setattr(token_slices, "_in_workers", lambda *a: started.append(1) or real(*a))
    fell_back = _build("bm25s_stem", texts)  # each worker's start fails: the pool breaks
    assert started
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    _same(fell_back, _build("bm25s_stem", texts))


def _rows(texts: list[str]) -> Rows:
    return Rows(np.arange(1, len(texts) + 1), [f"c{i}" for i in range(len(texts))], np.arange(len(texts)), texts=texts)


def _settled(retriever: BM25Retriever) -> None:
    """Wait until the workers have tokenized every slice handed to them (as a large sync's
    store loop gives them time to)."""
    from concurrent.futures import wait

    assert retriever._ahead is not None
    wait(list(retriever._ahead._slices), timeout=120)


@pytest.mark.parametrize("tokenizer", ["bm25s_stem", "whitespace_lower"])
def test_texts_tokenized_ahead_give_the_postings_of_a_build_without(tokenizer: Any, monkeypatch: Any) -> None:
    texts = _texts(430)
    monkeypatch.setattr(token_slices, "STEP", 50)  # 8 whole slices ahead, 30 texts left to the build
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    retriever = BM25Retriever(label="bm25", tokenizer=tokenizer)
    for i in range(0, len(texts), 64):  # as a sync stores them, a batch at a time
        retriever.ahead(texts[i : i + 64])
    _settled(retriever)
    here = []
    real = token_slices.slice_ids
    monkeypatch.setattr(token_slices, "slice_ids", lambda rows: here.append(len(rows)) or real(rows))
    ahead = retriever.build_data(_rows(texts))
    retriever.ahead_done()
    assert here == [30], "the build tokenized slices the workers had made"
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    _same(ahead, _build(tokenizer, texts))


def test_a_slice_tokenized_ahead_from_other_texts_is_not_used(monkeypatch: Any) -> None:
    texts = _texts(200)
    other = [t.replace("pending", "running") for t in texts]  # the same count, other words
    assert other != texts
    monkeypatch.setattr(token_slices, "STEP", 50)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    retriever = BM25Retriever(label="bm25")
    retriever.ahead(texts[:100] + other[100:])  # slices 3 and 4 hold other texts than the build's
    _settled(retriever)
    built = retriever.build_data(_rows(texts))
    retriever.ahead_done()
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    _same(built, _build("bm25s_stem", texts))


def test_slices_no_worker_has_started_are_tokenized_by_the_build(monkeypatch: Any) -> None:
    """A build that reaches texts still queued takes them back (the build's process and
    the workers share what is left) and gives the same postings."""
    texts = _texts(600)
    monkeypatch.setattr(token_slices, "STEP", 50)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    retriever = BM25Retriever(label="bm25")
    retriever.ahead(texts)  # 12 slices at once: most are still queued when the build starts
    built = retriever.build_data(_rows(texts))
    retriever.ahead_done()
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    _same(built, _build("bm25s_stem", texts))


def test_a_sync_hands_its_texts_ahead_in_the_order_the_build_reads_them(tmp_path: Any, monkeypatch: Any) -> None:
    """The store loop gives each committed batch's index texts to the BM25 index; in a fresh
    ingest those are the build's rows, in order (else no slice would ever be used). After
    the sync, its workers are gone."""
    import multiprocessing
    import time

    from plm_index.job import Job

    monkeypatch.setattr(token_slices, "STEP", 40)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    added: list[str] = []
    real = token_slices.Ahead.add
    monkeypatch.setattr(token_slices.Ahead, "add", lambda self, texts: added.extend(texts) or real(self, texts))
    folder = tmp_path / "docs"
    folder.mkdir()
    for i, text in enumerate(_texts(300)):
        (folder / f"note{i:03d}.md").write_text(f"# Note {i}\n\n{text}\n", encoding="utf-8")
    config = tmp_path / "plm.toml"
    config.write_text(
        '[job]\nname = "ahead"\n[index.load]\nuse = "markdown_dir"\n[index.chunk]\nuse = "markdown_semantic"\n'
        '[query.retrieve]\nuse = "bm25s"\n'
    )
    settings = plm.Settings(progress=False, cache=False, ingest_batch=16)
    job = Job.from_config(config, index_dir=tmp_path / "index", settings=settings)
    report = job.ingest([folder])
    assert report.chunks == 300
    assert added == job.store.index_texts()[1]
    deadline = time.monotonic() + 30
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not multiprocessing.active_children()
    hits = job.retrieve("kubelet scheduling", k=3)
    assert hits and all("kubelet" in h.text.lower() or "scheduling" in h.text.lower() for h in hits)
