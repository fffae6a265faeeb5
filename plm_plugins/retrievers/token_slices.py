"""A BM25 build's texts as token ids, a slice at a time, on every core.

A build tokenizes `STEP` texts at a time and keeps only ids: each slice becomes its words in
the order they first occur, each token's index in that list (int32) and each row's length,
and the build maps those words to its vocabulary (`Postings.of_slices`), so the vocabulary
is in corpus order whoever tokenized the slice. Tokenizing is most of a build (regular
expressions, stop words, stemming: pure Python per token), so with more than one core a
build of more than two slices hands slices to worker processes, a few at a time, in order;
the postings are the same bit for bit. A tokenizer the workers cannot make again (a class
defined inside a function, settings that do not round-trip) is run in this process.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from array import array as int_array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain, islice
from typing import Any

STEP = 16384  # texts tokenized at a time (their tokens become ids, then go)
Slice = tuple[list[str], Any, Any]  # (words in first-occurrence order, int32 ids, int32 lengths)


def slice_ids(rows: Sequence[Sequence[str]]) -> Slice:
    """Rows of tokens as (their words in the order they first occur, each token's index in
    that list, each row's length), the loops in C."""
    local = {word: i for i, word in enumerate(dict.fromkeys(chain.from_iterable(rows)))}
    ids = int_array("i", map(local.__getitem__, chain.from_iterable(rows)))
    return list(local), ids, int_array("i", map(len, rows))


def slices_of(rows: Iterable[Sequence[str]]) -> Iterator[Slice]:
    """`slice_ids` of each STEP rows of tokens."""
    rows_in = iter(rows)
    while batch := list(islice(rows_in, STEP)):
        yield slice_ids(batch)


def token_slices(tokenizer: Any, texts: Sequence[str], tokenize: Callable[[Sequence[str]], Any]) -> Iterator[Slice]:
    """`slice_ids` of each STEP texts' tokens, in order: from worker processes when the build
    is more than two slices, this machine has more than one core and the tokenizer can be
    made again there; else here, with `tokenize`. Workers that cannot start (no process
    semaphores, a worker's import failing) leave the work to this process."""
    starts = range(0, len(texts), STEP)
    here = (slice_ids(tokenize(texts[i : i + STEP])) for i in starts)
    spec = _spec(tokenizer) if len(starts) > 2 and (os.cpu_count() or 1) > 1 else None
    if spec is None:
        return here
    return _in_workers(spec, [texts[i : i + STEP] for i in starts], here)


def _spec(tokenizer: Any) -> tuple[str, str, dict[str, Any]] | None:
    cls = type(tokenizer)
    if "<locals>" in cls.__qualname__ or cls.__module__ == "__main__":
        return None
    try:
        config = tokenizer.config.model_dump(mode="json")
        if cls(cls.Config(**config), label="tokenizer").identity != tokenizer.identity:
            return None
    except Exception:  # noqa: BLE001 - settings that do not round-trip: tokenize here
        return None
    return cls.__module__, cls.__qualname__, config


def _in_workers(
    spec: tuple[str, str, dict[str, Any]], parts: list[Sequence[str]], here: Iterator[Slice]
) -> Iterator[Slice]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    workers = min(os.cpu_count() or 1, 4)
    try:
        # spawn, not fork: a server's threads (readers, the watcher) must not be copied mid-lock.
        pool = ProcessPoolExecutor(workers, multiprocessing.get_context("spawn"), _start, (spec,))
    except OSError:
        yield from here
        return
    with pool:
        try:
            with _plain_main():  # a worker is started by the submit that needs it
                pending = [pool.submit(_tokenize, list(part)) for part in parts[: workers + 1]]
            first = pending.pop(0).result()
        except (OSError, BrokenProcessPool):
            first = None
        if first is None:
            yield from here
            return
        yield first
        for part in parts[workers + 1 :]:  # a few slices in flight: memory stays a few slices'
            with _plain_main():
                pending.append(pool.submit(_tokenize, list(part)))
            yield pending.pop(0).result()
        for future in pending:
            yield future.result()


@contextmanager
def _plain_main() -> Iterator[None]:
    """A spawned worker imports the main module again unless it has no file and no spec: a
    user's script without an `if __name__ == "__main__":` guard would run (and ingest)
    again in every worker. While workers start, the main module is an empty one."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


_TOKENIZER: Any = None


def _start(spec: tuple[str, str, dict[str, Any]]) -> None:
    global _TOKENIZER
    module, name, config = spec
    cls: Any = importlib.import_module(module)
    for part in name.split("."):
        cls = getattr(cls, part)
    _TOKENIZER = cls(cls.Config(**config), label="tokenizer")


def _tokenize(texts: list[str]) -> Slice:
    return slice_ids(_TOKENIZER.tokenize(texts))
