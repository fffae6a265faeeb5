"""The third-party example plugin, installed as its own package, seen and used by plm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plm_core.records import Query

REPO = Path(__file__).resolve().parents[2]

example = pytest.importorskip(
    "plm_example_plugin", reason="install it: pip install -e examples/plm-example-plugin (CI does)"
)


def test_plm_plugins_lists_the_example_plugin() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "plm_core.cli", "plugins", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ},
        timeout=60,
    )
    rows = [r for r in json.loads(res.stdout) if r["name"] == "question_normalizer"]
    assert len(rows) == 1
    assert rows[0]["package"] == "plm-example-plugin" and rows[0]["version"] == "0.1.0"


def test_normalizer_drops_boilerplate() -> None:
    stage = example.QuestionNormalizer()
    out = stage.run(Query(text="How do I rotate the API keys?", k=3))
    assert out.text == "rotate api keys" and out.k == 3
