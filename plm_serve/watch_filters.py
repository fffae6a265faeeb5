"""Which files a folder watch reads: never an editor's or the OS's scratch file or anything
hidden (`scratch`), and of the rest only those the job's loader would read
(`loader_filter_for`: the loader's own rule, else its glob `pattern`, see `glob_filter`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

_SCRATCH_SUFFIXES = (".swp", ".swx", ".swo", ".tmp", ".part", ".crdownload")


def scratch(name: str) -> bool:
    """An editor or OS scratch file, or a hidden file or folder: never indexed."""
    return (
        name.startswith(".")  # .#foo locks, .DS_Store, .git/, .foo.md.swp
        or name.endswith("~")
        or (name.startswith("#") and name.endswith("#"))
        or name.lower().endswith(_SCRATCH_SUFFIXES)
        or name == "4913"  # vim's probe for whether it may write in the folder
    )


def under(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or lies below it, by name (symlinks are not resolved)."""
    return path == folder or folder in path.parents


def glob_filter(pattern: str, roots: Sequence[Path]) -> Callable[[Path], bool]:
    """Whether a path is one `root.glob(pattern)` yields for one of the roots (`**`: any depth)."""
    parts = tuple(p for p in pattern.replace("\\", "/").split("/") if p not in ("", "."))

    def match(names: tuple[str, ...], pat: tuple[str, ...]) -> bool:
        if not pat:
            return not names
        if pat[0] == "**":
            return any(match(names[i:], pat[1:]) for i in range(len(names) + 1))
        return bool(names) and fnmatchcase(names[0], pat[0]) and match(names[1:], pat[1:])

    def accepts(path: Path) -> bool:
        return any(match(path.relative_to(r).parts, parts) for r in roots if under(path, r))

    return accepts


def loader_filter_for(loader: Any, roots: Sequence[Path]) -> Callable[[Path], bool] | None:
    """Which files the loader reads: its own `accepts(path)` or `wants(root, path)` when it
    has one (markdown_dir: its pattern, `exclude`, hidden and skipped folders), else its
    config's glob `pattern`, else None (every file that is not scratch)."""
    accepts = getattr(loader, "accepts", None)
    if callable(accepts):
        return accepts  # type: ignore[no-any-return]
    wants = getattr(loader, "wants", None)
    if callable(wants):  # the loader's own rule: pattern, exclude, hidden and skipped folders
        return lambda path: any(under(path, r) and wants(r, path) for r in roots)
    pattern = getattr(getattr(loader, "config", None), "pattern", None)
    return glob_filter(pattern, roots) if isinstance(pattern, str) else None
