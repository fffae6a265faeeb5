"""Progress bars for long steps (rich), silent when disabled or not on a terminal."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def progress_iter(
    items: Sequence[T], description: str, show: bool = True, total_items: int | None = None, unit: str = ""
) -> Iterator[T]:
    """Yield items while advancing a bar by len(item) (when sized and total_items given) or 1."""
    if not show or not items:
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
        task = bar.add_task(description, total=total_items or len(items))
        for item in items:
            yield item
            step = len(item) if total_items is not None and hasattr(item, "__len__") else 1  # type: ignore[arg-type]
            bar.advance(task, step)
