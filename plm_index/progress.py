"""Progress bars for long steps (rich), silent when disabled or not on a terminal."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sized
from typing import TypeVar

T = TypeVar("T")


def progress_iter(
    items: Iterable[T],
    description: str,
    show: bool = True,
    total_items: int | None = None,
    unit: str = "",
    step: Callable[[T], int] | None = None,
) -> Iterator[T]:
    """Yield items while advancing a bar by `step(item)`, else by len(item) (when sized and
    total_items given), else by 1. An unsized iterable (a generator) needs total_items."""
    if not show or (isinstance(items, Sized) and not len(items)):
        yield from items
        return
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
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task(description, total=total_items or len(items))  # type: ignore[arg-type]
        for item in items:
            yield item
            if step is not None:
                bar.advance(task, step(item))
            else:
                sized = total_items is not None and isinstance(item, Sized)
                bar.advance(task, len(item) if sized else 1)  # type: ignore[arg-type]
