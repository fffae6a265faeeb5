"""`plm adapt` checks every argument before any work: a budget that is not a positive number
of minutes (-1 ran as 0, nan never stopped), a learning rate or seed out of range, and an
`--out` that is a file or lies under one, each one line naming the option."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from plm_core.errors import PlmUserError
from plm_eval.adapt_command import adapt

CONFIG = """
[job]
name = "adapt-args"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
[query.retrieve]
use = "dense"
[embedder]
use = "sentence_transformers"
model = "all-MiniLM-L6-v2"
"""


def run(tmp_path: Path, **given: Any) -> None:
    config = tmp_path / "job.toml"
    config.write_text(CONFIG)
    args: dict[str, Any] = {"config": config, "out_dir": tmp_path / "out", "index": tmp_path / "no-index"}
    adapt(**{**args, **given})


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"budget_minutes": -1.0}, "--budget-minutes -1.0: give a number of minutes above 0"),
        ({"budget_minutes": 0.0}, "--budget-minutes 0.0: give a number of minutes above 0"),
        ({"budget_minutes": math.nan}, "--budget-minutes nan: give a number of minutes above 0"),
        ({"budget_minutes": math.inf}, "--budget-minutes inf: give a number of minutes above 0"),
        ({"learning_rate": math.nan}, "--learning-rate nan: give a number above 0 and below 1"),
        ({"learning_rate": -2e-5}, "--learning-rate -2e-05: give a number above 0 and below 1"),
        ({"learning_rate": 0.0}, "--learning-rate 0.0"),
        ({"learning_rate": 5.0}, "--learning-rate 5.0"),
        ({"seed": -1}, "--seed -1: give a whole number from 0"),
        ({"seed": 2**64}, "--seed 18446744073709551616"),
    ],
)
def test_bad_numbers_are_refused_before_any_work(tmp_path: Path, given: dict[str, Any], message: str) -> None:
    # The config is not even read: the index named does not exist, yet the number is what is named.
    with pytest.raises(PlmUserError) as caught:
        run(tmp_path, **given)
    assert message in str(caught.value)


def test_an_out_that_is_a_file_or_under_one_is_refused_before_any_work(tmp_path: Path) -> None:
    afile = tmp_path / "taken.txt"
    afile.write_text("not a folder")
    with pytest.raises(PlmUserError, match=f"--out {afile} is a file"):
        run(tmp_path, out_dir=afile)
    with pytest.raises(PlmUserError, match=f"{afile} is a file, not a folder"):
        run(tmp_path, out_dir=afile / "adapted")
    assert afile.read_text() == "not a folder"
