"""Progress of long steps (an ingest's batches, an evaluation's queries): a rich bar on
stderr when it is a terminal and progress is on (PLM_PROGRESS); otherwise (a pipe, a log
file, a job in the background, PLM_PROGRESS=0) a plain line on stderr every
`HEARTBEAT_SECONDS` of a long step, so a long ingest shows it is alive, and nothing at all
for a step shorter than that."""

from __future__ import annotations

import contextlib
import io
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from typing import Any, TypeVar

T = TypeVar("T")

HEARTBEAT_SECONDS = 10.0  # without a bar: the first line after this long, then one per interval


def progress_iter(
    items: Iterable[T],
    description: str,
    show: bool = True,
    total_items: int | None = None,
    unit: str = "",
    step: Callable[[T], int] | None = None,
) -> Iterator[T]:
    """Yield items while advancing by `step(item)`, else by len(item) (when sized and
    total_items given), else by 1. An unsized iterable (a generator) needs total_items."""
    if isinstance(items, Sized) and not len(items):
        yield from items
        return
    total = total_items or (len(items) if isinstance(items, Sized) else 0)

    def advance(item: T) -> int:
        if step is not None:
            return step(item)
        return len(item) if total_items is not None and isinstance(item, Sized) else 1

    if show and on_terminal():
        yield from _bar(items, description, total, unit, advance)
    else:
        yield from _heartbeat(items, description, total, unit, advance)


def on_terminal() -> bool:
    """Whether stderr is a terminal (a bar), not a pipe, a log or a background job (lines)."""
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def _bar(items: Iterable[T], description: str, total: int, unit: str, advance: Callable[[T], int]) -> Iterator[T]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    # stderr: stdout carries results (`plm ingest --json`), never a bar
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task(description, total=total or None)
        for item in items:
            yield item
            bar.advance(task, advance(item))


def _heartbeat(items: Iterable[T], description: str, total: int, unit: str, advance: Callable[[T], int]) -> Iterator[T]:
    every = HEARTBEAT_SECONDS
    start = last = time.monotonic()
    done, said = 0, -1  # the count the last line said (-1: none yet)
    first: tuple[float, int] | None = None  # when the first item was done, and the count then
    for item in items:
        yield item
        done += advance(item)
        now = time.monotonic()
        first = first or (now, done)
        if now - last >= every:
            left = _left(first, now, done, total)
            print(progress_line(description, done, total, unit, now - start, left), file=sys.stderr, flush=True)
            last, said = now, done
    if 0 <= said < done:  # a long step says when it is over, too, unless its last line did
        print(progress_line(description, done, total, unit, time.monotonic() - start), file=sys.stderr, flush=True)


def _left(first: tuple[float, int], now: float, done: int, total: int) -> float | None:
    """Seconds left at the pace since the first item was done, not since the start: the wait
    for the first (a model loading, a window of chunks embedded before its first batch
    commits, and the rest of the window at once) says nothing of the rest. None until a
    second item has come."""
    at, count = first
    if not total or done <= count or now <= at:
        return None
    return (total - done) * (now - at) / (done - count)


def progress_line(description: str, done: int, total: int, unit: str, seconds: float, left: float | None = None) -> str:
    """ "index: 1,200 of 5,000 docs (24%), 35 s, about 110 s left" (that last part given)."""
    what = f" {unit}" if unit else ""
    if not total:
        return f"{description}: {done:,}{what}, {seconds:.0f} s"
    line = f"{description}: {done:,} of {total:,}{what} ({100 * done // total}%), {seconds:.0f} s"
    if left is not None and 0 < done < total:
        line += f", about {left:.0f} s left"
    return line


@contextlib.contextmanager
def bar_as_lines(label: str, every: float | None = None) -> Iterator[None]:
    """Inside: a progress bar a library draws on stderr (tqdm: '\\r' and the bar's state)
    becomes a plain line `label: <state>` every `every` seconds and one at the end, for a
    log or a pipe, where the bar would be one endless line; other writes pass through."""
    real = sys.stderr
    lines = _BarLines(real, label, HEARTBEAT_SECONDS if every is None else every)
    with contextlib.redirect_stderr(lines):  # type: ignore[type-var]
        yield
    if lines.state and _progress_part(lines.said) != _progress_part(lines.state):  # the end, unless just said
        real.write(f"{label}: {lines.state}\n")
        real.flush()


def _progress_part(state: str) -> str:
    """A tqdm state without its timings ('Batches: 100%|###| 30/30 [00:01<00:00, ...]')."""
    return state.split("[", 1)[0]


class _BarLines(io.TextIOBase):
    def __init__(self, real: Any, label: str, every: float) -> None:
        self.real, self.label, self.every = real, label, every
        self.state = self.said = ""
        self.last = time.monotonic()
        self.in_bar = False  # the last write was the bar's: its closing newline is the bar's too

    def write(self, text: str) -> int:
        if "\r" not in text:
            if text.strip() or not self.in_bar:
                self.real.write(text)
            self.in_bar = False
            return len(text)
        self.in_bar = True
        self.state = text.rsplit("\r", 1)[-1].strip() or self.state
        if self.state and time.monotonic() - self.last >= self.every:
            self.real.write(f"{self.label}: {self.state}\n")
            self.real.flush()
            self.said, self.last = self.state, time.monotonic()
        return len(text)

    def flush(self) -> None:
        self.real.flush()

    def isatty(self) -> bool:
        return False
