"""Help text as written, for every command of `plm` (issue 23): words in [brackets] are not
eaten as rich markup, `-h` works everywhere, metavars read PATH / TEXT / PATHS..."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import typer

from plm_index.cli import loaded_app
from plm_index.cli_kit import plain_help


def command_paths(command: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield prefix
    for name, sub in getattr(command, "commands", {}).items():
        yield from command_paths(sub, (*prefix, name))


ROOT = plain_help(typer.main.get_command(loaded_app()))
PATHS = list(command_paths(ROOT))


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "plm")
def test_every_command_takes_h_and_prints_plain_metavars(path: tuple[str, ...], capsys: pytest.CaptureFixture) -> None:
    code = ROOT.main(args=[*path, "-h"], prog_name="plm", standalone_mode=False)
    text = capsys.readouterr().out
    assert code in (0, None) and text.startswith(f"Usage: plm {' '.join(path)}".rstrip()), text
    assert "-h, --help" in text
    assert not re.search(r"<(list\[|path|str|int|float|bool)", text), text
    assert not re.search(r"\{[a-z_]+\}", text), text


def test_bracketed_words_survive_in_the_real_cli() -> None:
    res = subprocess.run([sys.executable, "-m", "plm_index.cli", "ingest", "-h"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "Usage: plm ingest [OPTIONS] PATHS..." in res.stdout
    assert "Files or folders for the [index] loader." in res.stdout
    assert "([executor] use)" in " ".join(res.stdout.split())
