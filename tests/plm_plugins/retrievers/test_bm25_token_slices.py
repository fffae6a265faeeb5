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
