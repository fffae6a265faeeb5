"""Where a command will write, checked before the work that leads to it (an evaluation, a
tuning run), so a bad `--out` fails in a second instead of after every trial."""

from __future__ import annotations

import os
from pathlib import Path

from plm_core.errors import PlmUserError


def _check_parents(path: Path, option: str) -> None:
    """Every existing ancestor of `path` is a writable folder."""
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise PlmUserError(f"{option} {path}: {parent} is a file, not a folder; choose another path")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise PlmUserError(f"{option} {path}: {parent} is not writable; choose another path")
            return


def check_output_folder(path: Path, option: str = "--out") -> None:
    """`path` can be a report folder: absent (it will be created) or a folder."""
    if path.exists() and not path.is_dir():
        raise PlmUserError(f"{option} {path} is a file: it takes a folder for the report; choose another path")
    _check_parents(path / "x", option)


def check_output_file(path: Path, option: str = "--out") -> None:
    """`path` can be written as a file: not a folder, inside a folder that is or can be made."""
    if path.is_dir():
        raise PlmUserError(f"{option} {path} is a folder: it takes a file name, e.g. {path / 'tuned.toml'}")
    _check_parents(path, option)
