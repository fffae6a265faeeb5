"""A BM25 build's texts as token ids, a slice at a time, on every core.

A build tokenizes `STEP` texts at a time and keeps only ids: each slice becomes its words in
the order they first occur, each token's index in that list (int32) and each row's length,
and the build maps those words to its vocabulary (`Postings.of_slices`), so the vocabulary
is in corpus order whoever tokenized the slice. Tokenizing is most of a build (regular
expressions, stop words, stemming: pure Python per token), so with more than one core a
build of more than two slices hands slices to worker processes, a few at a time, in order;
the postings are the same bit for bit. A tokenizer the workers cannot make again (a class
defined inside a function, settings that do not round-trip) is run in this process.

`Ahead` starts that work earlier: while a large sync stores its chunks (one core busy), their
texts are tokenized a slice at a time on the other cores, and the build that follows takes a
slice from there when its texts are the same (by digest), tokenizing the others itself.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import types
from array import array as int_array
from collections import deque
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


def token_slices(
    tokenizer: Any, texts: Sequence[str], tokenize: Callable[[Sequence[str]], Any], ahead: Ahead | None = None
) -> Iterator[Slice]:
    """`slice_ids` of each STEP texts' tokens, in order: from worker processes when the build
    is more than two slices, this machine has more than one core and the tokenizer can be
    made again there; else here, with `tokenize`. Workers that cannot start (no process
    semaphores, a worker's import failing) leave the work to this process. With `ahead`, a
    slice it tokenized from the same texts is taken from it, and the others made here."""
    starts = range(0, len(texts), STEP)
    if ahead is not None and ahead.has_work():
        return _taken(ahead, [texts[i : i + STEP] for i in starts], tokenize)
    here = (slice_ids(tokenize(texts[i : i + STEP])) for i in starts)
    spec = _spec(tokenizer) if len(starts) > 2 and (os.cpu_count() or 1) > 1 else None
    if spec is None:
        return here
    return _in_workers(spec, [texts[i : i + STEP] for i in starts], here)


def _taken(ahead: Ahead, parts: list[Sequence[str]], tokenize: Callable[[Sequence[str]], Any]) -> Iterator[Slice]:
    for part in parts:
        done = ahead.take(part)
        yield done if done is not None else slice_ids(tokenize(part))


def _digest(texts: Sequence[str]) -> bytes:
    """What names a slice's texts: each one's length, then all of them (two slices with one
    digest hold the same texts, as two documents with one fingerprint do)."""
    h = hashlib.sha256(int_array("q", map(len, texts)).tobytes())
    h.update("".join(texts).encode("utf-8", "surrogatepass"))
    return h.digest()


class Ahead:
    """Texts about to be built, tokenized ahead a slice (STEP texts) at a time on worker
    processes: `add` texts in the order the build will read them (a sync's chunks as it
    stores them), `take` each slice's result as the build reaches it, `close` when the build
    is done (or will not come). A worker returns its slice's digest with it and the build
    compares it with that of its own texts: a slice of other texts is not used. Nothing
    starts unless a whole slice is added, on a machine of more than one core, for a
    tokenizer workers can make again; a worker that fails leaves its slices to the build."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer: Any = tokenizer  # None once there is nothing more to do ahead
        self._buffer: list[str] = []
        self._slices: deque[Any] = deque()  # futures of (digest, Slice), in the order added
        self._pool: Any = None

    def add(self, texts: Sequence[str]) -> None:
        if self._tokenizer is None:
            return
        self._buffer.extend(texts)
        while len(self._buffer) >= STEP and self._tokenizer is not None:
            part, self._buffer = self._buffer[:STEP], self._buffer[STEP:]
            self._submit(part)

    def has_work(self) -> bool:
        return bool(self._slices)

    def take(self, texts: Sequence[str]) -> Slice | None:
        """The next slice tokenized ahead if it holds exactly these texts (waiting for it if
        a worker has it); None if it holds others, if no worker has started it yet (the
        caller tokenizes it meanwhile: the build's process and the workers share what is
        left), or if its worker failed."""
        if not self._slices:
            return None
        future = self._slices.popleft()
        if future.cancel():
            return None
        try:
            digest, done = future.result()
        except Exception:  # noqa: BLE001 - a failed worker: the build tokenizes the slice itself
            return None
        return done if digest == _digest(texts) else None  # type: ignore[no-any-return]

    def close(self) -> None:
        self._buffer, self._slices, self._tokenizer = [], deque(), None
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _submit(self, part: list[str]) -> None:
        try:
            if self._pool is None:  # a whole slice at last (a large sync): anywhere to send it?
                spec = _spec(self._tokenizer) if (os.cpu_count() or 1) > 1 else None
                if spec is None:
                    self.close()
                    return
                self._pool = _workers(spec, (os.cpu_count() or 1) - 1)  # this process is busy storing
            with _plain_main():
                self._slices.append(self._pool.submit(_tokenize_named, part))
        except Exception:  # noqa: BLE001 - no workers here (no semaphores, a broken pool): the build does it
            self.close()


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
    from concurrent.futures.process import BrokenProcessPool

    workers = min(os.cpu_count() or 1, 4)
    try:
        pool = _workers(spec, workers)
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


def _workers(spec: tuple[str, str, dict[str, Any]], n: int) -> Any:
    """A pool of 1 to 4 tokenizing processes, each making the tokenizer of `spec` once.
    Spawned, not forked: a server's threads (readers, the watcher) must not be copied mid-lock."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max(1, min(n, 4)), multiprocessing.get_context("spawn"), _start, (spec,))


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


def _tokenize_named(texts: list[str]) -> tuple[bytes, Slice]:
    return _digest(texts), _tokenize(texts)
